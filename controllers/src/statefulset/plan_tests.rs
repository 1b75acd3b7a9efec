//! Table tests of the StatefulSet pass planner: ordering, scaling, updates with partition and
//! maxUnavailable, and the retention policy's owner changes.

use super::*;
use crate::statefulset::view::{PodVolumes, StatefulSet};
use crate::views::Pod;
use serde_json::json;

const NOW: &str = "2026-11-25T10:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("now")
}

fn web(patch: Value) -> StatefulSet {
    let mut v = json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "set-uid", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "serviceName": "nginx",
            "replicas": 3, "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}});
    json_patch::merge(&mut v, &patch);
    StatefulSet::from_value(&v).expect("set")
}

/// Pod `web-<ord>` in `phase`, Ready since `ready_for` seconds ago when given, of `revision`.
fn pod(set: &StatefulSet, ord: i32, phase: &str, ready_for: Option<i64>, revision: &str) -> SetPod {
    let mut v = crate::statefulset::identity::new_pod(set, &set.pod_template, ord, revision);
    v["metadata"]["uid"] = json!(format!("uid-{ord}"));
    v["status"] = json!({"phase": phase});
    if let Some(secs) = ready_for {
        let since = now() - SignedDuration::from_secs(secs);
        v["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": since.to_string()}]);
    }
    SetPod {
        pod: Arc::new(Pod::from_value(&v)),
        volumes: Arc::new(PodVolumes::from_value(&v)),
    }
}

fn ready(set: &StatefulSet, ord: i32, revision: &str) -> SetPod {
    pod(set, ord, "Running", Some(100), revision)
}

fn deleting(mut p: SetPod) -> SetPod {
    Arc::make_mut(&mut p.pod).deleting = true;
    p
}

fn claims(set: &StatefulSet, ords: &[i32]) -> BTreeMap<String, Arc<Claim>> {
    ords.iter()
        .map(|o| {
            let name = format!("www-{}-{o}", set.name);
            (
                name.clone(),
                Arc::new(Claim {
                    name,
                    uid: format!("claim-{o}"),
                    ..Claim::default()
                }),
            )
        })
        .collect()
}

fn revs(set: &StatefulSet) -> Revisions<'_> {
    Revisions {
        current: "web-old",
        current_template: &set.pod_template,
        update: "web-new",
    }
}

fn same_revision(set: &StatefulSet) -> Revisions<'_> {
    Revisions {
        current: "web-new",
        current_template: &set.pod_template,
        update: "web-new",
    }
}

/// The actions in short: `create-claim www-web-0`, `create web-0@web-new`, `delete web-2
/// (Update)`, `fix web-1`, `owners www-web-1 [Pod]`.
/// The short form of a pass over `pods` with the claims of ordinals `ords`.
fn planned(set: &StatefulSet, revs: &Revisions, pods: &[SetPod], ords: &[i32]) -> Vec<String> {
    short(&plan(set, revs, pods, &claims(set, ords), now()))
}

