//! The printers of ServiceAccounts and RBAC bindings (the role they grant and, wide, to whom);
//! roles print as the default table (name, creation time), as upstream.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{at, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

pub(crate) fn service_account_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Secrets",
            "string",
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        age_col(),
    ]
}

pub(crate) fn service_account_cells(sa: &Value, now: Timestamp) -> Vec<Value> {
    let secrets = at(sa, &["secrets"])
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![name(sa), json!(secrets), created(sa, now)]
}

pub(crate) fn binding_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Role", "string", "Role is the role being granted."),
        age_col(),
        wide("Users", "string", "Users are the users bound to the role."),
        wide(
            "Groups",
            "string",
            "Groups are the groups bound to the role.",
        ),
        wide(
            "ServiceAccounts",
            "string",
            "ServiceAccounts are the service accounts bound to the role.",
        ),
    ]
}

pub(crate) fn binding_cells(b: &Value, now: Timestamp) -> Vec<Value> {
    let subjects: &[Value] = at(b, &["subjects"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let of = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|s| s["kind"] == kind)
            .map(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                match (kind, s["namespace"].as_str()) {
                    ("ServiceAccount", Some(ns)) => format!("{ns}/{name}"),
                    _ => name.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name(b),
        json!(format!(
            "{}/{}",
            str_at(b, &["roleRef", "kind"]),
            str_at(b, &["roleRef", "name"])
        )),
        created(b, now),
        json!(of("User")),
        json!(of("Group")),
        json!(of("ServiceAccount")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn bindings_print_their_role_and_subjects_by_kind() {
        let now = fixture::now();
        let b = json!({"metadata": {"name": "b", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "dev"},
                         {"kind": "ServiceAccount", "name": "default", "namespace": "web"},
                         {"kind": "User", "name": "bob"}]});
        assert_eq!(
            binding_cells(&b, now),
            [
                json!("b"),
                json!("ClusterRole/view"),
                json!("60m"),
                json!("alice, bob"),
                json!("dev"),
                json!("web/default")
            ]
        );
    }

    #[test]
    fn service_accounts_count_their_secrets() {
        let now = fixture::now();
        let sa =
            json!({"metadata": {"name": "default", "creationTimestamp": "2024-05-01T11:59:00Z"}});
        assert_eq!(
            service_account_cells(&sa, now),
            [json!("default"), json!(0), json!("60s")]
        );
    }
}
