//! The ReplicaSet controller's decisions for one ReplicaSet or ReplicationController: which
//! pods it owns, adopts (matching orphans) and releases (owned pods that stopped matching),
//! and how many pods to create (burst-capped, in slow-start batches) or which to delete
//! (in [`rank`](super::rank) order). Pure: no I/O.
//!
//! Planner: pure, no I/O.

use super::rank;
use super::view::{Pod, Set};
use crate::workload::claim::{Candidate, Owner, Rules, Sorted};
pub use crate::workload::pod_control::{SLOW_START_INITIAL_BATCH, slow_start_batches};
use jiff::Timestamp;
use serde_json::{Map, Value, json};
use std::borrow::Borrow;
use std::collections::HashMap;

/// At most this many creations or deletions per pass (upstream's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// How the set relates to the active pods of its namespace (upstream's
/// `ControllerRefManager.ClaimPods`): owned, to adopt, to release.
pub type Claim<'a> = Sorted<&'a Pod>;

/// The set as the claim engine's owner of pods: it claims active pods only (upstream's
/// `FilterActivePods`).
pub fn owner(set: &Set) -> Owner<'_> {
    Owner {
        resource: set.kind.resource(),
        namespace: &set.namespace,
        name: &set.name,
        uid: &set.uid,
        selector: &set.selector,
        deleting: set.deleting,
        rules: Rules {
            active_only: true,
            finalizer: None,
        },
    }
}

/// Sorts `pods` (active or not) by their relation to `set`. Inactive pods (finished or
/// terminating) are neither counted, adopted nor released; pods controlled by anything else
/// are left alone (RS-04, RS-07, RS-14). A set being deleted adopts and releases nothing, so
/// an orphaning deletion can strip its references undisturbed.
pub fn claim<'a, P: Borrow<Pod>>(set: &Set, pods: &'a [P]) -> Claim<'a> {
    owner(set).sort(pods.iter().map(Borrow::borrow), |p: &&Pod| Candidate {
        labels: &p.labels,
        controller_uid: p.controller.as_ref().map(|c| c.uid.as_str()),
        deleting: p.deleting,
        finished: p.phase == "Succeeded" || p.phase == "Failed",
    })
}

/// What to do about the number of pods.
#[derive(Debug, PartialEq, Eq)]
pub enum Scale<'a> {
    Steady,
    /// Create this many pods (in [`slow_start_batches`]).
    Create(usize),
    /// Delete these pods, worst first.
    Delete(Vec<&'a Pod>),
}

/// The difference between the pods the set controls and `spec.replicas`, capped at
/// [`BURST_REPLICAS`] (upstream's `manageReplicas`). Nothing while the set is being deleted.
/// `per_node` counts the active pods of related sets per node (see [`rank`]).
pub fn scale<'a>(
    set: &Set,
    pods: &[&'a Pod],
    per_node: &HashMap<String, usize>,
    now: Timestamp,
) -> Scale<'a> {
    if set.deleting {
        return Scale::Steady;
    }
    let want = usize::try_from(set.replicas).unwrap_or(0);
    let have = pods.len();
    if have < want {
        Scale::Create((want - have).min(BURST_REPLICAS))
    } else if have > want {
        let diff = (have - want).min(BURST_REPLICAS);
        Scale::Delete(rank::pods_to_delete(pods, diff, per_node, now))
    } else {
        Scale::Steady
    }
}

/// The ownerReference a set's pods carry (RS-21).
pub fn controller_ref(set: &Set) -> Value {
    owner(set).controller_ref().to_value()
}

