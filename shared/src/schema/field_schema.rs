//! A custom resource's schema as server-side apply reads it ([`FieldSchema`]): list types
//! from `x-kubernetes-list-type` (atomic when undeclared, as upstream's structured-merge-diff
//! takes CRD lists), atomic objects from `x-kubernetes-map-type: atomic`, maps of data from
//! `additionalProperties`, and list-map keys' defaults.

use serde_json::Value;

use super::Structural;
use super::list_type::{self, node_at};
use crate::managed_fields::{FieldSchema, ListType};

impl FieldSchema for Structural {
    fn list_type(&self, path: &[String]) -> ListType {
        list_type::at(&self.root, path).unwrap_or(ListType::Atomic)
    }

    fn is_atomic_object(&self, path: &[String]) -> bool {
        node_at(&self.root, path).is_some_and(|n| n.map_type.as_deref() == Some("atomic"))
    }

    fn keys_are_data(&self, path: &[String]) -> bool {
        node_at(&self.root, path).is_some_and(|n| n.properties.is_empty() && n.additional.is_some())
    }

    fn key_default(&self, path: &[String], key: &str) -> Option<Value> {
        node_at(&self.root, path)?
            .items
            .as_deref()?
            .properties
            .get(key)?
            .default
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn server_side_apply_reads_the_schemas_merge_rules() {
        let s = Structural::from_schema(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["port", "protocol"],
                          "items": {"type": "object", "required": ["port"], "properties": {
                              "port": {"type": "integer"},
                              "protocol": {"type": "string", "default": "TCP"}}}},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                             "properties": {"app": {"type": "string"}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "nested": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}),
            "openAPIV3Schema",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            s.list_type(&path(&["spec", "ports"])),
            ListType::Map(vec!["port".into(), "protocol".into()])
        );
        assert_eq!(s.list_type(&path(&["spec", "args"])), ListType::Atomic);
        assert!(s.is_atomic_object(&path(&["spec", "selector"])));
        assert!(!s.is_atomic_object(&path(&["spec", "nested"])));
        assert!(s.keys_are_data(&path(&["spec", "labels"])));
        assert!(!s.keys_are_data(&path(&["spec", "nested"])));
        assert_eq!(
            s.key_default(&path(&["spec", "ports"]), "protocol"),
            Some(json!("TCP"))
        );
        assert_eq!(s.key_default(&path(&["spec", "ports"]), "port"), None);
    }
}
