//! Planner: pure, no I/O.
//!
//! RBAC's rule algebra, as upstream evaluates it: whether a policy rule allows a request
//! (verbs, API groups, resources with subresources and `*` forms, resource names, non-resource
//! URLs with a trailing `*`), whether a binding's subject is the requester, and whether one set
//! of rules covers another (escalation prevention).

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

/// What a request asks to do, in authorization terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl Attributes {
    pub fn verb(&self) -> &str {
        match self {
            Attributes::Resource { verb, .. } | Attributes::NonResource { verb, .. } => verb,
        }
    }

    pub fn namespace(&self) -> &str {
        match self {
            Attributes::Resource { namespace, .. } => namespace,
            Attributes::NonResource { .. } => "",
        }
    }
}

/// The requester as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// `system:serviceaccount:<ns>:<name>` → (ns, name).
pub fn service_account_of(user: &str) -> Option<(&str, &str)> {
    user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')
}

/// Whether a binding's subject names the user. A ServiceAccount subject without a namespace
/// takes the binding's.
pub fn subject_matches(s: &Subject, user: &User, binding_namespace: &str) -> bool {
    match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            service_account_of(&user.name) == Some((ns, s.name.as_str()))
        }
        _ => false,
    }
}

fn has_or_star(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

/// Upstream `ResourceMatches`: `*`, the resource, `resource/subresource`, `*/subresource` and
/// `resource/*` forms.
fn resource_matches(rule_resources: &[String], resource: &str, subresource: &str) -> bool {
    let combined = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    rule_resources.iter().any(|r| {
        if r == "*" || *r == combined {
            return true;
        }
        if subresource.is_empty() {
            return false;
        }
        r.strip_prefix("*/") == Some(subresource) || r.strip_suffix("/*") == Some(resource)
    })
}

/// Upstream `NonResourceURLMatches`: exact, `*`, or a prefix ending in `*`.
fn url_matches(rule_urls: &[String], path: &str) -> bool {
    rule_urls.iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Whether `rule` allows the request.
pub fn rule_allows(rule: &PolicyRule, attrs: &Attributes) -> bool {
    match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let names = list(&rule.resource_names);
            has_or_star(&rule.verbs, verb)
                && has_or_star(list(&rule.api_groups), group)
                && resource_matches(list(&rule.resources), resource, subresource)
                && (names.is_empty() || (!name.is_empty() && names.iter().any(|n| n == name)))
        }
        Attributes::NonResource { verb, path } => {
            has_or_star(&rule.verbs, verb) && url_matches(list(&rule.non_resource_urls), path)
        }
    }
}

/// Splits rules into single-permission rules (one verb, group, resource, name or URL each), as
/// upstream's escalation check does.
fn atoms(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for url in list(&rule.non_resource_urls) {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
        for group in list(&rule.api_groups) {
            for resource in list(&rule.resources) {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        ..Default::default()
                    });
                }
                for name in names {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        ..Default::default()
                    });
                }
            }
        }
    }
    out
}

/// Upstream `ruleCovers` for one atomic rule.
fn covers_atom(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let verb_ok = atom.verbs.iter().all(|v| has_or_star(&owner.verbs, v));
    if !verb_ok {
        return false;
    }
    let atom_urls = list(&atom.non_resource_urls);
    if !atom_urls.is_empty() {
        return atom_urls.iter().all(|u| {
            list(&owner.non_resource_urls).iter().any(|o| {
                o == "*"
                    || o == u
                    || o.strip_suffix('*')
                        .is_some_and(|p| u.strip_suffix('*').unwrap_or(u).starts_with(p))
            })
        });
    }
    let groups_ok = list(&atom.api_groups)
        .iter()
        .all(|g| has_or_star(list(&owner.api_groups), g));
    let resources_ok = list(&atom.resources).iter().all(|r| {
        let owner_resources = list(&owner.resources);
        if owner_resources.iter().any(|o| o == "*" || o == r) {
            return true;
        }
        // `pods/*` in the owner covers `pods/log`; `*/scale` covers `deployments/scale`.
        match r.split_once('/') {
            Some((res, sub)) => owner_resources
                .iter()
                .any(|o| o.strip_suffix("/*") == Some(res) || o.strip_prefix("*/") == Some(sub)),
            None => false,
        }
    });
    let owner_names = list(&owner.resource_names);
    let names_ok = owner_names.is_empty()
        || list(&atom.resource_names)
            .iter()
            .all(|n| owner_names.iter().any(|o| o == n))
            && !list(&atom.resource_names).is_empty();
    groups_ok && resources_ok && names_ok
}

/// The requested rules not covered by the owner's, as atomic rules (empty: all covered).
pub fn uncovered(owner: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    requested
        .iter()
        .flat_map(atoms)
        .filter(|atom| !owner.iter().any(|o| covers_atom(o, atom)))
        .collect()
}

