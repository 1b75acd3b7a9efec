//! Which requests a policy or binding applies to: `matchConstraints` / `matchResources` as
//! upstream's generic policy matcher reads them — namespace selector, object selector, the
//! exclude rules, then the resource rules (with `matchPolicy: Equivalent` trying the other
//! served versions of the same resource), in that order.

use std::collections::BTreeMap;

use berth_shared::k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations,
};
use berth_shared::selector::LabelSelector;
use serde_json::Value;

/// An admission request's operation, as admission rules spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What matching reads of a request.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub group: &'a str,
    pub version: &'a str,
    /// The plural (`deployments`).
    pub resource: &'a str,
    /// `status`, `scale` ..., empty for the main resource.
    pub subresource: &'a str,
    pub kind: &'a str,
    /// Empty for cluster-scoped objects; a Namespace's own name for a Namespace, as upstream
    /// sets it.
    pub namespace: &'a str,
    pub name: &'a str,
    pub operation: Operation,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

impl Attributes<'_> {
    /// Whether the request is about a Namespace object itself.
    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

#[cfg(test)]
impl<'a> Attributes<'a> {
    /// A write of the Deployment `web` in `namespace`, as the tests make it.
    pub(super) fn deployment_write(
        namespace: &'a str,
        operation: Operation,
        object: &'a Value,
        old_object: Option<&'a Value>,
    ) -> Self {
        Attributes {
            group: "apps",
            version: "v1",
            resource: "deployments",
            subresource: "",
            kind: "Deployment",
            namespace,
            name: "web",
            operation,
            object: Some(object),
            old_object,
        }
    }
}

/// Another served version of the request's resource, for `matchPolicy: Equivalent`.
pub type Versions<'a> = &'a [&'a str];

/// One `NamedRuleWithOperations`, ready to match.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    groups: Vec<String>,
    versions: Vec<String>,
    /// `(resource, subresource)`, split at the first `/`.
    resources: Vec<(String, String)>,
    operations: Vec<String>,
    scope: String,
    names: Vec<String>,
}

impl Rule {
    fn new(r: &NamedRuleWithOperations) -> Rule {
        let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
        Rule {
            groups: list(&r.api_groups),
            versions: list(&r.api_versions),
            resources: list(&r.resources)
                .iter()
                .map(|r| match r.split_once('/') {
                    Some((res, sub)) => (res.to_string(), sub.to_string()),
                    None => (r.clone(), String::new()),
                })
                .collect(),
            operations: list(&r.operations),
            scope: r.scope.clone().unwrap_or_else(|| "*".to_string()),
            names: list(&r.resource_names),
        }
    }

    /// Upstream's `rules.Matcher.Matches` plus the resource names of a named rule.
    fn matches(&self, a: &Attributes<'_>, version: &str) -> bool {
        let any = |items: &[String], v: &str| items.iter().any(|i| i == "*" || i == v);
        let scope = match self.scope.as_str() {
            "Namespaced" => !a.is_namespace() && !a.namespace.is_empty(),
            "Cluster" => a.is_namespace() || a.namespace.is_empty(),
            _ => true,
        };
        scope
            && any(&self.operations, a.operation.as_str())
            && any(&self.groups, a.group)
            && any(&self.versions, version)
            && self.resources.iter().any(|(res, sub)| {
                (res == "*" || res == a.resource) && (sub == "*" || sub == a.subresource)
            })
            && (self.names.is_empty() || self.names.iter().any(|n| n == a.name))
    }
}

/// A `MatchResources`, parsed once.
#[derive(Debug, Clone)]
pub struct Constraints {
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    rules: Vec<Rule>,
    exclude: Vec<Rule>,
    equivalent: bool,
}

/// How a constraint's match went.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    No,
    Yes,
    /// The request would match but a selector could not be evaluated (the namespace could not
    /// be read): a configuration error, decided by the policy's failure policy.
    Error(String),
}

impl Constraints {
    /// Parses `m` (defaults as upstream's: empty selectors, `Equivalent`). A selector that does
    /// not parse is an error; validation refuses such objects, so only a stored object written
    /// before that validation could carry one.
    pub fn new(m: &MatchResources) -> Result<Constraints, String> {
        let selector = |s: &Option<_>| match s {
            Some(s) => LabelSelector::from_k8s(s).map_err(|e| e.to_string()),
            None => Ok(LabelSelector::everything()),
        };
        let rules = |l: &Option<Vec<NamedRuleWithOperations>>| {
            l.iter().flatten().map(Rule::new).collect::<Vec<_>>()
        };
        Ok(Constraints {
            namespace_selector: selector(&m.namespace_selector)?,
            object_selector: selector(&m.object_selector)?,
            rules: rules(&m.resource_rules),
            exclude: rules(&m.exclude_resource_rules),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        })
    }

