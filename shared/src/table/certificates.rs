//! The CertificateSigningRequest printer (upstream `printCertificateSigningRequest`): signer,
//! requestor, requested duration and the condition summary (`Approved,Issued`,
//! `Denied`, `Pending`, `…,Failed`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::human_duration;
use super::lookup::{list_at, opt_int, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn csr_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        age_col(),
        col(
            "SignerName",
            "string",
            "signerName indicates the requested signer, and is a qualified name.",
        ),
        col(
            "Requestor",
            "string",
            "username contains the name of the user that created the CertificateSigningRequest. Populated by the API server on creation and immutable.",
        ),
        col(
            "RequestedDuration",
            "string",
            "expirationSeconds is the requested duration of validity of the issued certificate.",
        ),
        col(
            "Condition",
            "string",
            "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".",
        ),
    ]
}

/// Upstream's `extractCSRStatus`: Denied wins over Approved, else Pending; then `,Failed` and
/// `,Issued` when they apply.
pub(crate) fn csr_condition(csr: &Value) -> String {
    let has = |t: &str| {
        list_at(csr, &["status", "conditions"])
            .iter()
            .any(|c| c.get("type").and_then(Value::as_str) == Some(t))
    };
    let mut out = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        out.push_str(",Failed");
    }
    if !str_at(csr, &["status", "certificate"]).is_empty() {
        out.push_str(",Issued");
    }
    out
}

pub(crate) fn csr_cells(csr: &Value, now: Timestamp) -> Vec<Value> {
    let signer = opt_str(csr, &["spec", "signerName"])
        .filter(|s| !s.is_empty())
        .unwrap_or("<none>");
    let duration = opt_int(csr, &["spec", "expirationSeconds"])
        .map(|s| human_duration(std::time::Duration::from_secs(s.max(0).unsigned_abs())))
        .unwrap_or_else(|| "<none>".to_string());
    vec![
        name(csr),
        created(csr, now),
        json!(signer),
        json!(str_at(csr, &["spec", "username"])),
        json!(duration),
        json!(csr_condition(csr)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn a_pending_request_prints_its_signer_requestor_and_duration() {
        let now = fixture::now();
        let csr = json!({"metadata": {"name": "csr-1", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "admin",
                     "expirationSeconds": 86400}});
        assert_eq!(
            csr_cells(&csr, now),
            vec![
                json!("csr-1"),
                json!("60s"),
                json!("kubernetes.io/kube-apiserver-client"),
                json!("admin"),
                json!("24h"),
                json!("Pending")
            ]
        );
    }

    #[test]
    fn the_condition_column_puts_denied_over_approved_then_failed_and_issued() {
        let with = |types: &[&str], cert: &str| {
            let conditions: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
            json!({"status": {"conditions": conditions, "certificate": cert}})
        };
        assert_eq!(csr_condition(&with(&[], "")), "Pending");
        assert_eq!(
            csr_condition(&with(&["Approved"], "Y2VydA==")),
            "Approved,Issued"
        );
        assert_eq!(
            csr_condition(&with(&["Approved", "Failed"], "")),
            "Approved,Failed"
        );
        assert_eq!(csr_condition(&with(&["Approved", "Denied"], "")), "Denied");
        let no_duration = json!({"metadata": {"name": "x"}, "spec": {}});
        let cells = csr_cells(&no_duration, Timestamp::UNIX_EPOCH);
        assert_eq!((&cells[2], &cells[4]), (&json!("<none>"), &json!("<none>")));
    }
}
