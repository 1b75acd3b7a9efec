//! A new pod's object from its owner's pod template, as the DaemonSet and StatefulSet
//! controllers make them (upstream's `GetPodFromTemplate`, after each has put in its own
//! labels and identity).
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

/// A pod with `meta` plus the template's annotations and finalizers (when there are any) and
/// the controller reference `controller_ref`, and `spec`.
pub fn from_template(
    mut meta: Map<String, Value>,
    template: ObjectMeta,
    controller_ref: Value,
    spec: &core::PodSpec,
) -> Value {
    if let Some(a) = template.annotations.filter(|a| !a.is_empty()) {
        meta.insert("annotations".into(), json!(a));
    }
    if let Some(f) = template.finalizers.filter(|f| !f.is_empty()) {
        meta.insert("finalizers".into(), json!(f));
    }
    meta.insert("ownerReferences".into(), json!([controller_ref]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": serde_json::to_value(spec).unwrap_or_else(|_| json!({})),
    })
}