fn short(pass: &Pass) -> Vec<String> {
    pass.actions
        .iter()
        .map(|a| match a {
            Action::CreateClaim { claim, .. } => {
                format!(
                    "create-claim {}",
                    claim["metadata"]["name"].as_str().unwrap_or_default()
                )
            }
            Action::CreatePod { pod, .. } => format!(
                "create {}@{}",
                pod["metadata"]["name"].as_str().unwrap_or_default(),
                pod["metadata"]["labels"][REVISION_LABEL]
                    .as_str()
                    .unwrap_or_default()
            ),
            Action::DeletePod { name, why, .. } => format!("delete {name} ({why:?})"),
            Action::FixPod { name, .. } => format!("fix {name}"),
            Action::SetClaimOwners { claim, owners, .. } => format!(
                "owners {claim} [{}]",
                owners
                    .iter()
                    .map(|o| o.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        })
        .collect()
}

#[test]
fn ordered_ready_creates_web_0_with_its_claim_first_and_stops() {
    let set = web(json!({}));
    let pass = plan(&set, &same_revision(&set), &[], &BTreeMap::new(), now());
    assert_eq!(
        short(&pass),
        ["create-claim www-web-0", "create web-0@web-new"]
    );
}

#[test]
fn the_next_ordinal_waits_until_its_predecessor_is_running_and_ready() {
    let set = web(json!({}));
    let r = same_revision(&set);
    let pending = [pod(&set, 0, "Pending", None, "web-new")];
    assert!(planned(&set, &r, &pending, &[0]).is_empty());
    let running_not_ready = [pod(&set, 0, "Running", None, "web-new")];
    assert!(planned(&set, &r, &running_not_ready, &[0]).is_empty());
    let up = [ready(&set, 0, "web-new")];
    assert_eq!(
        planned(&set, &r, &up, &[0]),
        ["create-claim www-web-1", "create web-1@web-new"]
    );
}

#[test]
fn min_ready_seconds_holds_the_next_ordinal_and_requeues_when_it_has_passed() {
    let set = web(json!({"spec": {"minReadySeconds": 10}}));
    let r = same_revision(&set);
    let fresh = [pod(&set, 0, "Running", Some(4), "web-new")];
    let pass = plan(&set, &r, &fresh, &claims(&set, &[0]), now());
    assert!(pass.actions.is_empty());
    assert_eq!(pass.requeue_after, Some(Duration::from_secs(7)));
    assert_eq!(pass.status.ready_replicas, 1);
    assert_eq!(pass.status.available_replicas, 0);
    let settled = [pod(&set, 0, "Running", Some(11), "web-new")];
    assert_eq!(
        planned(&set, &r, &settled, &[0]),
        ["create-claim www-web-1", "create web-1@web-new"]
    );
}

#[test]
fn if_web_0_fails_before_web_2_is_made_web_2_waits_for_it() {
    let set = web(json!({}));
    let pods = [
        pod(&set, 0, "Failed", None, "web-new"),
        ready(&set, 1, "web-new"),
    ];
    let pass = plan(
        &set,
        &same_revision(&set),
        &pods,
        &claims(&set, &[0, 1]),
        now(),
    );
    assert_eq!(
        short(&pass),
        ["delete web-0 (Finished)"],
        "re-created once gone"
    );
}

#[test]
fn a_terminating_pod_blocks_its_successors() {
    let set = web(json!({}));
    let pods = [deleting(ready(&set, 0, "web-new"))];
    assert!(
        plan(
            &set,
            &same_revision(&set),
            &pods,
            &claims(&set, &[0]),
            now()
        )
        .actions
        .is_empty()
    );
}

#[test]
fn parallel_creates_every_missing_pod_at_once() {
    let set = web(json!({"spec": {"podManagementPolicy": "Parallel"}}));
    let pass = plan(&set, &same_revision(&set), &[], &BTreeMap::new(), now());
    assert_eq!(
        short(&pass),
        [
            "create-claim www-web-0",
            "create web-0@web-new",
            "create-claim www-web-1",
            "create web-1@web-new",
            "create-claim www-web-2",
            "create web-2@web-new"
        ]
    );
}

#[test]
fn scale_down_deletes_the_highest_ordinal_first_one_at_a_time() {
    let set = web(json!({"spec": {"replicas": 2}}));
    let r = same_revision(&set);
    let pods: Vec<SetPod> = (0..5).map(|o| ready(&set, o, "web-new")).collect();
    let c = claims(&set, &[0, 1, 2, 3, 4]);
    assert_eq!(
        short(&plan(&set, &r, &pods, &c, now())),
        ["delete web-4 (ScaleDown)"]
    );
    let mut going = pods.clone();
    going[4] = deleting(going[4].clone());
    assert!(
        plan(&set, &r, &going, &c, now()).actions.is_empty(),
        "web-3 waits for web-4 to be gone"
    );
    assert_eq!(
        short(&plan(&set, &r, &pods[..4], &c, now())),
        ["delete web-3 (ScaleDown)"],
        "claims are kept (Retain)"
    );
}

#[test]
fn scale_down_waits_while_a_lower_ordinal_is_unhealthy() {
    let set = web(json!({"spec": {"replicas": 1}}));
    let pods = [
        pod(&set, 0, "Running", None, "web-new"),
        ready(&set, 1, "web-new"),
        ready(&set, 2, "web-new"),
    ];
    assert!(
        plan(
            &set,
            &same_revision(&set),
            &pods,
            &claims(&set, &[0, 1, 2]),
            now()
        )
        .actions
        .is_empty()
    );
}

#[test]
fn parallel_scale_down_deletes_every_condemned_pod() {
    let set = web(json!({"spec": {"replicas": 1, "podManagementPolicy": "Parallel"}}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-new")).collect();
    assert_eq!(
        planned(&set, &same_revision(&set), &pods, &[0, 1, 2]),
        ["delete web-2 (ScaleDown)", "delete web-1 (ScaleDown)"]
    );
}

#[test]
fn when_scaled_delete_gives_the_condemned_pods_their_claims_before_deleting_them() {
    let set = web(json!({"spec": {"replicas": 1,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}}}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-new")).collect();
    assert_eq!(
        planned(&set, &same_revision(&set), &pods, &[0, 1, 2]),
        [
            "owners www-web-2 [Pod]",
            "owners www-web-1 [Pod]",
            "delete web-2 (ScaleDown)"
        ]
    );
}

#[test]
fn when_deleted_delete_makes_the_set_own_new_and_existing_claims() {
    let set = web(json!({"spec": {"replicas": 2,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}}}));
    let pods = [ready(&set, 0, "web-new")];
    let pass = plan(
        &set,
        &same_revision(&set),
        &pods,
        &claims(&set, &[0]),
        now(),
    );
    assert_eq!(
        short(&pass),
        [
            "owners www-web-0 [StatefulSet]",
            "create-claim www-web-1",
            "create web-1@web-new"
        ]
    );
    let Action::CreateClaim { claim, .. } = &pass.actions[1] else {
        panic!("{pass:?}")
    };
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["kind"],
        "StatefulSet"
    );
    assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], "set-uid");
}

#[test]
fn a_claim_still_owned_by_a_condemned_predecessor_holds_the_pod_back() {
    let set = web(json!({}));
    let mut c = claims(&set, &[0]);
    c.insert(
        "www-web-0".into(),
        Arc::new(Claim {
            name: "www-web-0".into(),
            owners: vec![OwnerRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "web-0".into(),
                uid: "gone".into(),
            }],
            ..Claim::default()
        }),
    );
    assert!(
        plan(&set, &same_revision(&set), &[], &c, now())
            .actions
            .is_empty()
    );
}

