//! Pod priority in the API (upstream's `Priority` admission plugin and the PriorityClass
//! registry): a new pod's `priorityClassName` resolved into `spec.priority` and
//! `spec.preemptionPolicy` (the global default class when it names none), at most one global
//! default class, the built-in `system-*` classes created at start and never deleted.

pub mod resolve;

use crate::{Registry, RegistryError, WriteOptions};
use berth_shared::admission::priority_class::SYSTEM_CLASSES;
use berth_shared::resource::PRIORITY_CLASSES;
use resolve::Class;
use serde_json::{Value, json};

/// Every stored class, as the resolver reads them.
fn observe_classes(registry: &Registry) -> Result<Vec<Class>, RegistryError> {
    Ok(registry
        .list_values(PRIORITY_CLASSES, None)?
        .iter()
        .map(Class::from_value)
        .collect())
}

/// The Priority plugin on a pod being created: sets `spec.priority`,
/// `spec.preemptionPolicy` and (from the global default) `spec.priorityClassName`.
pub fn admit_pod(registry: &Registry, pod: &mut Value) -> Result<(), RegistryError> {
    if !pod["spec"].is_object() {
        return Ok(());
    }
    let classes = observe_classes(registry)?;
    resolve::admit_pod(pod, &classes).map_err(|reason| {
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        RegistryError::Forbidden(format!("pods \"{name}\" is forbidden: {reason}"))
    })
}

/// The Priority plugin on a PriorityClass being written: only one may be the global default.
pub fn admit_class(registry: &Registry, class: &Value) -> Result<(), RegistryError> {
    let classes = observe_classes(registry)?;
    resolve::check_single_default(&Class::from_value(class), &classes).map_err(|reason| {
        let name = class
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        RegistryError::Forbidden(format!(
            "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: {reason}"
        ))
    })
}

/// Upstream's PriorityClass storage: the built-in classes cannot be deleted.
pub fn check_delete(name: &str) -> Result<(), RegistryError> {
    if SYSTEM_CLASSES.iter().any(|(n, _, _)| *n == name) {
        return Err(RegistryError::Forbidden(format!(
            "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: this is a system priority class and cannot be deleted"
        )));
    }
    Ok(())
}

/// Creates the built-in classes that are missing (at every start, as upstream's
/// `scheduling/bootstrap-system-priority-classes` post-start hook).
pub fn ensure_system_classes(registry: &Registry) -> Result<(), RegistryError> {
    for (name, value, description) in SYSTEM_CLASSES {
        if registry.get(PRIORITY_CLASSES, None, name).is_ok() {
            continue;
        }
        let obj = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description});
        match registry.create(PRIORITY_CLASSES, None, obj, &WriteOptions::default()) {
            Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
