//! The admission policy printers (upstream `printValidatingAdmissionPolicy` and
//! `printValidatingAdmissionPolicyBinding`): a policy's number of validations and its
//! parameter kind, a binding's policy and parameter reference.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{list_at, map_at, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

const UNSET: &str = "<unset>";

pub(crate) fn policy_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        col(
            "ParamKind",
            "string",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        age_col(),
    ]
}

pub(crate) fn policy_cells(p: &Value, now: Timestamp) -> Vec<Value> {
    let param_kind = map_at(p, &["spec", "paramKind"]).map_or_else(
        || UNSET.to_string(),
        |_| {
            format!(
                "{}/{}",
                str_at(p, &["spec", "paramKind", "apiVersion"]),
                str_at(p, &["spec", "paramKind", "kind"])
            )
        },
    );
    vec![
        name(p),
        json!(list_at(p, &["spec", "validations"]).len()),
        json!(param_kind),
        created(p, now),
    ]
}

pub(crate) fn binding_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "PolicyName",
            "string",
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        col(
            "ParamRef",
            "string",
            "ParamRef indicates the param resource which sets the configration param",
        ),
        age_col(),
    ]
}

/// A selector as Go's generated `LabelSelector.String()` prints it.
fn selector_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: String = list_at(sel, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = list_at(e, &["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

pub(crate) fn binding_cells(b: &Value, now: Timestamp) -> Vec<Value> {
    let param = match b.pointer("/spec/paramRef") {
        None | Some(Value::Null) => UNSET.to_string(),
        Some(r) => match opt_str(r, &["name"]).filter(|n| !n.is_empty()) {
            Some(n) => match opt_str(r, &["namespace"]).filter(|ns| !ns.is_empty()) {
                Some(ns) => format!("{ns}/{n}"),
                // Upstream cannot tell whether the parameter kind is cluster-scoped.
                None => format!("*/{n}"),
            },
            None => match r.get("selector") {
                Some(s) if !s.is_null() => selector_string(s),
                _ => UNSET.to_string(),
            },
        },
    };
    vec![
        name(b),
        json!(str_at(b, &["spec", "policyName"])),
        json!(param),
        created(b, now),
    ]
}

/// Upstream `printValidatingWebhookConfiguration` / `printMutatingWebhookConfiguration`.
pub(crate) fn webhook_configuration_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks in this configuration",
        ),
        age_col(),
    ]
}

pub(crate) fn webhook_configuration_cells(c: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(c),
        json!(list_at(c, &["webhooks"]).len()),
        created(c, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn a_policy_prints_its_validation_count_and_param_kind() {
        let now = fixture::now();
        let with = |spec: Value| {
            json!({"metadata": {"name": "max", "creationTimestamp": "2024-05-01T11:59:00Z"},
                   "spec": spec})
        };
        assert_eq!(
            policy_cells(&with(json!({"validations": [{}, {}]})), now),
            [json!("max"), json!(2), json!("<unset>"), json!("60s")]
        );
        let p = with(json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}));
        assert_eq!(
            policy_cells(&p, now)[1..3],
            [json!(0), json!("v1/ConfigMap")]
        );
        assert_eq!(policy_columns().len(), 4);
    }

    #[test]
    fn a_binding_prints_its_policy_and_param_ref() {
        let now = fixture::now();
        let with = |param_ref: Value| json!({"metadata": {"name": "b"}, "spec": {"policyName": "max", "paramRef": param_ref}});
        let param = |r: Value| binding_cells(&with(r), now)[2].clone();
        assert_eq!(param(Value::Null), json!("<unset>"));
        assert_eq!(param(json!({"name": "limits"})), json!("*/limits"));
        assert_eq!(
            param(json!({"name": "limits", "namespace": "team"})),
            json!("team/limits")
        );
        assert_eq!(
            param(json!({"selector": {"matchLabels": {"b": "2", "a": "1"}}})),
            json!(
                "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{},}"
            )
        );
        assert_eq!(binding_cells(&with(Value::Null), now)[1], json!("max"));
    }

    #[test]
    fn a_webhook_configuration_prints_its_webhook_count() {
        let now = fixture::now();
        let c = json!({"metadata": {"name": "hooks", "creationTimestamp": "2024-05-01T11:59:00Z"},
                       "webhooks": [{}, {}, {}]});
        assert_eq!(
            webhook_configuration_cells(&c, now),
            [json!("hooks"), json!(3), json!("60s")]
        );
        assert_eq!(
            webhook_configuration_cells(&json!({"metadata": {"name": "none"}}), now)[1],
            json!(0)
        );
        assert_eq!(webhook_configuration_columns().len(), 3);
    }
}
