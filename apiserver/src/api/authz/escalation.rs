//! RBAC escalation prevention, as upstream's: a Role or ClusterRole may be written only by
//! someone who holds every permission in it (or may `escalate` on roles), and a binding only by
//! someone who holds every permission of the role it refers to (or may `bind` that role).

use super::super::authn::Identity;
use crate::rbac::Authorizer;
use crate::rbac::rules::{self, Attributes, User};
use berth_registry::{RegistryError, WriteGuard};
use berth_shared::resource::ResourceType;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;
use std::sync::Arc;

const GROUP: &str = "rbac.authorization.k8s.io";

/// Whether writes of `rt` need the check.
pub fn applies(rt: &ResourceType) -> bool {
    rt.group == GROUP
}

fn may(
    authz: &Authorizer,
    id: &Identity,
    verb: &str,
    resource: &str,
    ns: &str,
    name: &str,
) -> bool {
    let attrs = Attributes::Resource {
        verb: verb.into(),
        group: GROUP.into(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: ns.into(),
        name: name.into(),
    };
    authz.allowed(&User::from(id), &attrs).is_some()
}

fn refusal(rt: &ResourceType, name: &str, id: &Identity, missing: &[PolicyRule]) -> RegistryError {
    let groups = id
        .groups
        .iter()
        .map(|g| format!("{g:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    RegistryError::Forbidden(format!(
        "{}.{GROUP} \"{name}\" is forbidden: user \"{}\" (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
        rt.plural,
        id.user,
        rules::describe(missing)
    ))
}

fn check(
    authz: &Authorizer,
    id: &Identity,
    rt: &ResourceType,
    obj: &Value,
) -> Result<(), RegistryError> {
    let meta = |field: &str| {
        obj.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (name, ns) = (meta("name"), meta("namespace"));
    let held = || authz.rules_for(&User::from(id), &ns);
    match rt.kind {
        "Role" | "ClusterRole" => {
            if may(authz, id, "escalate", rt.plural, &ns, &name) {
                return Ok(());
            }
            let wanted: Vec<PolicyRule> =
                serde_json::from_value(obj["rules"].clone()).unwrap_or_default();
            let missing = rules::uncovered(&held(), &wanted);
            if missing.is_empty() {
                Ok(())
            } else {
                Err(refusal(rt, &name, id, &missing))
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let Ok(role_ref) = serde_json::from_value::<RoleRef>(obj["roleRef"].clone()) else {
                return Ok(());
            };
            let role_resource = match role_ref.kind.as_str() {
                "Role" => "roles",
                _ => "clusterroles",
            };
            if may(authz, id, "bind", role_resource, &ns, &role_ref.name) {
                return Ok(());
            }
            let Some(wanted) = authz.role_rules(&role_ref, &ns) else {
                return Err(RegistryError::Forbidden(format!(
                    "{}.{GROUP} \"{name}\" is forbidden: {role_resource}.{GROUP} \"{}\" not found",
                    rt.plural, role_ref.name
                )));
            };
            let missing = rules::uncovered(&held(), &wanted);
            if missing.is_empty() {
                Ok(())
            } else {
                Err(refusal(rt, &name, id, &missing))
            }
        }
        _ => Ok(()),
    }
}

/// The guard that checks a write by `id`.
pub fn guard(authz: &Authorizer, id: &Identity) -> WriteGuard {
    let (authz, id) = (authz.clone(), id.clone());
    WriteGuard(Arc::new(move |rt, obj| check(&authz, &id, rt, obj)))
}
