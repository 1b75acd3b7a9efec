//! Whole passes: the new ReplicaSet's shape, revisions, rollback by template, collisions,
//! adoption, pause, deletion and the empty selector.

use super::super::fixtures::*;
use super::super::revision::{REVISION, REVISION_HISTORY, annotation as ann};
use super::super::template::HASH_LABEL;
use super::*;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn created(p: &Plan) -> Vec<ReplicaSet> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateReplicaSet(rs) => Some((**rs).clone()),
            _ => None,
        })
        .collect()
}

fn revision_set(p: &Plan) -> Option<String> {
    p.actions.iter().find_map(|a| match a {
        Action::SetRevision(r) => Some(r.clone()),
        _ => None,
    })
}

#[test]
fn a_new_deployment_gets_a_hash_named_owned_replica_set_at_revision_one() {
    let mut d = deployment(3, "25%", "25%");
    d.metadata.annotations = Some(
        [(
            "kubernetes.io/change-cause".to_string(),
            "kubectl apply --filename=nginx.yaml".to_string(),
        )]
        .into(),
    );
    let p = run(&d, &[], &[], t(1));
    let rss = created(&p);
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let name = rs.metadata.name.clone().unwrap();
    let hash = rs.metadata.labels.as_ref().unwrap()[HASH_LABEL].clone();
    assert_eq!(
        name,
        format!("web-{hash}"),
        "DEP-07: the suffix is the label"
    );
    let spec = rs.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(
        spec.selector.match_labels.as_ref().unwrap()[HASH_LABEL],
        hash
    );
    let tpl_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap();
    assert_eq!(tpl_labels[HASH_LABEL], hash);
    assert_eq!(tpl_labels["app"], "web");
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Deployment", "d-uid", Some(true), Some(true))
    );
    assert_eq!(ann(rs, REVISION), Some("1"));
    assert_eq!(
        ann(rs, "deployment.kubernetes.io/desired-replicas"),
        Some("3")
    );
    assert_eq!(ann(rs, "deployment.kubernetes.io/max-replicas"), Some("4"));
    assert_eq!(
        ann(rs, "kubernetes.io/change-cause"),
        Some("kubectl apply --filename=nginx.yaml")
    );
    assert_eq!(revision_set(&p).as_deref(), Some("1"));
    assert_eq!(
        events(&p),
        vec![format!("Scaled up replica set {name} to 3 from 0")]
    );
}

#[test]
fn the_replica_set_name_is_stable_across_passes_and_restarts() {
    let d = deployment(3, "25%", "25%");
    let a = created(&run(&d, &[], &[], t(1)))[0].metadata.name.clone();
    let b = created(&run(&d.clone(), &[], &[], t(99)))[0]
        .metadata
        .name
        .clone();
    assert_eq!(a, b);
}

#[test]
fn each_template_change_is_the_next_revision() {
    let mut sim = Sim::settled(with_image(deployment(2, "1", "0"), "nginx:1"));
    for (img, want) in [("nginx:2", "2"), ("nginx:3", "3")] {
        sim.set_template_image(img);
        sim.settle(|_| true);
        let rs = sim.rss.iter().find(|r| image(r) == img).unwrap();
        assert_eq!(ann(rs, REVISION), Some(want), "{img}");
        assert_eq!(
            sim.d.metadata.annotations.as_ref().unwrap()[REVISION],
            want,
            "the deployment carries the revision of its new replica set"
        );
    }
}

#[test]
fn scaling_is_not_a_rollout() {
    let mut sim = Sim::settled(with_image(deployment(3, "1", "0"), "nginx:1"));
    sim.set_replicas(10);
    sim.settle(|_| true);
    assert_eq!(sim.rss.len(), 1, "T-DEP-16: no new replica set");
    assert_eq!(sim.size_of("nginx:1"), 10);
    assert_eq!(ann(&sim.rss[0], REVISION), Some("1"));
}

#[test]
fn rollback_reuses_the_matching_replica_set_with_the_next_revision() {
    // Revisions 1 (1.14.2), 2 (1.16.1), 3 (1.161, stuck), then `rollout undo`.
    let mut sim = Sim::settled(with_image(deployment(3, "25%", "25%"), "nginx:1.14.2"));
    sim.set_template_image("nginx:1.16.1");
    sim.settle(|_| true);
    sim.set_template_image("nginx:1.161");
    sim.settle(|rs| image(rs) != "nginx:1.161");
    let before = sim.rss.len();
    sim.set_template_image("nginx:1.16.1");
    sim.settle(|rs| image(rs) != "nginx:1.161");
    assert_eq!(sim.rss.len(), before, "no new replica set");
    let reused = sim.rss.iter().find(|r| image(r) == "nginx:1.16.1").unwrap();
    assert_eq!(ann(reused, REVISION), Some("4"));
    assert_eq!(ann(reused, REVISION_HISTORY), Some("2"));
    assert_eq!(sim.size_of("nginx:1.16.1"), 3);
    assert_eq!(sim.size_of("nginx:1.161"), 0);
    assert_eq!(sim.d.metadata.annotations.as_ref().unwrap()[REVISION], "4");
    let bad = sim.rss.iter().find(|r| image(r) == "nginx:1.161").unwrap();
    assert!(
        sim.events.iter().any(|e| e
            == &format!(
                "Scaled down replica set {} to 0 from 1",
                bad.metadata.name.as_deref().unwrap()
            )),
        "{:?}",
        sim.events
    );
    let s = sim.d.status.clone().unwrap();
    assert_eq!(progressing(&s).1, "NewReplicaSetAvailable");
}

