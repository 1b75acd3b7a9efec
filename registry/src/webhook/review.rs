//! The `AdmissionReview` (admission.k8s.io/v1) a webhook is sent and what its answer means:
//! allowed or denied (upstream's `ToStatusErr` wording and codes), a JSONPatch to apply
//! (`patchType: JSONPatch`, base64 `patch`), warnings. Pure: the call itself is elsewhere.

use base64::Engine;
use serde_json::{Value, json};

use super::compiled::ReviewVersion;

/// The review sent for `request` (upstream's `AdmissionRequest`, objects included).
pub fn review(
    version: ReviewVersion,
    request: &Value,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let mut req = request.clone();
    if let Some(o) = object {
        req["object"] = o.clone();
    }
    if let Some(o) = old_object {
        req["oldObject"] = o.clone();
    }
    json!({"apiVersion": version.api_version(), "kind": "AdmissionReview", "request": req})
}

/// A webhook's answer, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// The refusal, when not allowed: status code (≥ 400), reason and the full message.
    pub denial: Option<Denial>,
    /// The operations of a JSONPatch response.
    pub patch: Option<Value>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

/// Upstream's `ToStatusErr`: a denial's message says which webhook refused and why; its code
/// is at least 400.
fn denial(webhook: &str, status: Option<&Value>) -> Denial {
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let field = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (message, reason) = (field("message"), field("reason"));
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    Denial {
        code,
        reason,
        message,
    }
}

/// Reads a webhook's response body for the request `uid`. `Err` is a failed call (decided by
/// the failure policy), worded as upstream's `failed calling webhook` causes.
/// A `v1beta1` answer is read as upstream reads it: its apiVersion, kind and uid unchecked.
pub fn answer(
    version: ReviewVersion,
    webhook: &str,
    uid: &str,
    body: &[u8],
    mutating: bool,
) -> Result<Answer, String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to decode webhook response: {e}"))?;
    let api_version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let v1 = version == ReviewVersion::V1;
    if v1 && (api_version != "admission.k8s.io/v1" || kind != "AdmissionReview") {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        ));
    }
    let Some(response) = v.get("response").filter(|r| r.is_object()) else {
        return Err("webhook response was absent".to_string());
    };
    let got = response
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if v1 && got != uid {
        return Err(format!("expected response.uid=\"{uid}\", got \"{got}\""));
    }
    let allowed = response
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let warnings = response
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let patch_type = response.get("patchType").and_then(Value::as_str);
    let patch = response
        .get("patch")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let patch = match (patch, patch_type) {
        (None, _) => None,
        (Some(_), _) if !mutating => {
            return Err("validating webhook may not return response.patch".to_string());
        }
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".to_string());
        }
        (Some(_), Some(t)) if t != "JSONPatch" => {
            return Err(format!(
                "webhook returned invalid response.patchType of \"{t}\""
            ));
        }
        (Some(p), Some(_)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("failed to decode webhook patch: {e}"))?;
            let ops: Value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("failed to decode webhook patch: {e}"))?;
            Some(ops)
        }
    };
    Ok(Answer {
        allowed,
        denial: (!allowed).then(|| denial(webhook, response.get("status"))),
        patch: patch.filter(|_| allowed),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(response: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}),
        )
        .unwrap_or_default()
    }

    #[test]
    fn the_review_carries_the_request_and_its_objects() {
        let req = json!({"uid": "u1", "operation": "UPDATE"});
        let (new, old) = (json!({"a": 1}), json!({"a": 0}));
        let r = review(ReviewVersion::V1, &req, Some(&new), Some(&old));
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(r["kind"], "AdmissionReview");
        assert_eq!(r["request"]["uid"], "u1");
        assert_eq!(r["request"]["object"], new);
        assert_eq!(r["request"]["oldObject"], old);
        assert!(
            review(ReviewVersion::V1, &req, None, None)["request"]
                .get("object")
                .is_none()
        );
        assert_eq!(
            review(ReviewVersion::V1beta1, &req, None, None)["apiVersion"],
            "admission.k8s.io/v1beta1"
        );
    }

    #[test]
    fn answers_are_read_as_upstream_reads_them() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let ops = json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]);
        let patch = b64.encode(serde_json::to_vec(&ops).unwrap_or_default());
        let w = "x.example.com";
        let cases: Vec<(&str, Value, bool, Result<Answer, String>)> = vec![
            (
                "allowed with warnings",
                json!({"uid": "u", "allowed": true, "warnings": ["careful"]}),
                false,
                Ok(Answer { allowed: true, denial: None, patch: None, warnings: vec!["careful".into()] }),
            ),
            (
                "denied with a message and a code",
                json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no privileged pods", "reason": "Forbidden"}}),
                false,
                Ok(Answer { allowed: false, denial: Some(Denial { code: 403, reason: "Forbidden".into(),
                    message: "admission webhook \"x.example.com\" denied the request: no privileged pods".into() }),
                    patch: None, warnings: vec![] }),
            ),
            (
                "denied without explanation and a low code",
                json!({"uid": "u", "allowed": false, "status": {"code": 200}}),
                false,
                Ok(Answer { allowed: false, denial: Some(Denial { code: 400, reason: String::new(),
                    message: "admission webhook \"x.example.com\" denied the request without explanation".into() }),
                    patch: None, warnings: vec![] }),
            ),
            (
                "a JSONPatch",
                json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch}),
                true,
                Ok(Answer { allowed: true, denial: None, patch: Some(ops.clone()), warnings: vec![] }),
            ),
            (
                "a patch without its type",
                json!({"uid": "u", "allowed": true, "patch": patch}),
                true,
                Err("webhook returned response.patch but not response.patchType".into()),
            ),
            (
                "a patch from a validating webhook",
                json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch}),
                false,
                Err("validating webhook may not return response.patch".into()),
            ),
            (
                "another request's uid",
                json!({"uid": "v", "allowed": true}),
                false,
                Err("expected response.uid=\"u\", got \"v\"".into()),
            ),
        ];
        for (name, response, mutating, want) in cases {
            assert_eq!(
                answer(ReviewVersion::V1, w, "u", &body(response), mutating),
                want,
                "{name}"
            );
        }
        // v1beta1, as upstream: neither the type nor the uid is checked.
        let beta = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"other","allowed":true}}"#;
        assert!(answer(ReviewVersion::V1beta1, w, "u", beta, false).is_ok_and(|a| a.allowed));
        assert!(answer(ReviewVersion::V1, w, "u", beta, false).is_err());
        assert_eq!(
            answer(
                ReviewVersion::V1,
                w,
                "u",
                br#"{"apiVersion":"v1","kind":"Status"}"#,
                false
            ),
            Err("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status".into())
        );
    }
}
