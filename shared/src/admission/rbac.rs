//! RBAC and ServiceAccount admission: upstream's `ValidateRole`, `ValidateClusterRole`,
//! `ValidateRoleBinding`, `ValidateClusterRoleBinding` (rules need verbs and either resources or
//! non-resource URLs, a binding's `roleRef` never changes) and `ValidateServiceAccount`.

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};

use super::field::{FieldError, Path};
use super::meta::namespaced;
use super::names::{NameRule, name_messages};
use super::selector::validate_label_selector;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// One policy rule: verbs are required; a namespaced role has no non-resource URLs; a rule names
/// resources (with API groups) or non-resource URLs, not both.
fn validate_rule(rule: &PolicyRule, path: &Path, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = rule.non_resource_urls.as_deref().unwrap_or_default();
    let resources = rule.resources.as_deref().unwrap_or_default();
    let groups = rule.api_groups.as_deref();
    if !urls.is_empty() {
        if namespaced {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                urls.to_vec(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if groups.is_some_and(|g| !g.is_empty()) || !resources.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                urls.to_vec(),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if groups.is_none_or(|g| g.is_empty()) {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if resources.is_empty() {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

fn validate_rules(rules: Option<&Vec<PolicyRule>>, namespaced: bool) -> Vec<FieldError> {
    let path = Path::new("rules");
    rules
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, r)| validate_rule(r, &path.index(i), namespaced))
        .collect()
}

/// What Role and ClusterRole share: policy rules (and a ClusterRole's aggregation rule).
pub(crate) trait RoleKind: Resource + Metadata<Ty = ObjectMeta> {
    fn rules(&self) -> Option<&Vec<PolicyRule>>;
    fn aggregation_rule(&self) -> Option<&AggregationRule> {
        None
    }
}

impl RoleKind for Role {
    fn rules(&self) -> Option<&Vec<PolicyRule>> {
        self.rules.as_ref()
    }
}

impl RoleKind for ClusterRole {
    fn rules(&self) -> Option<&Vec<PolicyRule>> {
        self.rules.as_ref()
    }
    fn aggregation_rule(&self) -> Option<&AggregationRule> {
        self.aggregation_rule.as_ref()
    }
}

/// Upstream `ValidateRole` / `ValidateClusterRole`: the rules (a namespaced Role's without
/// non-resource URLs) and, when set, the aggregation rule's selectors.
pub(crate) fn validate_role<R>(role: &R) -> Vec<FieldError>
where
    R: RoleKind,
    R::Scope: 'static,
{
    let mut errs = validate_rules(role.rules(), namespaced::<R>());
    if let Some(agg) = role.aggregation_rule() {
        let p = Path::new("aggregationRule").child("clusterRoleSelectors");
        let selectors = agg.cluster_role_selectors.as_deref().unwrap_or_default();
        if selectors.is_empty() {
            errs.push(FieldError::required(
                &p,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in selectors.iter().enumerate() {
            errs.extend(validate_label_selector(s, &p.index(i)));
        }
    }
    errs
}

fn validate_role_ref(r: &RoleRef, namespaced: bool) -> Vec<FieldError> {
    let p = Path::new("roleRef");
    let mut errs = Vec::new();
    if r.api_group != RBAC_GROUP {
        errs.push(FieldError::not_supported(
            &p.child("apiGroup"),
            r.api_group.as_str(),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&r.kind.as_str()) {
        errs.push(FieldError::not_supported(
            &p.child("kind"),
            r.kind.as_str(),
            kinds,
        ));
    }
    if r.name.is_empty() {
        errs.push(FieldError::required(&p.child("name"), ""));
    } else {
        for m in name_messages(NameRule::PathSegment, &r.name, false) {
            errs.push(FieldError::invalid(&p.child("name"), r.name.as_str(), m));
        }
    }
    errs
}

fn validate_subject(s: &Subject, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if s.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let api_group = s.api_group.as_deref().unwrap_or_default();
    match s.kind.as_str() {
        "ServiceAccount" => {
            if !s.name.is_empty() {
                for m in name_messages(NameRule::Subdomain, &s.name, false) {
                    errs.push(FieldError::invalid(&path.child("name"), s.name.as_str(), m));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if s.namespace.as_deref().unwrap_or_default().is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != RBAC_GROUP {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

fn validate_subjects(subjects: Option<&Vec<Subject>>) -> Vec<FieldError> {
    let path = Path::new("subjects");
    subjects
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, s)| validate_subject(s, &path.index(i)))
        .collect()
}

fn role_ref_unchanged(new: &RoleRef, old: Option<&RoleRef>) -> Vec<FieldError> {
    match old {
        Some(o) if o != new => vec![FieldError::invalid(
            &Path::new("roleRef"),
            serde_json::to_value(new).unwrap_or_default(),
            "cannot change roleRef",
        )],
        _ => Vec::new(),
    }
}

/// Upstream defaults a User or Group subject's apiGroup, and a ServiceAccount's to "".
pub(crate) fn default_subjects(subjects: Option<&mut Vec<Subject>>) {
    for s in subjects.into_iter().flatten() {
        if s.api_group.is_none() {
            s.api_group = Some(match s.kind.as_str() {
                "User" | "Group" => RBAC_GROUP.to_string(),
                _ => String::new(),
            });
        }
    }
}

/// What RoleBinding and ClusterRoleBinding share: a role reference and subjects.
pub(crate) trait Binding: Resource + Metadata<Ty = ObjectMeta> {
    fn parts(&self) -> (&RoleRef, Option<&Vec<Subject>>);
}

impl Binding for RoleBinding {
    fn parts(&self) -> (&RoleRef, Option<&Vec<Subject>>) {
        (&self.role_ref, self.subjects.as_ref())
    }
}

impl Binding for ClusterRoleBinding {
    fn parts(&self) -> (&RoleRef, Option<&Vec<Subject>>) {
        (&self.role_ref, self.subjects.as_ref())
    }
}

/// Upstream `ValidateRoleBinding` / `ValidateClusterRoleBinding` (+ the update rule that the
/// roleRef never changes): a namespaced binding may refer to a Role or a ClusterRole, a
/// cluster-wide one only to a ClusterRole.
pub(crate) fn validate_binding<B>(b: &B, old: Option<&B>) -> Vec<FieldError>
where
    B: Binding,
    B::Scope: 'static,
{
    let (role_ref, subjects) = b.parts();
    let mut errs = validate_role_ref(role_ref, namespaced::<B>());
    errs.extend(role_ref_unchanged(role_ref, old.map(|o| o.parts().0)));
    errs.extend(validate_subjects(subjects));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{AdmissionError, Operation, admit};
    use serde_json::json;

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn a_rule_without_verbs_or_resources_is_refused_with_upstream_paths() {
        let role: Role = serde_json::from_value(json!({"metadata": {"name": "r", "namespace": "d"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "apiGroups": [""]}]}))
        .unwrap();
        let msgs = fields(&validate_role(&role));
        assert_eq!(
            msgs,
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].resources: Required value: resource rules must supply at least one resource"
            ]
        );
    }

    #[test]
    fn namespaced_roles_cannot_name_non_resource_urls() {
        let role: Role =
            serde_json::from_value(json!({"metadata": {"name": "r", "namespace": "d"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}))
            .unwrap();
        assert_eq!(validate_role(&role).len(), 1);
        let cr: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "system:x"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}))
        .unwrap();
        assert!(validate_role(&cr).is_empty());
    }

    #[test]
    fn a_binding_keeps_its_role_ref() {
        let b: RoleBinding =
            serde_json::from_value(json!({"metadata": {"name": "b", "namespace": "d"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "d"}]}))
            .unwrap();
        assert!(validate_binding(&b, None).is_empty());
        let mut changed = b.clone();
        changed.role_ref.name = "edit".into();
        let msgs = fields(&validate_binding(&changed, Some(&b)));
        assert!(
            msgs.iter().any(|m| m.contains("cannot change roleRef")),
            "{msgs:?}"
        );
    }

    #[test]
    fn cluster_role_bindings_refer_only_to_cluster_roles() {
        let b: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "Robot", "name": "x"}]}))
        .unwrap();
        let msgs = fields(&validate_binding(&b, None));
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].starts_with("roleRef.kind: Unsupported value: \"Role\""));
    }

    #[test]
    fn rbac_names_may_hold_colons_but_not_slashes() {
        // Through `admit`: the name is checked by the object-meta step every kind shares.
        let cluster_role = |name: &str| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": name}})
        };
        let create = |mut obj| admit("ClusterRole", Operation::Create, &mut obj, None);
        assert!(create(cluster_role("system:basic-user")).is_ok());
        let Err(AdmissionError::Invalid(errs)) = create(cluster_role("a/b")) else {
            panic!("a/b is not a ClusterRole name");
        };
        assert_eq!(
            fields(&errs),
            ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
        );
    }
}
