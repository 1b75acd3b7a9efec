//! The small per-object index kept beside each stored object's bytes, so that label and field
//! selectors can be evaluated on lists and watches without parsing every object.

use serde_json::Value;
use std::collections::BTreeMap;

/// Selectable fields, as Kubernetes names them in `fieldSelector`.
const FIELDS: &[(&str, &str)] = &[
    ("metadata.name", "/metadata/name"),
    ("metadata.namespace", "/metadata/namespace"),
    ("spec.nodeName", "/spec/nodeName"),
    ("spec.schedulerName", "/spec/schedulerName"),
    ("spec.serviceAccountName", "/spec/serviceAccountName"),
    ("spec.unschedulable", "/spec/unschedulable"),
    ("spec.restartPolicy", "/spec/restartPolicy"),
    ("status.phase", "/status/phase"),
    ("status.podIP", "/status/podIP"),
    ("status.nominatedNodeName", "/status/nominatedNodeName"),
    ("status.successful", "/status/succeeded"),
    ("involvedObject.kind", "/involvedObject/kind"),
    ("involvedObject.namespace", "/involvedObject/namespace"),
    ("involvedObject.name", "/involvedObject/name"),
    ("involvedObject.uid", "/involvedObject/uid"),
    ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
    (
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
    ),
    ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
    ("reason", "/reason"),
    ("reportingComponent", "/reportingComponent"),
    ("source", "/source/component"),
    ("type", "/type"),
];

/// Labels and selectable fields of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectIndex {
    pub labels: BTreeMap<String, String>,
    pub fields: Vec<(&'static str, String)>,
    pub uid: String,
}

impl ObjectIndex {
    pub fn of(obj: &Value) -> ObjectIndex {
        let labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = FIELDS
            .iter()
            .filter_map(|(name, ptr)| {
                let v = obj.pointer(ptr)?;
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => return None,
                };
                Some((*name, s))
            })
            .collect();
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        ObjectIndex {
            labels,
            fields,
            uid,
        }
    }

    /// The value of a selectable field; absent fields read as empty, as upstream.
    pub fn field(&self, name: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }

    /// The field names selectable for every kind (the API layer restricts per kind).
    pub fn known_fields() -> impl Iterator<Item = &'static str> {
        FIELDS.iter().map(|(n, _)| *n)
    }
}
