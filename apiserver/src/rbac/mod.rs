//! Role-based access control: the authorizer that answers "may this user do this" from the
//! Roles, ClusterRoles and their bindings (read through informers, each object parsed once),
//! the rules a user holds in a namespace (for escalation checks and rules reviews), and the
//! default policy ([`bootstrap`]), and the controller that keeps aggregated ClusterRoles
//! ([`aggregation`]), whose rule the default policy shares.

pub mod aggregation;
pub mod bootstrap;
pub mod rules;

use berth_runtime::informer::{Informer, Informers, Object, View};
use berth_shared::resource::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use rules::{Attributes, User};
use std::sync::Arc;
use std::time::Duration;

/// The group whose members may do everything, whatever the bindings say (upstream's
/// privileged-group authorizer, ahead of RBAC).
pub const MASTERS: &str = "system:masters";

/// The rules of a Role or ClusterRole, parsed once per object version.
struct RoleRules(Vec<PolicyRule>);

impl View for RoleRules {
    fn derive(obj: &Object) -> Self {
        #[derive(serde::Deserialize)]
        struct Rules {
            #[serde(default)]
            rules: Option<Vec<PolicyRule>>,
        }
        RoleRules(
            obj.decode::<Rules>()
                .ok()
                .and_then(|r| r.rules)
                .unwrap_or_default(),
        )
    }
}

/// A binding's role and subjects, parsed once per object version.
struct Binding {
    role_ref: Option<RoleRef>,
    subjects: Vec<Subject>,
}

impl View for Binding {
    fn derive(obj: &Object) -> Self {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw {
            role_ref: Option<RoleRef>,
            #[serde(default)]
            subjects: Option<Vec<Subject>>,
        }
        match obj.decode::<Raw>() {
            Ok(raw) => Binding {
                role_ref: raw.role_ref,
                subjects: raw.subjects.unwrap_or_default(),
            },
            Err(_) => Binding {
                role_ref: None,
                subjects: Vec::new(),
            },
        }
    }
}

/// Answers access questions from the RBAC objects. Cheap to clone.
#[derive(Clone)]
pub struct Authorizer {
    informers: Informers,
    roles: Arc<Informer>,
    role_bindings: Arc<Informer>,
    cluster_roles: Arc<Informer>,
    cluster_role_bindings: Arc<Informer>,
}

/// A grant: the binding and role a permission comes from.
struct Grant<'a> {
    binding_kind: &'a str,
    binding: String,
    role_kind: String,
    role: String,
    rules: Arc<Object>,
}

impl Authorizer {
    /// Starts (or joins) the informers of the four RBAC kinds.
    pub fn new(informers: &Informers) -> Authorizer {
        Authorizer {
            roles: informers.get(ROLES),
            role_bindings: informers.get(ROLE_BINDINGS),
            cluster_roles: informers.get(CLUSTER_ROLES),
            cluster_role_bindings: informers.get(CLUSTER_ROLE_BINDINGS),
            informers: informers.clone(),
        }
    }

    /// Waits until the RBAC informers reflect every write made so far (bounded), so a denial
    /// is never the effect of a binding the caches have not seen yet.
    pub async fn catch_up(&self) {
        let all = [
            self.roles.clone(),
            self.role_bindings.clone(),
            self.cluster_roles.clone(),
            self.cluster_role_bindings.clone(),
        ];
        self.informers.catch_up(&all, Duration::from_secs(2)).await;
    }

    fn role_object(&self, role_ref: &RoleRef, namespace: &str) -> Option<Arc<Object>> {
        match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(None, &role_ref.name),
            "Role" if !namespace.is_empty() => self.roles.get(Some(namespace), &role_ref.name),
            _ => None,
        }
    }

    /// Every grant the user holds that applies in `namespace` (`""`: cluster-wide only).
    fn grants(&self, user: &User, namespace: &str) -> Vec<Grant<'static>> {
        let mut out = Vec::new();
        let mut collect = |binding_kind: &'static str, obj: &Arc<Object>, ns: &str| {
            let b = obj.view::<Binding>();
            let Some(role_ref) = &b.role_ref else {
                return;
            };
            if !b
                .subjects
                .iter()
                .any(|s| rules::subject_matches(s, user, ns))
            {
                return;
            }
            if let Some(role) = self.role_object(role_ref, ns) {
                out.push(Grant {
                    binding_kind,
                    binding: obj.name().to_string(),
                    role_kind: role_ref.kind.clone(),
                    role: role_ref.name.clone(),
                    rules: role,
                });
            }
        };
        for obj in self.cluster_role_bindings.list() {
            collect("ClusterRoleBinding", &obj, "");
        }
        if !namespace.is_empty() {
            for obj in self.role_bindings.in_namespace(namespace) {
                collect("RoleBinding", &obj, namespace);
            }
        }
        out
    }

    /// `Some(reason)` when the user may make the request.
    pub fn allowed(&self, user: &User, attrs: &Attributes) -> Option<String> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Some(format!("member of {MASTERS}"));
        }
        self.grants(user, attrs.namespace())
            .into_iter()
            .find_map(|g| {
                g.rules
                    .view::<RoleRules>()
                    .0
                    .iter()
                    .any(|r| rules::rule_allows(r, attrs))
                    .then(|| {
                        let ns = match g.binding_kind {
                            "RoleBinding" => format!(" in namespace {:?}", attrs.namespace()),
                            _ => String::new(),
                        };
                        format!(
                            "RBAC: allowed by {} {:?} of {} {:?} to {:?}{ns}",
                            g.binding_kind, g.binding, g.role_kind, g.role, user.name
                        )
                    })
            })
    }

    /// Like [`Authorizer::allowed`], but a denial is confirmed against caches that have caught up.
    pub async fn allowed_fresh(&self, user: &User, attrs: &Attributes) -> Option<String> {
        if let Some(reason) = self.allowed(user, attrs) {
            return Some(reason);
        }
        self.catch_up().await;
        self.allowed(user, attrs)
    }

    /// The rules the user holds in `namespace` (cluster-wide ones included).
    pub fn rules_for(&self, user: &User, namespace: &str) -> Vec<PolicyRule> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return bootstrap::cluster_admin_rules();
        }
        self.grants(user, namespace)
            .iter()
            .flat_map(|g| g.rules.view::<RoleRules>().0.clone())
            .collect()
    }

    /// The rules of the role a binding refers to (`None`: no such role).
    pub fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<Vec<PolicyRule>> {
        self.role_object(role_ref, namespace)
            .map(|o| o.view::<RoleRules>().0.clone())
    }
}