/// A new pod from the set's template (upstream's `GetPodFromTemplate`): the template's labels,
/// annotations and finalizers, `generateName: <set>-`, the controller reference, the
/// template's spec.
pub fn new_pod(set: &Set) -> Value {
    let t = &set.template;
    let mut meta = Map::new();
    meta.insert("generateName".into(), json!(format!("{}-", set.name)));
    meta.insert("namespace".into(), json!(set.namespace));
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = t.pointer(&format!("/metadata/{field}"))
            && !v.is_null()
        {
            meta.insert(field.into(), v.clone());
        }
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(set)]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": t.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Why a pod cannot be made from the template (upstream refuses pods without labels).
pub fn template_error(set: &Set) -> Option<&'static str> {
    set.template_labels
        .is_empty()
        .then_some("unable to create pods, no labels")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicaset::view::{ControllerRef, Kind, Status};
    use berth_shared::selector::LabelSelector;
    use std::collections::BTreeMap;

    fn now() -> Timestamp {
        "2024-06-01T12:00:00Z".parse().unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn set(replicas: i32) -> Set {
        Set {
            kind: Kind::ReplicaSet,
            namespace: "default".into(),
            name: "frontend".into(),
            uid: "rs-uid".into(),
            generation: 1,
            replicas,
            min_ready_seconds: 0,
            selector: LabelSelector::from_set(&labels(&[("tier", "frontend")])),
            template: json!({
                "metadata": {"labels": {"tier": "frontend", "app": "guestbook"},
                             "annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "php-redis", "image": "gb-frontend:v3"}]}
            }),
            template_labels: labels(&[("tier", "frontend"), ("app", "guestbook")]),
            deleting: false,
            controller_uid: None,
            status: Status::default(),
        }
    }

    fn owned_by(uid: &str) -> Option<ControllerRef> {
        Some(ControllerRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "x".into(),
            uid: uid.into(),
        })
    }

    fn pod(name: &str, tier: &str, controller: Option<ControllerRef>) -> Pod {
        Pod {
            name: name.into(),
            uid: format!("uid-{name}"),
            labels: labels(&[("tier", tier)]).into(),
            controller,
            phase: "Pending".into(),
            ..Pod::default()
        }
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter().map(|p| p.name.clone()).collect()
    }

    #[test]
    fn matching_owned_pods_are_kept_and_matching_orphans_adopted() {
        let pods = [
            pod("mine", "frontend", owned_by("rs-uid")),
            pod("orphan", "frontend", None),
            pod("other-rs", "frontend", owned_by("someone-else")),
            pod("unrelated", "backend", None),
        ];
        let c = claim(&set(3), &pods);
        assert_eq!(names(&c.owned), ["mine"]);
        assert_eq!(names(&c.adopt), ["orphan"]);
        assert!(c.release.is_empty());
    }

    #[test]
    fn an_owned_pod_whose_labels_stop_matching_is_released() {
        let pods = [pod("relabelled", "debug", owned_by("rs-uid"))];
        let c = claim(&set(3), &pods);
        assert_eq!(names(&c.release), ["relabelled"]);
        assert!(c.owned.is_empty());
    }

    #[test]
    fn terminating_and_finished_pods_are_neither_counted_adopted_nor_released() {
        let mut terminating = pod("t", "frontend", None);
        terminating.deleting = true;
        let mut done = pod("d", "frontend", owned_by("rs-uid"));
        done.phase = "Succeeded".into();
        let mut leaving = pod("l", "debug", owned_by("rs-uid"));
        leaving.deleting = true;
        let pods = [terminating, done, leaving];
        let c = claim(&set(3), &pods);
        assert_eq!(c, Claim::default());
    }

    #[test]
    fn a_set_being_deleted_neither_adopts_nor_releases() {
        let mut s = set(3);
        s.deleting = true;
        let pods = [
            pod("orphan", "frontend", None),
            pod("relabelled", "debug", owned_by("rs-uid")),
            pod("mine", "frontend", owned_by("rs-uid")),
        ];
        let c = claim(&s, &pods);
        assert_eq!(names(&c.owned), ["mine"]);
        assert!(c.adopt.is_empty() && c.release.is_empty());
        let owned = c.owned.clone();
        assert_eq!(scale(&s, &owned, &HashMap::new(), now()), Scale::Steady);
    }

    #[test]
    fn too_few_pods_creates_the_difference() {
        let pods = [pod("a", "frontend", None)];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            scale(&set(3), &refs, &HashMap::new(), now()),
            Scale::Create(2)
        );
        assert_eq!(scale(&set(1), &refs, &HashMap::new(), now()), Scale::Steady);
    }

    #[test]
    fn too_many_pods_deletes_the_difference_worst_first() {
        let mut running = pod("running", "frontend", None);
        running.phase = "Running".into();
        running.node_name = "n1".into();
        let pending = pod("pending", "frontend", None);
        let pods = [running, pending];
        let refs: Vec<&Pod> = pods.iter().collect();
        match scale(&set(1), &refs, &HashMap::new(), now()) {
            Scale::Delete(v) => assert_eq!(names(&v), ["pending"]),
            other => panic!("{other:?}"),
        }
        match scale(&set(0), &refs, &HashMap::new(), now()) {
            Scale::Delete(v) => assert_eq!(v.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_pass_creates_or_deletes_at_most_the_burst() {
        assert_eq!(
            scale(&set(2000), &[], &HashMap::new(), now()),
            Scale::Create(500)
        );
        let pods: Vec<Pod> = (0..700)
            .map(|i| pod(&format!("p{i}"), "frontend", None))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        match scale(&set(0), &refs, &HashMap::new(), now()) {
            Scale::Delete(v) => assert_eq!(v.len(), 500),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn slow_start_doubles_batches_up_to_the_count() {
        for (count, want) in [
            (0, vec![]),
            (1, vec![1]),
            (3, vec![1, 2]),
            (7, vec![1, 2, 4]),
            (10, vec![1, 2, 4, 3]),
            (500, vec![1, 2, 4, 8, 16, 32, 64, 128, 245]),
        ] {
            assert_eq!(slow_start_batches(count), want, "count {count}");
            assert_eq!(slow_start_batches(count).iter().sum::<usize>(), count);
        }
    }

    #[test]
    fn a_new_pod_carries_the_template_and_a_controller_reference() {
        let p = new_pod(&set(3));
        assert_eq!(p["metadata"]["generateName"], json!("frontend-"));
        assert_eq!(p["metadata"]["namespace"], json!("default"));
        assert_eq!(
            p["metadata"]["labels"],
            json!({"tier": "frontend", "app": "guestbook"})
        );
        assert_eq!(p["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(
            p["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "frontend",
                    "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(p["spec"]["containers"][0]["image"], json!("gb-frontend:v3"));
        assert!(p["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn a_replication_controller_owns_its_pods_as_a_v1_kind() {
        let mut s = set(1);
        s.kind = Kind::ReplicationController;
        let r = controller_ref(&s);
        assert_eq!(r["apiVersion"], json!("v1"));
        assert_eq!(r["kind"], json!("ReplicationController"));
        assert_eq!(s.kind.component(), "replication-controller");
        assert_eq!(Kind::ReplicaSet.component(), "replicaset-controller");
    }

    #[test]
    fn a_template_without_labels_cannot_make_pods() {
        let mut s = set(1);
        assert_eq!(template_error(&s), None);
        s.template_labels.clear();
        assert_eq!(template_error(&s), Some("unable to create pods, no labels"));
    }
}
