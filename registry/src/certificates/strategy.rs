//! What an update of a CertificateSigningRequest may change, per part (upstream's
//! `csrStrategy`, `csrStatusStrategy` and `csrApprovalStrategy`): the main resource only its
//! metadata (spec and status are kept); `/status` the status but not the Approved/Denied
//! conditions (a signer writes `certificate` and `Failed`); `/approval` the conditions but not
//! the certificate or a `Failed` condition. Conditions get their update and transition times
//! filled in, the transition time carried over from a condition of the same type and status.
//!
//! Planner: pure, no I/O.

use crate::Part;
use serde_json::{Value, json};

fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn of_type(c: &Value, types: &[&str]) -> bool {
    c.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| types.contains(&t))
}

/// `new`'s conditions, except those of `types`, which are `old`'s (upstream's
/// `preserveConditionInstances`).
fn preserve(new: Vec<Value>, old: &[Value], types: &[&str]) -> Vec<Value> {
    new.into_iter()
        .filter(|c| !of_type(c, types))
        .chain(old.iter().filter(|c| of_type(c, types)).cloned())
        .collect()
}

/// Upstream's `populateConditionTimestamps`.
fn stamp(conditions: &mut [Value], old: &[Value], now: &str) {
    for c in conditions.iter_mut() {
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if empty(c.get("lastUpdateTime")) {
            c["lastUpdateTime"] = json!(now);
        }
        if empty(c.get("lastTransitionTime")) {
            let carried = old
                .iter()
                .find(|o| {
                    o.get("type") == c.get("type")
                        && o.get("status") == c.get("status")
                        && !empty(o.get("lastTransitionTime"))
                })
                .and_then(|o| o.get("lastTransitionTime").cloned());
            c["lastTransitionTime"] = carried.unwrap_or_else(|| json!(now));
        }
    }
}

fn set_conditions(obj: &mut Value, conditions: Vec<Value>) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    obj["status"]["conditions"] = Value::Array(conditions);
}

/// The object an update of `part` writes, from the stored `old` and the body `new`; `now` is
/// RFC 3339.
pub fn merge(old: &Value, new: Value, part: Part, now: &str) -> Value {
    let old_conditions = conditions(old);
    match part {
        Part::Main | Part::EphemeralContainers => {
            let mut o = new;
            o["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
            match old.get("status") {
                Some(s) => o["status"] = s.clone(),
                None => {
                    if let Some(m) = o.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            o
        }
        Part::Status => {
            let mut o = old.clone();
            o["status"] = new.get("status").cloned().unwrap_or_else(|| json!({}));
            let mut kept = preserve(conditions(&new), &old_conditions, &["Approved", "Denied"]);
            stamp(&mut kept, &old_conditions, now);
            set_conditions(&mut o, kept);
            o
        }
        Part::Approval => {
            let mut o = old.clone();
            let mut kept = preserve(conditions(&new), &old_conditions, &["Failed"]);
            stamp(&mut kept, &old_conditions, now);
            set_conditions(&mut o, kept);
            o
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2025-01-01T00:00:00Z";

    fn csr(conditions: Value, certificate: &str) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"signerName": "a.io/b", "request": "UkVR"},
               "status": {"conditions": conditions, "certificate": certificate}})
    }

    #[test]
    fn the_main_resource_changes_only_metadata() {
        let old = csr(json!([]), "");
        let mut new = csr(json!([{"type": "Approved", "status": "True"}]), "Zm9yZ2Vk");
        new["spec"]["signerName"] = json!("evil.io/x");
        new["metadata"]["labels"] = json!({"a": "b"});
        let out = merge(&old, new, Part::Main, NOW);
        assert_eq!(out["spec"], old["spec"]);
        assert_eq!(out["status"], old["status"]);
        assert_eq!(out["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn approval_writes_conditions_but_not_the_certificate_and_stamps_them() {
        let old = csr(json!([]), "");
        let new = csr(
            json!([{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]),
            "Zm9yZ2Vk",
        );
        let out = merge(&old, new, Part::Approval, NOW);
        assert_eq!(out["status"]["certificate"], json!(""));
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Approved", "status": "True", "reason": "KubectlApprove",
                    "lastUpdateTime": NOW, "lastTransitionTime": NOW}])
        );
    }

    #[test]
    fn status_writes_keep_the_approval_and_carry_transition_times() {
        let approved = json!({"type": "Approved", "status": "True", "lastUpdateTime": "t0", "lastTransitionTime": "t0"});
        let old = csr(json!([approved]), "");
        // A signer's write that forgot the Approved condition and adds a Failed one.
        let new = csr(
            json!([{"type": "Failed", "status": "True", "reason": "SignerValidationFailure"}]),
            "",
        );
        let out = merge(&old, new, Part::Status, NOW);
        let types: Vec<&str> = out["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["Failed", "Approved"]);
        assert_eq!(out["status"]["conditions"][1]["lastTransitionTime"], "t0");
        let signed = csr(json!([approved]), "Y2VydA==");
        let out = merge(&old, signed, Part::Status, NOW);
        assert_eq!(out["status"]["certificate"], "Y2VydA==");
    }
}
