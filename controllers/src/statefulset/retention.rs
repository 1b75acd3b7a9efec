//! `persistentVolumeClaimRetentionPolicy` (STS-23..25) as owner references on the claims: with
//! `whenDeleted: Delete` the StatefulSet owns its claims (the garbage collector removes them
//! with it); with `whenScaled: Delete` a condemned pod (ordinal outside the wanted range) owns
//! its claims before it is deleted, so they go once it is gone; `Retain` removes the
//! references again (upstream `updateClaimOwnerRefForSetAndPod`,
//! `claimOwnerMatchesSetAndPod`, `isStale`).
//!
//! Planner: pure, no I/O.

use super::identity::{API_VERSION, KIND};
use super::view::{Claim, OwnerRef, StatefulSet};
use serde_json::Value;

/// The owner references a claim of pod `pod_name` (uid `pod_uid`) should carry; `None` when
/// it carries them already. References to anything else are kept.
pub fn wanted_owners(
    set: &StatefulSet,
    claim: &Claim,
    pod_name: &str,
    pod_uid: &str,
    condemned: bool,
) -> Option<Vec<OwnerRef>> {
    let r = set.retention;
    let (set_owns, pod_owns) = match (r.delete_when_scaled, r.delete_when_deleted) {
        (false, false) => (false, false),
        (false, true) => (true, false),
        (true, false) => (false, condemned),
        (true, true) => (!condemned, condemned),
    };
    let has_set = claim.owned_by(&set.uid);
    let has_pod = !pod_uid.is_empty() && claim.owned_by(pod_uid);
    // A pod not created yet cannot own anything.
    let pod_owns = pod_owns && !pod_uid.is_empty();
    if has_set == set_owns && has_pod == pod_owns {
        return None;
    }
    let mut owners: Vec<OwnerRef> = claim
        .owners
        .iter()
        .filter(|o| o.uid != set.uid && (pod_uid.is_empty() || o.uid != pod_uid))
        .cloned()
        .collect();
    if set_owns {
        owners.push(OwnerRef {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            name: set.name.clone(),
            uid: set.uid.clone(),
        });
    }
    if pod_owns {
        owners.push(OwnerRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod_name.into(),
            uid: pod_uid.into(),
        });
    }
    Some(owners)
}

/// Upstream `isStale`: the claim is owned by an earlier pod of the same name (one condemned
/// under `whenScaled: Delete`): the garbage collector is about to delete it, so the pod must
/// wait rather than mount it.
pub fn is_stale(claim: &Claim, pod_name: &str, pod_uid: &str) -> bool {
    claim
        .owners
        .iter()
        .any(|o| o.kind == "Pod" && o.name == pod_name && o.uid != pod_uid)
}

/// Replaces the object's owner references with `owners` (none: the field goes).
pub fn set_owners(obj: &mut Value, owners: &[OwnerRef]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if owners.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert(
            "ownerReferences".into(),
            Value::Array(owners.iter().map(OwnerRef::to_value).collect()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(when_deleted: &str, when_scaled: &str) -> StatefulSet {
        StatefulSet::from_value(&json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "set-uid"},
            "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "replicas": 1,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": when_deleted, "whenScaled": when_scaled},
                "template": {"metadata": {"labels": {"app": "nginx"}}}}}))
        .expect("set")
    }

    fn claim(owners: &[(&str, &str)]) -> Claim {
        Claim {
            name: "www-web-1".into(),
            uid: "c".into(),
            owners: owners
                .iter()
                .map(|(kind, uid)| OwnerRef {
                    api_version: "x".into(),
                    kind: (*kind).into(),
                    name: if *kind == "Pod" { "web-1" } else { "web" }.into(),
                    uid: (*uid).into(),
                })
                .collect(),
            ..Claim::default()
        }
    }

    fn kinds(o: Option<Vec<OwnerRef>>) -> Option<Vec<String>> {
        o.map(|v| v.into_iter().map(|r| r.kind).collect())
    }

    #[test]
    fn retain_retain_removes_both_references() {
        let s = set("Retain", "Retain");
        assert_eq!(wanted_owners(&s, &claim(&[]), "web-1", "p", true), None);
        assert_eq!(
            kinds(wanted_owners(
                &s,
                &claim(&[("StatefulSet", "set-uid"), ("Pod", "p")]),
                "web-1",
                "p",
                true
            )),
            Some(vec![])
        );
    }

    #[test]
    fn when_deleted_delete_makes_the_set_own_every_claim() {
        let s = set("Delete", "Retain");
        assert_eq!(
            kinds(wanted_owners(&s, &claim(&[]), "web-1", "p", false)),
            Some(vec!["StatefulSet".into()])
        );
        assert_eq!(
            wanted_owners(
                &s,
                &claim(&[("StatefulSet", "set-uid")]),
                "web-1",
                "p",
                true
            ),
            None,
            "condemned or not"
        );
    }

    #[test]
    fn when_scaled_delete_makes_only_a_condemned_pod_own_its_claims() {
        let s = set("Retain", "Delete");
        assert_eq!(wanted_owners(&s, &claim(&[]), "web-1", "p", false), None);
        assert_eq!(
            kinds(wanted_owners(&s, &claim(&[]), "web-1", "p", true)),
            Some(vec!["Pod".into()])
        );
        assert_eq!(
            kinds(wanted_owners(
                &s,
                &claim(&[("Pod", "p")]),
                "web-1",
                "p",
                false
            )),
            Some(vec![]),
            "scaled back up before it went: the pod lets go again"
        );
    }

    #[test]
    fn delete_delete_moves_the_claim_from_the_set_to_a_condemned_pod() {
        let s = set("Delete", "Delete");
        assert_eq!(
            kinds(wanted_owners(
                &s,
                &claim(&[("StatefulSet", "set-uid")]),
                "web-1",
                "p",
                true
            )),
            Some(vec!["Pod".into()])
        );
        assert_eq!(
            kinds(wanted_owners(
                &s,
                &claim(&[("Pod", "p")]),
                "web-1",
                "p",
                false
            )),
            Some(vec!["StatefulSet".into()])
        );
    }

    #[test]
    fn other_owners_are_kept() {
        let s = set("Delete", "Retain");
        assert_eq!(
            kinds(wanted_owners(
                &s,
                &claim(&[("Thing", "t")]),
                "web-1",
                "p",
                false
            )),
            Some(vec!["Thing".into(), "StatefulSet".into()])
        );
    }

    #[test]
    fn a_claim_owned_by_an_earlier_pod_of_the_name_is_stale() {
        let c = claim(&[("Pod", "old")]);
        assert!(is_stale(&c, "web-1", "new"));
        assert!(is_stale(&c, "web-1", ""), "not created yet");
        assert!(!is_stale(&c, "web-1", "old"));
        assert!(!is_stale(
            &claim(&[("StatefulSet", "set-uid")]),
            "web-1",
            ""
        ));
    }
}
