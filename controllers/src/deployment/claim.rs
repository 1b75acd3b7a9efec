//! Which ReplicaSets a Deployment controls (upstream `ControllerRefManager.ClaimReplicaSets`):
//! its own ReplicaSets while their labels still match its selector, orphans whose labels match
//! (adopted), and its own ReplicaSets that stopped matching (released). A Deployment being
//! deleted keeps what it owns but neither adopts nor releases.
//!
//! Planner: pure, no I/O.

use crate::workload::claim::{Candidate, Owner, Rules};
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use berth_shared::resource::DEPLOYMENTS;
use berth_shared::selector::LabelSelector;
use std::collections::BTreeMap;

pub use crate::workload::Claim;

/// The controller reference of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The owner reference a Deployment puts on its ReplicaSets.
pub fn controller_ref(d: &Deployment) -> OwnerReference {
    owner(d, &LabelSelector::nothing())
        .controller_ref()
        .to_owner_reference()
}

/// The Deployment as the claim engine's owner of ReplicaSets (upstream's rules, none of its
/// own).
pub fn owner<'a>(d: &'a Deployment, selector: &'a LabelSelector) -> Owner<'a> {
    Owner {
        resource: DEPLOYMENTS,
        namespace: d.metadata.namespace.as_deref().unwrap_or_default(),
        name: d.metadata.name.as_deref().unwrap_or_default(),
        uid: d.metadata.uid.as_deref().unwrap_or_default(),
        selector,
        deleting: d.metadata.deletion_timestamp.is_some(),
        rules: Rules::default(),
    }
}

/// Decides the claim on `rs` by `d` with the parsed `selector`.
pub fn claim(d: &Deployment, selector: &LabelSelector, rs: &ReplicaSet) -> Claim {
    if rs.metadata.namespace != d.metadata.namespace {
        return Claim::Ignore;
    }
    let empty = BTreeMap::new();
    owner(d, selector).decide(&Candidate {
        labels: rs.metadata.labels.as_ref().unwrap_or(&empty),
        controller_uid: controller_of(&rs.metadata).map(|r| r.uid.as_str()),
        deleting: rs.metadata.deletion_timestamp.is_some(),
        finished: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as metav1, Time};

    fn deployment(deleting: bool) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("d-uid".into()),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn rs(app: &str, owner: Option<&str>, deleting: bool) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        name: "x".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn replica_sets_are_claimed_as_the_controller_ref_manager_does() {
        use Claim::*;
        let sel = LabelSelector::from_k8s(&metav1::LabelSelector {
            match_labels: Some([("app".to_string(), "nginx".to_string())].into()),
            ..Default::default()
        })
        .unwrap();
        // ReplicaSets labelled for the Deployment's selector or not, controlled by `owner`.
        let matching = |owner| rs("nginx", owner, false);
        let unmatched = |owner| rs("other", owner, false);
        let (ours, theirs) = (Some("d-uid"), Some("x-uid"));
        let cases = [
            ("ours and matching", false, matching(ours), Owned),
            ("ours, no longer matching", false, unmatched(ours), Release),
            ("someone else's", false, matching(theirs), Ignore),
            ("matching orphan", false, matching(None), Adopt),
            ("orphan not matching", false, unmatched(None), Ignore),
            ("terminating orphan", false, rs("nginx", None, true), Ignore),
            ("deleting: keeps its own", true, matching(ours), Owned),
            ("deleting: no release", true, unmatched(ours), Ignore),
            ("deleting: no adoption", true, matching(None), Ignore),
        ];
        for (name, deleting, r, want) in cases {
            assert_eq!(claim(&deployment(deleting), &sel, &r), want, "{name}");
        }
    }

    #[test]
    fn the_controller_ref_blocks_owner_deletion() {
        let r = controller_ref(&deployment(false));
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
        assert_eq!((r.kind.as_str(), r.uid.as_str()), ("Deployment", "d-uid"));
    }
}
