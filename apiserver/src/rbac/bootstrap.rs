//! The default RBAC policy, as upstream's bootstrap policy defines it for the resources Berth
//! serves: `cluster-admin` (bound to `system:masters`), the aggregated user-facing roles
//! `admin` ⊇ `edit` ⊇ `view`, and the `system:` roles every authenticated client gets
//! (`basic-user`, `discovery`, `public-info-viewer`). Written at start: missing objects are
//! created; existing ones annotated `rbac.authorization.kubernetes.io/autoupdate: "true"` get the
//! default rules back.

use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";
const RW: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const RO: &[&str] = &["get", "list", "watch"];
const RW_RO: &[&str] = berth_shared::discovery::ALL_VERBS;

pub(crate) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

pub(crate) fn cluster_role(
    name: &str,
    labels: Value,
    rules: Vec<Value>,
    aggregate_from: Option<&str>,
) -> Value {
    let mut labels = labels;
    labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels, "annotations": {AUTOUPDATE: "true"}},
        "rules": rules,
    });
    if let Some(target) = aggregate_from {
        role["aggregationRule"] = json!({"clusterRoleSelectors": [
            {"matchLabels": {format!("{AGGREGATE_TO}{target}"): "true"}}]});
    }
    role
}

pub(crate) fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                     "annotations": {AUTOUPDATE: "true"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// `cluster-admin`'s rules: everything.
pub fn cluster_admin_rules() -> Vec<PolicyRule> {
    let rules = [rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
    rules
        .into_iter()
        .filter_map(|r| serde_json::from_value(r).ok())
        .collect()
}

/// Fills the rules of the aggregated roles from the others (to a fixed point: `admin` gathers
/// `edit`, which gathers `view`), so the defaults are complete from the first request on; the
/// aggregation controller keeps them so afterwards.
fn with_aggregated_rules(mut roles: Vec<Value>) -> Vec<Value> {
    use super::aggregation::plan::{Role, aggregate};
    use berth_shared::selector::LabelSelector;
    for _ in 0..roles.len() {
        let views: Vec<Role> = roles
            .iter()
            .map(|r| Role {
                name: r["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                labels: serde_json::from_value(r["metadata"]["labels"].clone()).unwrap_or_default(),
                rules: serde_json::from_value(r["rules"].clone()).unwrap_or_default(),
            })
            .collect();
        let mut changed = false;
        for (role, view) in roles.iter_mut().zip(&views) {
            let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
                continue;
            };
            let selectors: Vec<LabelSelector> = selectors
                .iter()
                .filter_map(|s| serde_json::from_value(s.clone()).ok())
                .filter_map(|s| LabelSelector::from_k8s(&s).ok())
                .collect();
            if let Some(rules) = aggregate(&view.name, &selectors, &view.rules, &views) {
                role["rules"] = json!(rules);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    roles
}

/// The default cluster roles.
pub fn cluster_roles() -> Vec<Value> {
    with_aggregated_rules(default_cluster_roles())
}

fn default_cluster_roles() -> Vec<Value> {
    let mut roles = base_cluster_roles();
    roles.extend(crate::certificates::rbac::cluster_roles());
    roles
}

fn base_cluster_roles() -> Vec<Value> {
    let label = |to: &str| json!({format!("{AGGREGATE_TO}{to}"): "true"});
    vec![
        cluster_role(
            "cluster-admin",
            json!({}),
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
            None,
        ),
        cluster_role("admin", json!({}), vec![], Some("admin")),
        cluster_role("edit", label("admin"), vec![], Some("edit")),
        cluster_role("view", label("edit"), vec![], Some("view")),
        cluster_role(
            "system:aggregate-to-admin",
            label("admin"),
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(
                    RW_RO,
                    &["rbac.authorization.k8s.io"],
                    &["rolebindings", "roles"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:aggregate-to-edit",
            label("edit"),
            vec![
                rule(
                    RO,
                    &[""],
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(
                    RW,
                    &[""],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                ),
                rule(&["create"], &[""], &["pods/eviction"]),
                rule(
                    RW,
                    &[""],
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
                rule(
                    RW,
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                rule(RW, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(RW, &["batch"], &["cronjobs", "jobs"]),
                rule(
                    RW,
                    &["networking.k8s.io"],
                    &["ingresses", "networkpolicies"],
                ),
                rule(RW, &["policy"], &["poddisruptionbudgets"]),
            ],
            None,
        ),
        cluster_role(
            "system:aggregate-to-view",
            label("view"),
            vec![
                rule(
                    RO,
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(
                    RO,
                    &[""],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                rule(RO, &[""], &["namespaces"]),
                rule(RO, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    RO,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(
                    RO,
                    &["autoscaling"],
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    RO,
                    &["batch"],
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                rule(
                    RO,
                    &["networking.k8s.io"],
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
                rule(
                    RO,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:basic-user",
            json!({}),
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:discovery",
            json!({}),
            vec![url_rule(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
        ),
        cluster_role(
            "system:public-info-viewer",
            json!({}),
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
            None,
        ),
        cluster_role(
            "system:monitoring",
            json!({}),
            vec![url_rule(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
            None,
        ),
        // Berth's own: every agent enforces NetworkPolicy, which needs every pod's labels and
        // address, every namespace's labels and every policy (k3s grants its agents' policy
        // controller the same).
        cluster_role(
            "system:berth:network-policy",
            json!({}),
            vec![
                rule(RO, &[""], &["pods", "namespaces"]),
                rule(RO, &["networking.k8s.io"], &["networkpolicies"]),
            ],
            None,
        ),
        // Berth's own: every agent serves the Ingresses of Berth's class, which needs every
        // Ingress and IngressClass (their TLS Secrets are the node authorizer's business).
        cluster_role(
            "system:berth:ingress",
            json!({}),
            vec![rule(
                RO,
                &["networking.k8s.io"],
                &["ingresses", "ingressclasses"],
            )],
            None,
        ),
        cluster_role(
            "system:auth-delegator",
            json!({}),
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
            None,
        ),
    ]
}

/// The default cluster role bindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    let mut bindings = base_cluster_role_bindings();
    bindings.extend(crate::certificates::rbac::cluster_role_bindings());
    bindings
}

fn base_cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &["system:masters"]),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        binding(
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        binding(
            "system:monitoring",
            "system:monitoring",
            &["system:monitoring"],
        ),
        binding(
            "system:berth:network-policy",
            "system:berth:network-policy",
            &["system:nodes"],
        ),
        binding(
            "system:berth:ingress",
            "system:berth:ingress",
            &["system:nodes"],
        ),
    ]
}

/// Creates the default policy's missing objects and restores the defaults of those still
/// marked for auto-update (aggregated rules are the aggregation controller's).
pub fn ensure(registry: &Registry) -> Result<(), RegistryError> {
    let opts = WriteOptions::default();
    let sets = [
        (
            CLUSTER_ROLES,
            cluster_roles(),
            &["rules", "aggregationRule"][..],
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            cluster_role_bindings(),
            &["roleRef", "subjects"][..],
        ),
    ];
    for (rt, objects, fields) in sets {
        for want in objects {
            let name = want["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match registry.get(rt, None, &name) {
                Err(RegistryError::NotFound { .. }) => {
                    match registry.create(rt, None, want, &opts) {
                        Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
                Ok(have) => {
                    let have = have.value()?;
                    let auto = have["metadata"]["annotations"][AUTOUPDATE] != json!("false");
                    let aggregated = have.get("aggregationRule").is_some();
                    let differs = fields
                        .iter()
                        .any(|f| !(aggregated && *f == "rules") && have.get(*f) != want.get(*f));
                    if auto && differs {
                        registry.update_with(rt, None, &name, Part::Main, &opts, |mut cur| {
                            for f in fields {
                                if aggregated && *f == "rules" {
                                    continue;
                                }
                                match want.get(*f) {
                                    Some(v) => cur[*f] = v.clone(),
                                    None => {
                                        if let Some(o) = cur.as_object_mut() {
                                            o.remove(*f);
                                        }
                                    }
                                }
                            }
                            Ok::<_, RegistryError>(cur)
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::rules::{Attributes, rule_allows, uncovered};

    fn rules_of(name: &str) -> Vec<PolicyRule> {
        let role = cluster_roles()
            .into_iter()
            .find(|r| r["metadata"]["name"] == name)
            .unwrap();
        serde_json::from_value(role["rules"].clone()).unwrap()
    }

    #[test]
    fn every_default_object_passes_admission() {
        for mut obj in cluster_roles().into_iter().chain(cluster_role_bindings()) {
            let kind = obj["kind"].as_str().unwrap().to_string();
            obj["metadata"]["uid"] = json!("u");
            berth_shared::admission::admit(
                &kind,
                berth_shared::admission::Operation::Create,
                &mut obj,
                None,
            )
            .unwrap_or_else(|e| panic!("{}: {e:?}", obj["metadata"]["name"]));
        }
    }

    #[test]
    fn view_reads_workloads_but_not_secrets() {
        let view = rules_of("system:aggregate-to-view");
        let get = |group: &str, resource: &str| Attributes::Resource {
            verb: "list".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: "d".into(),
            name: String::new(),
        };
        assert!(view.iter().any(|r| rule_allows(r, &get("", "pods"))));
        assert!(
            view.iter()
                .any(|r| rule_allows(r, &get("apps", "deployments")))
        );
        assert!(!view.iter().any(|r| rule_allows(r, &get("", "secrets"))));
    }

    #[test]
    fn admin_holds_what_edit_holds_and_edit_what_view_holds() {
        let (admin, edit, view) = (rules_of("admin"), rules_of("edit"), rules_of("view"));
        assert!(!view.is_empty());
        assert!(uncovered(&edit, &view).is_empty());
        assert!(uncovered(&admin, &edit).is_empty());
        assert!(!uncovered(&view, &edit).is_empty());
    }

    #[test]
    fn cluster_admin_covers_every_default_role() {
        let admin = cluster_admin_rules();
        for role in cluster_roles() {
            let rules: Vec<PolicyRule> = serde_json::from_value(role["rules"].clone()).unwrap();
            assert!(
                uncovered(&admin, &rules).is_empty(),
                "{}",
                role["metadata"]["name"]
            );
        }
    }
}