    /// Upstream's `Matcher.Matches`. `namespace_labels` reads the labels of the request's
    /// namespace (only called when the namespace selector needs them); `equivalents` are the
    /// other served versions of the request's resource.
    pub fn matches(
        &self,
        a: &Attributes<'_>,
        equivalents: Versions<'_>,
        namespace_labels: impl FnOnce() -> Result<BTreeMap<String, String>, String>,
    ) -> Match {
        let namespace = self.namespace_matches(a, namespace_labels);
        if namespace == Match::No {
            return Match::No;
        }
        if !self.object_matches(a) {
            return Match::No;
        }
        if self.rules_match(&self.exclude, a, equivalents) {
            return Match::No;
        }
        if !self.rules.is_empty() && !self.rules_match(&self.rules, a, equivalents) {
            return Match::No;
        }
        namespace
    }

    fn rules_match(&self, rules: &[Rule], a: &Attributes<'_>, equivalents: Versions<'_>) -> bool {
        if rules.iter().any(|r| r.matches(a, a.version)) {
            return true;
        }
        // Equivalent: the same resource through another version it is served at (upstream
        // converts the object to that version; Berth serves one schema per resource, so the
        // object is the same).
        self.equivalent
            && equivalents
                .iter()
                .any(|v| rules.iter().any(|r| r.matches(a, v)))
    }

    /// Upstream's namespace matcher: cluster-scoped objects other than namespaces always
    /// match; a Namespace written is matched on its own labels.
    fn namespace_matches(
        &self,
        a: &Attributes<'_>,
        namespace_labels: impl FnOnce() -> Result<BTreeMap<String, String>, String>,
    ) -> Match {
        if a.namespace.is_empty() && !a.is_namespace() {
            return Match::Yes;
        }
        if self.namespace_selector.is_empty() {
            return Match::Yes;
        }
        let own = a.is_namespace()
            && a.subresource.is_empty()
            && matches!(a.operation, Operation::Create | Operation::Update);
        let labels = if own {
            labels_of(a.object)
        } else {
            match namespace_labels() {
                Ok(l) => l,
                Err(e) => return Match::Error(e),
            }
        };
        if self.namespace_selector.matches(&labels) {
            Match::Yes
        } else {
            Match::No
        }
    }

    /// The object selector matches the new object or the old one.
    fn object_matches(&self, a: &Attributes<'_>) -> bool {
        if self.object_selector.is_empty() {
            return true;
        }
        [a.object, a.old_object]
            .into_iter()
            .flatten()
            .filter(|o| !o.is_null())
            .any(|o| self.object_selector.matches(&labels_of(Some(o))))
    }
}

