//! `metadata.managedFields` entries read off and written into an object: one per manager,
//! operation and subresource, written in upstream's order (operation, then time, manager,
//! apiVersion, subresource), an entry left with no fields dropped.

use serde_json::{Map, Value, json};

use super::set::FieldSet;

/// One manager's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this entry is the one `manager` writes with `operation` through `subresource`.
    pub fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// The manager as upstream's conflict messages name it: `"kubectl"` for an applier,
    /// `"kubectl-edit" using apps/v1` for an updater (its identifier carries its apiVersion),
    /// with `with subresource "status"` for a subresource's.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
        // The root is never a member: `{}` is an empty set.
        let mut fields = FieldSet::from_json(v.get("fieldsV1")?);
        fields.me = false;
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation: text("operation")?,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            fields,
        })
    }

    fn to_json(&self) -> Value {
        let mut e = Map::new();
        e.insert("manager".into(), json!(self.manager));
        e.insert("operation".into(), json!(self.operation));
        e.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            e.insert("time".into(), json!(t));
        }
        e.insert("fieldsType".into(), json!("FieldsV1"));
        e.insert("fieldsV1".into(), self.fields.to_json());
        if let Some(sub) = &self.subresource {
            e.insert("subresource".into(), json!(sub));
        }
        Value::Object(e)
    }
}

/// The entries of `obj`'s `metadata.managedFields` (none when absent or malformed).
pub fn read(obj: Option<&Value>) -> Vec<Entry> {
    obj.and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// Writes `entries` into `obj`'s `metadata.managedFields`, in upstream's order, leaving out
/// those with no fields (and the whole list when none is left).
pub fn write(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|p, q| {
        (
            &p.operation,
            &p.time,
            &p.manager,
            &p.api_version,
            &p.subresource,
        )
            .cmp(&(
                &q.operation,
                &q.time,
                &q.manager,
                &q.api_version,
                &q.subresource,
            ))
    });
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            let list = entries.iter().map(Entry::to_json).collect();
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_in_upstreams_order() {
        let mut obj = json!({"metadata": {"managedFields": [
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:y": {}}}},
            {"manager": "z", "operation": "Apply", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}},
            {"manager": "gone", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {}}]}});
        let entries = read(Some(&obj));
        assert_eq!(entries.len(), 4);
        write(&mut obj, entries);
        let managers: Vec<&str> = obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["manager"].as_str())
            .collect();
        assert_eq!(
            managers,
            ["z", "a", "b"],
            "Apply first, then by time and name"
        );
    }

    #[test]
    fn managers_are_described_as_upstreams_conflicts_name_them() {
        let entry = |operation: &str, subresource: Option<&str>| Entry {
            manager: "m".into(),
            operation: operation.into(),
            api_version: "apps/v1".into(),
            time: None,
            subresource: subresource.map(String::from),
            fields: FieldSet::default(),
        };
        assert_eq!(entry("Apply", None).describe(), "\"m\"");
        assert_eq!(entry("Update", None).describe(), "\"m\" using apps/v1");
        assert_eq!(
            entry("Update", Some("status")).describe(),
            "\"m\" with subresource \"status\" using apps/v1"
        );
    }
}
