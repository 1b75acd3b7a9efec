//! Container resources and security: resource names, quantity syntax and sign, requests
//! versus limits (equal for resources that cannot be overcommitted), and user/group ids.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, SecurityContext};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use super::field::{FieldError, Path};
use super::names::{each_invalid, inclusive_range_error, qualified_name};
use crate::quantity::Quantity;

/// A resource name for containers: `cpu`, `memory`, `ephemeral-storage`, `hugepages-*`, or a
/// fully qualified extended resource.
fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// Native resources (no domain, or a `kubernetes.io` domain) may be overcommitted unless they
/// are huge pages; extended resources must have requests equal to limits.
fn overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with("hugepages-")
}

type Quantities = BTreeMap<String, WireQuantity>;

/// Upstream `ValidateResourceRequirements` for containers, plus quantity syntax.
pub(crate) fn validate_resources(r: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Quantities::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    let (lim_path, req_path) = (path.child("limits"), path.child("requests"));
    let mut parsed_limits = BTreeMap::new();
    for (name, q) in limits {
        let fp = lim_path.key(name);
        errs.extend(validate_resource_name(name, &fp));
        if let Some(v) = validate_quantity(name, q, &fp, &mut errs) {
            parsed_limits.insert(name.as_str(), v);
        }
    }
    for (name, q) in requests {
        let fp = req_path.key(name);
        errs.extend(validate_resource_name(name, &fp));
        let Some(req) = validate_quantity(name, q, &fp, &mut errs) else {
            continue;
        };
        match (parsed_limits.get(name.as_str()), limits.get(name)) {
            (Some(lim), Some(lim_raw)) => {
                if req != *lim && !overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.0.as_str(),
                        format!("must be equal to {name} limit of {}", lim_raw.0),
                    ));
                } else if req > *lim {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.0.as_str(),
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            lim_raw.0
                        ),
                    ));
                }
            }
            (None, None) if !overcommit_allowed(name) => {
                errs.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                ));
            }
            _ => {}
        }
    }
    errs
}

fn validate_resource_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = each_invalid(path, name, qualified_name(name));
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !name.contains("kubernetes.io/") && name.starts_with("requests.") {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

/// Parses a quantity, reporting syntax, sign and (for extended resources) integrality.
fn validate_quantity(
    name: &str,
    q: &WireQuantity,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> Option<Quantity> {
    match Quantity::parse(&q.0) {
        Err(msg) => {
            errs.push(FieldError::invalid(path, q.0.as_str(), msg));
            None
        }
        Ok(v) => {
            if v.is_negative() {
                errs.push(FieldError::invalid(
                    path,
                    q.0.as_str(),
                    "must be greater than or equal to 0",
                ));
            }
            if !overcommit_allowed(name) && !name.starts_with("hugepages-") && !v.is_whole() {
                errs.push(FieldError::invalid(
                    path,
                    q.0.as_str(),
                    "must be an integer",
                ));
            }
            Some(v)
        }
    }
}

pub(crate) fn validate_security_context(sc: &SecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ids = [
        ("runAsUser", sc.run_as_user),
        ("runAsGroup", sc.run_as_group),
    ];
    for (field, id) in ids {
        errs.extend(validate_id(id, &path.child(field)));
    }
    if sc.allow_privilege_escalation == Some(false) {
        let v = serde_json::to_value(sc).unwrap_or_default();
        if sc.privileged == Some(true) {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc
            .capabilities
            .as_ref()
            .and_then(|c| c.add.as_deref())
            .unwrap_or_default();
        if adds.iter().any(|c| c == "CAP_SYS_ADMIN") {
            errs.push(FieldError::invalid(path, v, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"));
        }
    }
    errs
}

/// User and group ids must fit 0..=2147483647.
pub(crate) fn validate_id(id: Option<i64>, path: &Path) -> Vec<FieldError> {
    match id {
        Some(v) if !(0..=i64::from(i32::MAX)).contains(&v) => {
            vec![FieldError::invalid(
                path,
                v,
                inclusive_range_error(0, i32::MAX.into()),
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn resources(v: serde_json::Value) -> Vec<String> {
        let r: ResourceRequirements = serde_json::from_value(v).unwrap();
        error_messages(&validate_resources(&r, &Path::new("r")))
    }

    #[test]
    fn requests_may_not_exceed_limits() {
        assert!(resources(json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})).is_empty());
        assert_eq!(
            resources(json!({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}})),
            vec![
                "r.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"
            ]
        );
    }

    #[test]
    fn extended_resources_must_be_whole_and_equal() {
        assert_eq!(
            resources(
                json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}})
            ),
            vec!["r.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"]
        );
        assert_eq!(
            resources(json!({"limits": {"example.com/gpu": "500m"}})),
            vec!["r.limits[example.com/gpu]: Invalid value: \"500m\": must be an integer"]
        );
    }
}
