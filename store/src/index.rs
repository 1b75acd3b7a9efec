//! The small per-object index kept beside each stored object's bytes, so that label and field
//! selectors can be evaluated on lists and watches without parsing every object.

use crate::label_set::{self, LabelSet};
use serde_json::Value;

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

/// Labels and selectable fields of one object. The field values are packed into one string
/// (every stored object carries an index, and Events have over a dozen selectable fields: one
/// allocation instead of one per field).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectIndex {
    /// Shared with every object that has the same labels.
    pub labels: LabelSet,
    /// Per present field: its position in [`FIELDS`] and where its value ends in `values`
    /// (it starts where the previous one ends).
    fields: Box<[(u8, u32)]>,
    values: Box<str>,
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
        let mut values = String::new();
        let mut fields = Vec::new();
        for (i, (_, ptr)) in FIELDS.iter().enumerate() {
            let Some(v) = obj.pointer(ptr) else {
                continue;
            };
            match v {
                Value::String(s) => values.push_str(s),
                Value::Bool(b) => values.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => values.push_str(&n.to_string()),
                _ => continue,
            }
            // FIELDS has fewer than 256 entries; an object over 4 GiB is refused long before.
            fields.push((i as u8, u32::try_from(values.len()).unwrap_or(u32::MAX)));
        }
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        ObjectIndex {
            labels: label_set::intern(labels),
            fields: fields.into_boxed_slice(),
            values: values.into_boxed_str(),
            uid,
        }
    }

    /// The value of a selectable field; absent fields read as empty, as upstream.
    pub fn field(&self, name: &str) -> Option<&str> {
        let id = FIELDS.iter().position(|(n, _)| *n == name)?;
        let mut start = 0usize;
        for &(f, end) in self.fields.iter() {
            let end = end as usize;
            if usize::from(f) == id {
                return self.values.get(start..end);
            }
            start = end;
        }
        None
    }

    /// The field names selectable for every kind (the API layer restricts per kind).
    pub fn known_fields() -> impl Iterator<Item = &'static str> {
        FIELDS.iter().map(|(n, _)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn packed_fields_read_back_as_written_and_absent_ones_as_none() {
        let idx = ObjectIndex::of(
            &json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u",
            "labels": {"a": "b"}}, "spec": {"nodeName": "", "unschedulable": true},
            "status": {"phase": "Running", "succeeded": 3}}),
        );
        assert_eq!(idx.field("metadata.name"), Some("p"));
        assert_eq!(idx.field("metadata.namespace"), Some("ns"));
        assert_eq!(idx.field("spec.nodeName"), Some(""));
        assert_eq!(idx.field("spec.unschedulable"), Some("true"));
        assert_eq!(idx.field("status.phase"), Some("Running"));
        assert_eq!(idx.field("status.successful"), Some("3"));
        assert_eq!(idx.field("status.podIP"), None);
        assert_eq!(idx.field("no.such.field"), None);
        assert_eq!(idx.labels["a"], "b");
    }
}