#[test]
fn an_existing_claim_is_reused_by_the_recreated_pod() {
    let set = web(json!({}));
    let pass = plan(&set, &same_revision(&set), &[], &claims(&set, &[0]), now());
    assert_eq!(short(&pass), ["create web-0@web-new"]);
}

#[test]
fn a_rolling_update_replaces_the_highest_ordinal_first() {
    let set = web(json!({}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-old")).collect();
    let pass = plan(&set, &revs(&set), &pods, &claims(&set, &[0, 1, 2]), now());
    assert_eq!(short(&pass), ["delete web-2 (Update)"]);
    assert_eq!(pass.status.current_replicas, 3);
    assert_eq!(pass.status.updated_replicas, 0);
    assert_eq!(pass.status.current_revision, "web-old");
}

#[test]
fn the_update_waits_for_the_replaced_pod_to_be_ready_then_takes_the_next() {
    let set = web(json!({}));
    let c = claims(&set, &[0, 1, 2]);
    let r = revs(&set);
    let mut pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-old")).collect();
    pods[2] = pod(&set, 2, "Running", None, "web-new");
    assert!(plan(&set, &r, &pods, &c, now()).actions.is_empty());
    pods[2] = ready(&set, 2, "web-new");
    assert_eq!(
        short(&plan(&set, &r, &pods, &c, now())),
        ["delete web-1 (Update)"]
    );
}

#[test]
fn a_replaced_pod_comes_back_at_the_update_revision() {
    let set = web(json!({}));
    let pods = [ready(&set, 0, "web-old"), ready(&set, 1, "web-old")];
    assert_eq!(
        planned(&set, &revs(&set), &pods, &[0, 1, 2]),
        ["create web-2@web-new"]
    );
}

#[test]
fn the_rollout_completes_when_every_pod_is_updated_and_ready() {
    let set = web(json!({}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-new")).collect();
    let pass = plan(&set, &revs(&set), &pods, &claims(&set, &[0, 1, 2]), now());
    assert!(pass.actions.is_empty());
    assert_eq!(pass.status.current_revision, "web-new");
    assert_eq!(pass.status.current_replicas, 3);
    assert_eq!(pass.status.updated_replicas, 3);
}

#[test]
fn a_partition_updates_only_the_ordinals_at_or_above_it() {
    let set = web(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}));
    let c = claims(&set, &[0, 1, 2]);
    let r = revs(&set);
    let mut pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-old")).collect();
    assert_eq!(
        short(&plan(&set, &r, &pods, &c, now())),
        ["delete web-2 (Update)"]
    );
    pods[2] = ready(&set, 2, "web-new");
    let pass = plan(&set, &r, &pods, &c, now());
    assert!(
        pass.actions.is_empty(),
        "web-0 and web-1 stay at the old revision"
    );
    assert_eq!(pass.status.current_revision, "web-old", "not complete");
}

#[test]
fn below_the_partition_a_deleted_pod_comes_back_at_the_current_revision() {
    let set = web(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}));
    let pass = plan(&set, &revs(&set), &[], &claims(&set, &[0]), now());
    assert_eq!(short(&pass), ["create web-0@web-old"]);
}