/// Renders rules as upstream's escalation message does:
/// `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
pub fn describe(rules: &[PolicyRule]) -> String {
    let quoted = |l: &[String]| {
        l.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    rules
        .iter()
        .map(|r| {
            let mut parts = Vec::new();
            if !list(&r.api_groups).is_empty() {
                parts.push(format!("APIGroups:[{}]", quoted(list(&r.api_groups))));
            }
            if !list(&r.resources).is_empty() {
                parts.push(format!("Resources:[{}]", quoted(list(&r.resources))));
            }
            if !list(&r.resource_names).is_empty() {
                parts.push(format!(
                    "ResourceNames:[{}]",
                    quoted(list(&r.resource_names))
                ));
            }
            if !list(&r.non_resource_urls).is_empty() {
                parts.push(format!(
                    "NonResourceURLs:[{}]",
                    quoted(list(&r.non_resource_urls))
                ));
            }
            parts.push(format!("Verbs:[{}]", quoted(&r.verbs)));
            format!("{{{}}}", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: serde_json::Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    fn res(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_rule_matches_verb_group_and_resource_or_their_stars() {
        let r = rule(json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}));
        assert!(rule_allows(&r, &res("get", "", "pods", "", "p")));
        assert!(!rule_allows(&r, &res("delete", "", "pods", "", "p")));
        assert!(!rule_allows(&r, &res("get", "apps", "pods", "", "p")));
        assert!(!rule_allows(&r, &res("get", "", "secrets", "", "p")));
        let star = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(rule_allows(
            &star,
            &res("escalate", "rbac.authorization.k8s.io", "roles", "", "")
        ));
        assert!(rule_allows(&star, &res("get", "", "pods", "log", "p")));
    }

    #[test]
    fn subresources_need_their_own_grant_or_a_star_form() {
        let pods = rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}));
        assert!(!rule_allows(&pods, &res("get", "", "pods", "log", "p")));
        for form in ["pods/log", "pods/*", "*/log"] {
            let r = rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": [form]}));
            assert!(
                rule_allows(&r, &res("get", "", "pods", "log", "p")),
                "{form}"
            );
            assert!(!rule_allows(&r, &res("get", "", "pods", "", "p")), "{form}");
        }
    }

    #[test]
    fn resource_names_limit_a_rule_to_named_requests() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"]}),
        );
        assert!(rule_allows(&r, &res("get", "", "configmaps", "", "one")));
        assert!(!rule_allows(&r, &res("get", "", "configmaps", "", "two")));
        assert!(!rule_allows(&r, &res("list", "", "configmaps", "", "")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let r = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        let get = |p: &str| Attributes::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        assert!(rule_allows(&r, &get("/healthz")));
        assert!(rule_allows(&r, &get("/apis/apps/v1")));
        assert!(!rule_allows(&r, &get("/healthz/etcd")));
        assert!(!rule_allows(&r, &get("/api")));
        assert!(!rule_allows(&r, &res("get", "", "pods", "", "")));
    }

    #[test]
    fn service_account_subjects_match_their_user_name() {
        let sa: Subject =
            serde_json::from_value(json!({"kind": "ServiceAccount", "name": "default"})).unwrap();
        let user = User {
            name: "system:serviceaccount:web:default".into(),
            groups: vec![],
        };
        assert!(subject_matches(&sa, &user, "web"));
        assert!(!subject_matches(&sa, &user, "other"));
        let group: Subject =
            serde_json::from_value(json!({"kind": "Group", "name": "system:serviceaccounts"}))
                .unwrap();
        let in_group = User {
            groups: vec!["system:serviceaccounts".into()],
            ..user
        };
        assert!(subject_matches(&group, &in_group, ""));
    }

    #[test]
    fn an_owner_covers_what_it_holds_and_nothing_more() {
        let edit = [rule(
            json!({"verbs": ["get", "list", "create"], "apiGroups": ["", "apps"], "resources": ["pods", "deployments", "pods/*"]}),
        )];
        let asked = [rule(
            json!({"verbs": ["get", "create"], "apiGroups": [""], "resources": ["pods", "pods/log"]}),
        )];
        assert!(uncovered(&edit, &asked).is_empty());
        let more = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}),
        )];
        let missing = uncovered(&edit, &more);
        assert_eq!(
            describe(&missing),
            r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}"#
        );
        let admin = [
            rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})),
            rule(json!({"verbs": ["*"], "nonResourceURLs": ["*"]})),
        ];
        let everything = [rule(
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        )];
        assert!(uncovered(&admin, &everything).is_empty());
        assert_eq!(uncovered(&edit, &everything).len(), 1);
    }

    #[test]
    fn named_owner_rules_cover_only_those_names() {
        let owner = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
        )];
        let named = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
        )];
        let any = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}),
        )];
        assert!(uncovered(&owner, &named).is_empty());
        assert_eq!(uncovered(&owner, &any).len(), 1);
    }
}
