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

    #[test]
    fn a_claims_wanted_owners_follow_the_retention_policy() {
        const SET: (&str, &str) = ("StatefulSet", "set-uid");
        const POD: (&str, &str) = ("Pod", "p");
        // (whenDeleted, whenScaled, the claim's owners, pod condemned, the owners wanted (None:
        // no change), why)
        type Row = (
            &'static str,
            &'static str,
            &'static [(&'static str, &'static str)],
            bool,
            Option<&'static [&'static str]>,
            &'static str,
        );
        #[rustfmt::skip]
        let cases: &[Row] = &[
            ("Retain", "Retain", &[], true, None, "retain/retain: nothing to add"),
            ("Retain", "Retain", &[SET, POD], true, Some(&[]), "retain/retain: both go"),
            ("Delete", "Retain", &[], false, Some(&["StatefulSet"]), "whenDeleted: the set owns"),
            ("Delete", "Retain", &[SET], true, None, "whenDeleted: condemned or not"),
            ("Retain", "Delete", &[], false, None, "whenScaled: a kept pod owns nothing"),
            ("Retain", "Delete", &[], true, Some(&["Pod"]), "whenScaled: a condemned pod owns"),
            ("Retain", "Delete", &[POD], false, Some(&[]), "scaled back up: the pod lets go"),
            ("Delete", "Delete", &[SET], true, Some(&["Pod"]), "delete/delete: to the pod"),
            ("Delete", "Delete", &[POD], false, Some(&["StatefulSet"]), "delete/delete: back"),
            ("Delete", "Retain", &[("Thing", "t")], false, Some(&["Thing", "StatefulSet"]),
                "other owners are kept"),
        ];
        for &(deleted, scaled, owners, condemned, want, why) in cases {
            let got = wanted_owners(
                &set(deleted, scaled),
                &claim(owners),
                "web-1",
                "p",
                condemned,
            );
            let kinds = got.map(|v| v.into_iter().map(|r| r.kind).collect::<Vec<_>>());
            let want = want.map(|w| w.iter().map(|k| k.to_string()).collect::<Vec<_>>());
            assert_eq!(kinds, want, "{why}");
        }
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