#[test]
fn a_partition_above_the_replicas_updates_nothing() {
    let set = web(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 5}}}}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-old")).collect();
    assert!(
        plan(&set, &revs(&set), &pods, &claims(&set, &[0, 1, 2]), now())
            .actions
            .is_empty()
    );
}

#[test]
fn max_unavailable_replaces_that_many_at_once_counting_those_down_already() {
    let set = web(
        json!({"spec": {"replicas": 5, "podManagementPolicy": "Parallel",
        "updateStrategy": {"rollingUpdate": {"maxUnavailable": "40%"}}}}),
    );
    let c = claims(&set, &[0, 1, 2, 3, 4]);
    let r = revs(&set);
    let mut pods: Vec<SetPod> = (0..5).map(|o| ready(&set, o, "web-old")).collect();
    assert_eq!(
        short(&plan(&set, &r, &pods, &c, now())),
        ["delete web-4 (Update)", "delete web-3 (Update)"],
        "40% of 5 rounds up to 2"
    );
    pods[4] = pod(&set, 4, "Running", None, "web-new");
    assert_eq!(
        short(&plan(&set, &r, &pods, &c, now())),
        ["delete web-3 (Update)"]
    );
    pods[1] = pod(&set, 1, "Running", None, "web-old");
    assert!(
        plan(&set, &r, &pods, &c, now()).actions.is_empty(),
        "two down already"
    );
}