/// An object's `metadata.labels`.
pub fn labels_of(obj: Option<&Value>) -> BTreeMap<String, String> {
    crate::meta::string_map(obj.and_then(|o| o.pointer("/metadata/labels")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn constraints(m: Value) -> Constraints {
        Constraints::new(&serde_json::from_value(m).unwrap()).unwrap()
    }

    fn deployment_rule() -> Value {
        json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
               "resources": ["deployments"]})
    }

    fn deployment<'a>(obj: &'a Value, op: Operation) -> Attributes<'a> {
        Attributes::deployment_write("team", op, obj, None)
    }

    fn labels(pairs: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
        Ok(berth_shared::selector::label_set(pairs))
    }

    #[test]
    fn resource_rules_match_group_version_resource_and_operation() {
        let c = constraints(json!({"resourceRules": [deployment_rule()]}));
        let obj = json!({"metadata": {"name": "web"}});
        let cases = [
            (deployment(&obj, Operation::Create), Match::Yes),
            (deployment(&obj, Operation::Delete), Match::No),
            (
                Attributes {
                    group: "",
                    resource: "pods",
                    kind: "Pod",
                    ..deployment(&obj, Operation::Create)
                },
                Match::No,
            ),
            (
                Attributes {
                    subresource: "status",
                    ..deployment(&obj, Operation::Update)
                },
                Match::No,
            ),
        ];
        for (a, want) in cases {
            assert_eq!(c.matches(&a, &[], || labels(&[])), want, "{a:?}");
        }
    }

    #[test]
    fn wildcards_follow_upstream_subresource_rules() {
        let obj = json!({});
        let status = Attributes {
            subresource: "status",
            ..deployment(&obj, Operation::Update)
        };
        let main = deployment(&obj, Operation::Update);
        let rule = |resources: Value| {
            constraints(
                json!({"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["*"], "resources": resources}]}),
            )
        };
        let cases = [
            (json!(["*"]), true, false),
            (json!(["*/*"]), true, true),
            (json!(["deployments/*"]), true, true),
            (json!(["*/status"]), false, true),
            (json!(["deployments", "deployments/status"]), true, true),
        ];
        for (resources, on_main, on_status) in cases {
            let c = rule(resources.clone());
            assert_eq!(
                c.matches(&main, &[], || labels(&[])) == Match::Yes,
                on_main,
                "{resources} on the main resource"
            );
            assert_eq!(
                c.matches(&status, &[], || labels(&[])) == Match::Yes,
                on_status,
                "{resources} on status"
            );
        }
    }

    #[test]
    fn namespace_selector_reads_the_namespace_labels_only_when_needed() {
        let c = constraints(json!({"resourceRules": [deployment_rule()],
            "namespaceSelector": {"matchLabels": {"env": "test"}}}));
        let obj = json!({});
        let a = deployment(&obj, Operation::Create);
        assert_eq!(
            c.matches(&a, &[], || labels(&[("env", "test")])),
            Match::Yes
        );
        assert_eq!(c.matches(&a, &[], || labels(&[("env", "prod")])), Match::No);
        assert_eq!(
            c.matches(&a, &[], || Err("namespaces \"team\" not found".into())),
            Match::Error("namespaces \"team\" not found".into())
        );
        // Cluster-scoped objects are never excluded by a namespace selector.
        let c = constraints(
            json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["*"], "resources": ["nodes"]}],
            "namespaceSelector": {"matchLabels": {"env": "test"}}}),
        );
        let node = Attributes {
            group: "",
            resource: "nodes",
            kind: "Node",
            namespace: "",
            ..deployment(&obj, Operation::Create)
        };
        assert_eq!(
            c.matches(&node, &[], || panic!("no namespace read")),
            Match::Yes
        );
    }

    #[test]
    fn a_namespace_written_is_matched_on_its_own_labels() {
        let c = constraints(
            json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["namespaces"]}],
            "namespaceSelector": {"matchLabels": {"env": "test"}}}),
        );
        let obj = json!({"metadata": {"name": "team", "labels": {"env": "test"}}});
        let a = Attributes {
            group: "",
            resource: "namespaces",
            kind: "Namespace",
            namespace: "team",
            name: "team",
            ..deployment(&obj, Operation::Create)
        };
        assert_eq!(c.matches(&a, &[], || panic!("not read")), Match::Yes);
    }

    #[test]
    fn object_selector_matches_the_new_or_the_old_object() {
        let c = constraints(json!({"resourceRules": [deployment_rule()],
            "objectSelector": {"matchLabels": {"tier": "web"}}}));
        let labelled = json!({"metadata": {"labels": {"tier": "web"}}});
        let plain = json!({"metadata": {}});
        let mut a = deployment(&plain, Operation::Update);
        assert_eq!(c.matches(&a, &[], || labels(&[])), Match::No);
        a.old_object = Some(&labelled);
        assert_eq!(c.matches(&a, &[], || labels(&[])), Match::Yes);
    }

    #[test]
    fn exclude_rules_win_over_resource_rules() {
        let c = constraints(json!({"resourceRules": [deployment_rule()],
            "excludeResourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["*"], "resources": ["deployments"], "resourceNames": ["web"]}]}));
        let obj = json!({});
        let mut a = deployment(&obj, Operation::Create);
        assert_eq!(c.matches(&a, &[], || labels(&[])), Match::No);
        a.name = "api";
        assert_eq!(c.matches(&a, &[], || labels(&[])), Match::Yes);
    }

    #[test]
    fn scope_separates_namespaced_from_cluster_requests() {
        let obj = json!({});
        let rule = |scope: &str| {
            constraints(
                json!({"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["*"], "resources": ["*"], "scope": scope}]}),
            )
        };
        let namespaced = deployment(&obj, Operation::Create);
        let cluster = Attributes {
            namespace: "",
            ..namespaced
        };
        let ok =
            |c: &Constraints, a: &Attributes<'_>| c.matches(a, &[], || labels(&[])) == Match::Yes;
        assert!(ok(&rule("Namespaced"), &namespaced));
        assert!(!ok(&rule("Namespaced"), &cluster));
        assert!(ok(&rule("Cluster"), &cluster));
        assert!(!ok(&rule("Cluster"), &namespaced));
        assert!(ok(&rule("*"), &cluster) && ok(&rule("*"), &namespaced));
    }

    #[test]
    fn equivalent_match_policy_accepts_another_served_version() {
        let obj = json!({});
        let hpa = Attributes {
            group: "autoscaling",
            version: "v2",
            resource: "horizontalpodautoscalers",
            kind: "HorizontalPodAutoscaler",
            ..deployment(&obj, Operation::Create)
        };
        let rule = json!({"apiGroups": ["autoscaling"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["horizontalpodautoscalers"]});
        let equivalent = constraints(json!({"resourceRules": [rule.clone()]}));
        let exact = constraints(json!({"resourceRules": [rule], "matchPolicy": "Exact"}));
        assert_eq!(
            equivalent.matches(&hpa, &["v1"], || labels(&[])),
            Match::Yes
        );
        assert_eq!(exact.matches(&hpa, &["v1"], || labels(&[])), Match::No);
    }
}
