//! Finding or creating the Deployment's new ReplicaSet and keeping revisions in step (upstream
//! `getAllReplicaSetsAndSyncRevision`/`getNewReplicaSet`), scaling-event detection and the
//! status-only pass of a Deployment being deleted.
//!
//! The new ReplicaSet is the oldest one whose template equals the Deployment's ignoring the
//! hash label (DEP-09): after `kubectl rollout undo` that is the old ReplicaSet of the revision
//! rolled back to, which gets the next revision number instead of a new ReplicaSet being made.
//! Its name is `<deployment>-<hash>`; when another ReplicaSet already has that name (a hash
//! collision), `status.collisionCount` goes up by one and the next pass hashes again.
//!
//! Planner: pure, no I/O.

use super::claim::{controller_of, controller_ref};
use super::plan::{Action, Halt, Pass, by_creation, name};
use super::progress::{self, FOUND_NEW_RS, NEW_RS_CREATED, PROGRESSING};
use super::revision::{self, desired_replicas};
use super::rolling;
use super::template::{HASH_LABEL, compute_hash, equal_ignore_hash};
use berth_registry::events::EventType;
use berth_shared::k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// Upstream `FindNewReplicaSet`: the oldest ReplicaSet running the Deployment's template.
fn find_new(pass: &Pass<'_>) -> Option<usize> {
    let template = &pass.d.spec.as_ref()?.template;
    let mut idx: Vec<usize> = (0..pass.rss.len()).collect();
    pass.sort(&mut idx, by_creation);
    idx.into_iter().find(|i| {
        pass.rss[*i]
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, template))
    })
}

fn min_ready_seconds(pass: &Pass<'_>) -> i32 {
    pass.d
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// Finds the new ReplicaSet (into `pass.new`) and brings its annotations, `minReadySeconds`
/// and the Deployment's revision up to date; no ReplicaSet is created.
pub(super) fn sync_new_replica_set(pass: &mut Pass<'_>) -> Option<usize> {
    let new = find_new(pass);
    pass.new = new;
    let i = new?;
    let next = revision::max_revision(pass.old().into_iter().map(|o| &pass.rss[o])) + 1;
    let (desired, max) = (pass.desired(), pass.max_total());
    let min_ready = min_ready_seconds(pass);
    let mut copy = pass.rss[i].clone();
    let changed = revision::set_new_rs_annotations(&pass.d, &mut copy, next, true, desired, max);
    let spec = copy.spec.get_or_insert_with(Default::default);
    if changed || spec.min_ready_seconds.unwrap_or(0) != min_ready {
        spec.min_ready_seconds = (min_ready != 0).then_some(min_ready);
        pass.actions
            .push(Action::UpdateReplicaSet(Box::new(copy.clone())));
        pass.rss[i] = copy;
        // Upstream takes the Deployment's revision from this ReplicaSet on the next pass.
        return Some(i);
    }
    let rev = revision::revision_text(&pass.rss[i]).to_string();
    if revision::set_deployment_revision(&mut pass.d, &rev) {
        pass.actions.push(Action::SetRevision(rev));
    }
    let untracked = pass
        .d
        .status
        .as_ref()
        .and_then(|s| progress::condition(s, PROGRESSING))
        .is_none();
    if progress::has_progress_deadline(&pass.d) && untracked {
        let msg = format!("Found new replica set {:?}", name(&pass.rss[i]));
        let c = progress::new_condition(PROGRESSING, "True", FOUND_NEW_RS, msg, pass.now);
        progress::set_condition(pass.d.status.get_or_insert_with(Default::default), c);
    }
    Some(i)
}

/// The new ReplicaSet, created when missing (`Err(Halt)` after a name collision).
pub(super) fn ensure_new_replica_set(pass: &mut Pass<'_>) -> Result<usize, Halt> {
    if let Some(i) = sync_new_replica_set(pass) {
        return Ok(i);
    }
    let Some(spec) = pass.d.spec.clone() else {
        return Err(Halt);
    };
    let collision = pass.d.status.as_ref().and_then(|s| s.collision_count);
    let hash = compute_hash(&spec.template, collision);
    let rs_name = format!(
        "{}-{hash}",
        pass.d.metadata.name.as_deref().unwrap_or_default()
    );
    if let Some(existing) = pass.namespace_rss.iter().find(|r| name(r) == rs_name) {
        let ours =
            controller_of(&existing.metadata).map(|r| &r.uid) == pass.d.metadata.uid.as_ref();
        let same = existing
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, &spec.template));
        if !(ours && same) {
            let status = pass.d.status.get_or_insert_with(Default::default);
            status.collision_count = Some(collision.unwrap_or(0) + 1);
        }
        // Ours and the same: a stale read; the next pass finds it.
        return Err(Halt);
    }
    let mut template = spec.template.clone();
    let labels = template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    labels.insert(HASH_LABEL.into(), hash.clone());
    let labels = labels.clone();
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(HASH_LABEL.into(), hash);
    let next = revision::max_revision(&pass.rss) + 1;
    let min_ready = min_ready_seconds(pass);
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(rs_name.clone()),
            namespace: pass.d.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref(&pass.d)]),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: (min_ready != 0).then_some(min_ready),
            selector,
            template: Some(template),
        }),
        status: None,
    };
    pass.rss.push(rs);
    let i = pass.rss.len() - 1;
    pass.new = Some(i);
    let count = rolling::new_rs_new_replicas(pass, i);
    let (desired, max) = (pass.desired(), pass.max_total());
    let rs = &mut pass.rss[i];
    rs.spec.get_or_insert_with(Default::default).replicas = Some(count);
    revision::set_new_rs_annotations(&pass.d, rs, next, false, desired, max);
    pass.actions
        .push(Action::CreateReplicaSet(Box::new(rs.clone())));
    if count > 0 {
        pass.event(
            EventType::Normal,
            "ScalingReplicaSet",
            format!("Scaled up replica set {rs_name} to {count} from 0"),
        );
    }
    if revision::set_deployment_revision(&mut pass.d, &next.to_string()) {
        pass.actions.push(Action::SetRevision(next.to_string()));
    }
    if progress::has_progress_deadline(&pass.d) {
        let msg = format!("Created new replica set {rs_name:?}");
        let c = progress::new_condition(PROGRESSING, "True", NEW_RS_CREATED, msg, pass.now);
        progress::set_condition(pass.d.status.get_or_insert_with(Default::default), c);
    }
    Ok(i)
}

/// Upstream `isScalingEvent`: an active ReplicaSet was sized for another `spec.replicas`.
pub(super) fn is_scaling_event(pass: &mut Pass<'_>) -> bool {
    sync_new_replica_set(pass);
    let desired = pass.desired();
    pass.active(&pass.all())
        .into_iter()
        .filter_map(|i| desired_replicas(&pass.rss[i]))
        .any(|want| want != desired)
}

/// Upstream `syncStatusOnly`, for a Deployment being deleted.
pub(super) fn sync_status_only(pass: &mut Pass<'_>) {
    sync_new_replica_set(pass);
}