#[test]
fn on_delete_never_replaces_a_pod_itself() {
    let set = web(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    let pods: Vec<SetPod> = (0..3).map(|o| ready(&set, o, "web-old")).collect();
    let pass = plan(&set, &revs(&set), &pods, &claims(&set, &[0, 1, 2]), now());
    assert!(pass.actions.is_empty());
    assert_eq!(pass.status.current_revision, "web-old");
    assert_eq!(
        planned(&set, &revs(&set), &pods[..2], &[0, 1, 2]),
        ["create web-2@web-new"],
        "a deleted pod comes back at the update revision"
    );
}

#[test]
fn a_broken_update_stalls_and_reverting_the_template_alone_does_not_unstall_it() {
    // STS-22: web-2 was made at the broken revision and never becomes ready; the template is
    // reverted, so the update revision is the old, good one again.
    let set = web(json!({}));
    let c = claims(&set, &[0, 1, 2]);
    let reverted = Revisions {
        current: "web-good",
        current_template: &set.pod_template,
        update: "web-good",
    };
    let pods = [
        ready(&set, 0, "web-good"),
        ready(&set, 1, "web-good"),
        pod(&set, 2, "Pending", None, "web-bad"),
    ];
    assert!(plan(&set, &reverted, &pods, &c, now()).actions.is_empty());
    // Once the broken pod is deleted, it comes back at the good revision.
    assert_eq!(
        short(&plan(&set, &reverted, &pods[..2], &c, now())),
        ["create web-2@web-good"]
    );
}

#[test]
fn a_pod_whose_identity_drifted_is_fixed() {
    let set = web(json!({}));
    let mut p = ready(&set, 0, "web-new");
    Arc::make_mut(&mut Arc::make_mut(&mut p.pod).labels)
        .remove(crate::statefulset::view::POD_NAME_LABEL);
    assert_eq!(
        short(&plan(
            &set,
            &same_revision(&set),
            &[p, ready(&set, 1, "web-new"), ready(&set, 2, "web-new")],
            &claims(&set, &[0, 1, 2]),
            now()
        )),
        ["fix web-0"]
    );
}

#[test]
fn ordinals_start_where_the_set_says() {
    let set = web(json!({"spec": {"ordinals": {"start": 5}, "replicas": 2}}));
    let pass = plan(&set, &same_revision(&set), &[], &BTreeMap::new(), now());
    assert_eq!(
        short(&pass),
        ["create-claim www-web-5", "create web-5@web-new"]
    );
    let pods = [
        ready(&set, 0, "web-new"),
        ready(&set, 5, "web-new"),
        ready(&set, 6, "web-new"),
    ];
    assert_eq!(
        planned(&set, &same_revision(&set), &pods, &[0, 5, 6]),
        ["delete web-0 (ScaleDown)"],
        "ordinal 0 is outside 5..7"
    );
}

#[test]
fn a_set_being_deleted_only_counts() {
    let set = web(json!({"metadata": {"deletionTimestamp": NOW}}));
    let pass = plan(
        &set,
        &same_revision(&set),
        &[ready(&set, 0, "web-new")],
        &BTreeMap::new(),
        now(),
    );
    assert!(pass.actions.is_empty());
    assert_eq!(pass.status.replicas, 1);
}

fn revision(name: &str) -> Arc<Revision> {
    Arc::new(Revision::from_value(&json!({
        "metadata": {"name": name, "uid": format!("{name}-uid")},
        "data": {"spec": {"template": {"metadata": {"labels": {"rev": name}}}}}, "revision": 1})))
}

#[test]
fn the_current_revision_is_the_named_one_while_it_exists_else_the_update_revision() {
    let named = |n: &str| web(json!({"status": {"currentRevision": n}}));
    let revisions = [revision("web-a"), revision("web-b")];
    let cases = [
        // (status.currentRevision, the update revision, the current name, its template's label)
        ("web-a", "web-b", "web-a", Some("web-a")),
        ("web-b", "web-b", "web-b", None),
        ("web-gone", "web-b", "web-b", None),
        ("", "web-b", "web-b", None),
    ];
    for (status, update, want, label) in cases {
        let set = named(status);
        let (name, template) = current_revision(&set, &revisions, update);
        assert_eq!(name, want, "{status} / {update}");
        let rev = template
            .metadata
            .and_then(|m| m.labels)
            .and_then(|l| l.get("rev").cloned());
        assert_eq!(rev.as_deref(), label, "{status} / {update}");
    }
}

#[test]
fn revisions_named_by_a_pod_or_the_status_are_live() {
    let set = web(json!({}));
    let pods = [ready(&set, 0, "web-old"), ready(&set, 1, "web-new")];
    let live = live_revisions(&pods, "web-current", "web-new");
    assert_eq!(
        live.into_iter().collect::<Vec<_>>(),
        ["web-current", "web-new", "web-old"]
    );
}
