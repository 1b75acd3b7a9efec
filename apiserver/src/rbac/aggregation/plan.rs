//! Planner: pure, no I/O.
//!
//! ClusterRole aggregation, as upstream's controller does it: an aggregated role's rules are the
//! rules of every other ClusterRole its selectors match, in name order, each rule once.

use berth_shared::selector::LabelSelector;
use k8s_openapi::api::rbac::v1::PolicyRule;
use std::collections::BTreeMap;

/// One ClusterRole as the planner sees it.
#[derive(Debug, Clone)]
pub struct Role {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub rules: Vec<PolicyRule>,
}

/// The rules `target` should have (`None`: it already has them).
pub fn aggregate(
    target: &str,
    selectors: &[LabelSelector],
    current: &[PolicyRule],
    roles: &[Role],
) -> Option<Vec<PolicyRule>> {
    let mut sources: Vec<&Role> = roles
        .iter()
        .filter(|r| r.name != target && selectors.iter().any(|s| s.matches(&r.labels)))
        .collect();
    sources.sort_by(|a, b| a.name.cmp(&b.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for rule in sources.into_iter().flat_map(|r| r.rules.iter()) {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    (rules != current).then_some(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, label: Option<&str>, resources: &[&str]) -> Role {
        Role {
            name: name.into(),
            labels: label
                .map(|l| BTreeMap::from([(l.to_string(), "true".to_string())]))
                .unwrap_or_default(),
            rules: resources
                .iter()
                .map(|r| {
                    serde_json::from_value(
                        json!({"verbs": ["get"], "apiGroups": [""], "resources": [r]}),
                    )
                    .unwrap()
                })
                .collect(),
        }
    }

    #[test]
    fn an_aggregated_role_takes_the_rules_of_matching_roles_in_name_order_once_each() {
        let sel = [LabelSelector::parse("agg=true").unwrap()];
        let roles = [
            role("b", Some("agg"), &["pods", "secrets"]),
            role("a", Some("agg"), &["pods"]),
            role("c", None, &["nodes"]),
        ];
        let rules = aggregate("view", &sel, &[], &roles).unwrap();
        let names: Vec<&str> = rules
            .iter()
            .map(|r| r.resources.as_ref().unwrap()[0].as_str())
            .collect();
        assert_eq!(names, ["pods", "secrets"]);
        assert_eq!(aggregate("view", &sel, &rules, &roles), None);
    }

    #[test]
    fn a_role_never_aggregates_itself() {
        let sel = [LabelSelector::parse("agg=true").unwrap()];
        let roles = [role("self", Some("agg"), &["pods"])];
        assert_eq!(aggregate("self", &sel, &[], &roles), None);
        let stale = role("x", None, &["pods"]).rules;
        assert_eq!(aggregate("self", &sel, &stale, &roles), Some(vec![]));
    }
}