#[test]
fn rollback_matches_templates_ignoring_the_hash_label_and_defaults_left_empty() {
    let d = deployment(3, "25%", "25%");
    // The old ReplicaSet carries the hash label and an empty volume list.
    let mut old = new_rs_of(&d, "web-abc", 2, 0).with_status(0, 0, 0);
    if let Some(tpl) = old.spec.as_mut().and_then(|s| s.template.as_mut()) {
        tpl.spec.as_mut().unwrap().volumes = Some(vec![]);
    }
    let other = rs("web-xyz", 3, 3).with_status(3, 3, 3).sized_for(3, 4);
    let p = run(&d, &[other, old], &[], t(5));
    assert!(created(&p).is_empty(), "{:?}", writes(&p));
    // First the revision (and history), then the first scale-up step, as in a rollout.
    assert_eq!(writes(&p), vec!["web-abc -> 0", "web-abc -> 1"]);
    let update = p
        .actions
        .iter()
        .find_map(|a| match a {
            Action::UpdateReplicaSet(rs) => Some(rs.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(ann(&update, REVISION), Some("4"));
    assert_eq!(ann(&update, REVISION_HISTORY), Some("2"));
}

#[test]
fn a_name_taken_by_another_replica_set_bumps_the_collision_count() {
    let d = deployment(3, "25%", "25%");
    let name = created(&run(&d, &[], &[], t(1)))[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let mut squatter = rs(&name, 1, 1);
    squatter.metadata.owner_references = None;
    squatter.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let p = run(&d, &[squatter.clone()], &[], t(2));
    assert!(created(&p).is_empty());
    let s = written_status(&p).unwrap();
    assert_eq!(s.collision_count, Some(1));
    let mut bumped = d.clone();
    bumped.status = Some(s);
    let again = created(&run(&bumped, &[squatter], &[], t(3)));
    assert_ne!(again[0].metadata.name.as_deref(), Some(name.as_str()));
}

#[test]
fn matching_orphans_are_adopted_and_strays_released() {
    let d = deployment(3, "25%", "25%");
    let orphan = new_rs_of(&d, "web-abc", 1, 3)
        .with_status(3, 3, 3)
        .sized_for(3, 4)
        .orphan();
    let mut stray = rs("web-old", 1, 0);
    stray.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let p = run(&d, &[orphan, stray], &[], t(1));
    assert_eq!(
        p.actions[..2],
        [
            Action::AdoptReplicaSet {
                name: "web-abc".into(),
                uid: "uid-web-abc".into()
            },
            Action::ReleaseReplicaSet {
                name: "web-old".into(),
                uid: "uid-web-old".into()
            },
        ]
    );
    assert!(created(&p).is_empty(), "the adopted one is the new one");
}

#[test]
fn a_paused_deployment_does_not_roll_out_but_still_scales() {
    let mut sim = Sim::settled(with_image(deployment(3, "1", "0"), "nginx:1"));
    sim.set_paused(true);
    sim.set_template_image("nginx:2");
    sim.settle(|_| true);
    assert_eq!(sim.rss.len(), 1, "no new replica set while paused");
    let s = sim.d.status.clone().unwrap();
    assert_eq!(
        progressing(&s),
        (
            "Unknown".to_string(),
            "DeploymentPaused".to_string(),
            "Deployment is paused".to_string()
        )
    );
    sim.set_replicas(5);
    sim.settle(|_| true);
    assert_eq!(sim.size_of("nginx:1"), 5, "scaling still happens");
    // Resume: one new replica set with all the changes.
    sim.set_paused(false);
    let p = sim.pass();
    assert_eq!(
        progressing(&written_status(&p).unwrap()).1,
        "NewReplicaSetCreated"
    );
    sim.settle(|_| true);
    assert_eq!(sim.rss.len(), 2);
    assert_eq!(sim.size_of("nginx:2"), 5);
    assert_eq!(sim.size_of("nginx:1"), 0);
}

#[test]
fn resuming_marks_progress_resumed_before_the_rollout_step() {
    let mut sim = Sim::settled(with_image(deployment(3, "1", "0"), "nginx:1"));
    sim.set_paused(true);
    sim.pass();
    assert_eq!(
        progressing(sim.d.status.as_ref().unwrap()).1,
        "DeploymentPaused"
    );
    sim.set_paused(false);
    let p = run(&sim.d, &sim.rss, &[], t(5000));
    let first = p
        .actions
        .iter()
        .find_map(|a| match a {
            Action::UpdateStatus(s) => Some(progressing(s)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        first,
        (
            "Unknown".to_string(),
            "DeploymentResumed".to_string(),
            "Deployment is resumed".to_string()
        )
    );
    assert_eq!(
        progressing(&written_status(&p).unwrap()).1,
        "NewReplicaSetAvailable",
        "the rollout step that follows in the same pass"
    );
}

#[test]
fn a_paused_deployment_scales_proportionally_mid_rollout() {
    let mut sim = Sim::settled(with_image(deployment(10, "3", "2"), "nginx:1"));
    sim.set_template_image("nginx:bad");
    sim.settle(|rs| image(rs) != "nginx:bad");
    sim.set_paused(true);
    sim.set_replicas(15);
    sim.pass();
    assert_eq!((sim.size_of("nginx:1"), sim.size_of("nginx:bad")), (11, 7));
}

#[test]
fn a_deployment_being_deleted_only_updates_its_status() {
    let mut d = deployment(3, "25%", "25%");
    d.metadata.deletion_timestamp = Some(Time(t(0)));
    let old = rs("web-old", 1, 3).with_status(3, 3, 3).sized_for(3, 4);
    let p = run(&d, &[old], &[], t(1));
    assert!(writes(&p).is_empty());
    assert_eq!(written_status(&p).unwrap().available_replicas, Some(3));
}

#[test]
fn an_empty_selector_is_refused_with_a_warning() {
    let mut d = deployment(3, "25%", "25%");
    if let Some(s) = d.spec.as_mut() {
        s.selector = Default::default();
    }
    let p = run(&d, &[rs("web-old", 1, 3)], &[], t(1));
    assert_eq!(
        events(&p),
        vec!["This deployment is selecting all pods. A non-empty selector is required."]
    );
    assert!(writes(&p).is_empty());
    assert_eq!(written_status(&p).unwrap().observed_generation, Some(1));
}

#[test]
fn a_restart_annotation_rolls_out_a_new_replica_set() {
    let mut sim = Sim::settled(with_image(deployment(2, "1", "0"), "nginx:1"));
    if let Some(s) = sim.d.spec.as_mut() {
        s.template.metadata.as_mut().unwrap().annotations = Some(
            [(
                "kubectl.kubernetes.io/restartedAt".to_string(),
                "2024-05-01T10:00:00Z".to_string(),
            )]
            .into(),
        );
    }
    sim.bump_generation();
    sim.settle(|_| true);
    assert_eq!(sim.rss.len(), 2);
    let sizes: Vec<i32> = sim.sizes().into_iter().map(|(_, n)| n).collect();
    assert_eq!(sizes, vec![0, 2]);
}

#[test]
fn the_observed_generation_follows_the_deployment() {
    let mut d = deployment(3, "25%", "25%");
    d.metadata.generation = Some(7);
    let p = run(&d, &[], &[], t(1));
    assert_eq!(written_status(&p).unwrap().observed_generation, Some(7));
}

#[test]
fn a_failed_create_is_reported_unless_the_replica_set_exists_or_is_forbidden() {
    use berth_registry::RegistryError;
    use berth_shared::resource::REPLICA_SETS;
    let with_deadline = deployment(3, "25%", "25%");
    let mut without = with_deadline.clone();
    if let Some(s) = without.spec.as_mut() {
        s.progress_deadline_seconds = None;
    }
    let quota = || RegistryError::Forbidden("exceeded quota".into());
    let exists = || RegistryError::already_exists(REPLICA_SETS, "web-abc");
    let invalid = || RegistryError::BadRequest("bad".into());
    // (deployment, error, a status written, an event recorded)
    let cases = [
        (&with_deadline, exists(), false, false),
        (&with_deadline, quota(), false, false),
        (&with_deadline, invalid(), true, true),
        (&without, invalid(), false, true),
    ];
    for (d, e, status, event) in cases {
        let actions = failed_create(d, "web-abc", &e, t(3));
        let wrote = actions.iter().any(|a| matches!(a, Action::UpdateStatus(_)));
        let warned = actions.iter().any(|a| {
            matches!(a, Action::Event { kind: EventType::Warning, reason, message }
                if *reason == progress::FAILED_RS_CREATE
                    && message.starts_with("Failed to create new replica set \"web-abc\": "))
        });
        assert_eq!((wrote, warned), (status, event), "{e}");
        assert!(
            !wrote || matches!(actions[0], Action::UpdateStatus(_)),
            "status first"
        );
    }
}
