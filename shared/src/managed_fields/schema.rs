//! What field ownership needs to know of a kind's schema: how each list merges
//! (`x-kubernetes-list-type` atomic / set / map with its `x-kubernetes-list-map-keys`), which
//! objects are atomic (`x-kubernetes-map-type: atomic`, Go's `structType=atomic`), and which
//! objects are maps whose keys are data rather than declared fields. Built-in kinds answer from
//! the strategic-merge table ([`BuiltIn`]); a custom resource's schema implements
//! [`FieldSchema`] itself.
//!
//! Paths are field names from the object root; entering a list's items adds no segment (a
//! container's env in a Deployment is `spec.template.spec.containers.env`), as in the
//! strategic-merge table.

use serde_json::{Map, Value};

use crate::patch::{ListStrategy, list_strategy};

/// How a list's items are told apart, merged and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value: applied, compared and owned whole.
    Atomic,
    /// A set of scalars: each value is an item (`v:"x"`).
    Set,
    /// A list of objects told apart by these keys (`k:{"name":"x"}`).
    Map(Vec<String>),
}

/// A kind's schema, as far as field ownership needs it.
pub trait FieldSchema {
    /// How the list at `path` merges.
    fn list_type(&self, path: &[String]) -> ListType;

    /// Whether the object at `path` is one value (owned and replaced whole).
    fn is_atomic_object(&self, _path: &[String]) -> bool {
        false
    }

    /// Whether the object at `path` is a map whose keys are data (`labels`, `data`,
    /// `additionalProperties`), so each entry is owned itself.
    fn keys_are_data(&self, _path: &[String]) -> bool {
        false
    }

    /// The default of a list map key an item may leave out (`protocol` is `TCP`), so an
    /// applied item without it names the same item as the stored, defaulted one.
    fn key_default(&self, _path: &[String], _key: &str) -> Option<Value> {
        None
    }
}

/// A shared schema answers as the schema it shares (a served custom resource's
/// `Arc<Structural>`).
impl<T: FieldSchema + ?Sized> FieldSchema for std::sync::Arc<T> {
    fn list_type(&self, path: &[String]) -> ListType {
        (**self).list_type(path)
    }

    fn is_atomic_object(&self, path: &[String]) -> bool {
        (**self).is_atomic_object(path)
    }

    fn keys_are_data(&self, path: &[String]) -> bool {
        (**self).keys_are_data(path)
    }

    fn key_default(&self, path: &[String], key: &str) -> Option<Value> {
        (**self).key_default(path, key)
    }
}

/// The schema of a built-in kind, from the strategic-merge table and the list map keys and
/// atomic types upstream's OpenAPI declares.
#[derive(Debug, Clone, Copy)]
pub struct BuiltIn<'a> {
    pub kind: &'a str,
}

/// Object fields whose keys are data, not declared fields.
pub(super) const STRING_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "matchLabels",
    "data",
    "binaryData",
    "stringData",
    "limits",
    "requests",
    "capacity",
    "allocatable",
    "parameters",
];

/// Object types upstream declares atomic (`LabelSelector`, the key selectors and references
/// of env and volumes), by the field names they sit under.
const ATOMIC_OBJECTS: &[&str] = &[
    "selector",
    "labelSelector",
    "namespaceSelector",
    "configMapKeyRef",
    "secretKeyRef",
    "fieldRef",
    "resourceFieldRef",
    "configMapRef",
    "secretRef",
];

impl FieldSchema for BuiltIn<'_> {
    fn list_type(&self, path: &[String]) -> ListType {
        match list_strategy(self.kind, path) {
            ListStrategy::Atomic => ListType::Atomic,
            ListStrategy::MergePrimitives => ListType::Set,
            // Ports are told apart by number and protocol (`x-kubernetes-list-map-keys`).
            ListStrategy::MergeByKey(key @ ("containerPort" | "port")) => {
                ListType::Map(vec![key.to_string(), "protocol".to_string()])
            }
            ListStrategy::MergeByKey(key) => ListType::Map(vec![key.to_string()]),
        }
    }

    fn is_atomic_object(&self, path: &[String]) -> bool {
        // A Service's selector is a plain map, atomic too (`+mapType=atomic`). A CRD's
        // schema names properties as it likes: none of them is one of these types.
        self.kind != "CustomResourceDefinition"
            && path
                .last()
                .is_some_and(|f| ATOMIC_OBJECTS.contains(&f.as_str()))
            && path.first().is_some_and(|f| f != "metadata")
    }

    fn keys_are_data(&self, path: &[String]) -> bool {
        // A CRD's `properties` are maps of data; its schema's own property names are not.
        if self.kind == "CustomResourceDefinition" {
            return path.last().is_some_and(|f| f == "properties");
        }
        path.last()
            .is_some_and(|f| STRING_MAPS.contains(&f.as_str()))
    }

    fn key_default(&self, _path: &[String], key: &str) -> Option<Value> {
        (key == "protocol").then(|| Value::String("TCP".to_string()))
    }
}

/// A kind's schema with ObjectMeta's rules at the object's own `metadata` (labels and
/// annotations maps of data, finalizers a set, owner references keyed by uid), whatever the
/// kind's schema says there: a custom resource's schema rarely spells ObjectMeta out.
pub(super) struct WithObjectMeta<'a>(pub &'a dyn FieldSchema);

const OBJECT_META: BuiltIn<'static> = BuiltIn { kind: "" };

impl WithObjectMeta<'_> {
    fn at(&self, path: &[String]) -> &dyn FieldSchema {
        if path.first().is_some_and(|f| f == "metadata") {
            &OBJECT_META
        } else {
            self.0
        }
    }
}

impl FieldSchema for WithObjectMeta<'_> {
    fn list_type(&self, path: &[String]) -> ListType {
        self.at(path).list_type(path)
    }

    fn is_atomic_object(&self, path: &[String]) -> bool {
        self.at(path).is_atomic_object(path)
    }

    fn keys_are_data(&self, path: &[String]) -> bool {
        self.at(path).keys_are_data(path)
    }

    fn key_default(&self, path: &[String], key: &str) -> Option<Value> {
        self.at(path).key_default(path, key)
    }
}

/// The path element of a list item: `k:{…}` for a map list (keys sorted, a missing key
/// defaulted from the schema), `v:…` for a set; `None` for an atomic list.
pub(super) fn item_element(
    schema: &dyn FieldSchema,
    path: &[String],
    list: &ListType,
    item: &Value,
) -> Option<String> {
    match list {
        ListType::Atomic => None,
        ListType::Set => Some(format!("v:{item}")),
        ListType::Map(keys) => {
            let mut names: Vec<&String> = keys.iter().collect();
            names.sort();
            let mut k = Map::new();
            for name in names {
                let value = item
                    .get(name.as_str())
                    .cloned()
                    .or_else(|| schema.key_default(path, name));
                if let Some(v) = value {
                    k.insert(name.clone(), v);
                }
            }
            Some(format!("k:{}", Value::Object(k)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(kind: &str, path: &str) -> ListType {
        let path: Vec<String> = path.split('.').map(String::from).collect();
        BuiltIn { kind }.list_type(&path)
    }

    #[test]
    fn built_in_lists_take_upstreams_list_types() {
        let ports = ListType::Map(vec!["containerPort".into(), "protocol".into()]);
        let cases = [
            (
                "Deployment",
                "spec.template.spec.containers",
                ListType::Map(vec!["name".into()]),
            ),
            ("Pod", "spec.containers.ports", ports),
            (
                "Service",
                "spec.ports",
                ListType::Map(vec!["port".into(), "protocol".into()]),
            ),
            ("Pod", "metadata.finalizers", ListType::Set),
            ("Pod", "spec.containers.args", ListType::Atomic),
            ("Pod", "spec.tolerations", ListType::Atomic),
        ];
        for (kind, path, want) in cases {
            assert_eq!(at(kind, path), want, "{kind} {path}");
        }
    }

    #[test]
    fn items_are_named_by_sorted_keys_with_defaults_filled_in() {
        let schema = BuiltIn { kind: "Pod" };
        let ports = ListType::Map(vec!["containerPort".into(), "protocol".into()]);
        let path: Vec<String> = vec!["spec".into(), "containers".into(), "ports".into()];
        assert_eq!(
            item_element(&schema, &path, &ports, &json!({"containerPort": 80})).as_deref(),
            Some("k:{\"containerPort\":80,\"protocol\":\"TCP\"}")
        );
        assert_eq!(
            item_element(&schema, &path, &ListType::Set, &json!("a")).as_deref(),
            Some("v:\"a\"")
        );
        assert_eq!(
            item_element(&schema, &path, &ListType::Atomic, &json!(1)),
            None
        );
    }

    #[test]
    fn selectors_are_atomic_and_labels_are_maps_of_data() {
        let d = BuiltIn { kind: "Deployment" };
        let p = |s: &str| -> Vec<String> { s.split('.').map(String::from).collect() };
        assert!(d.is_atomic_object(&p("spec.selector")));
        assert!(!d.is_atomic_object(&p("spec.template")));
        assert!(d.keys_are_data(&p("metadata.labels")));
        assert!(!d.keys_are_data(&p("spec")));
        let crd = BuiltIn {
            kind: "CustomResourceDefinition",
        };
        let prop = p("spec.versions.schema.openAPIV3Schema.properties.spec.properties.selector");
        assert!(!crd.is_atomic_object(&prop));
        assert!(crd.keys_are_data(&p("spec.versions.schema.openAPIV3Schema.properties")));
    }

    #[test]
    fn object_meta_keeps_its_rules_whatever_the_kinds_schema_says() {
        /// A schema that makes every list and object atomic.
        struct AllAtomic;
        impl FieldSchema for AllAtomic {
            fn list_type(&self, _: &[String]) -> ListType {
                ListType::Atomic
            }
            fn is_atomic_object(&self, _: &[String]) -> bool {
                true
            }
        }
        let s = WithObjectMeta(&AllAtomic);
        let p = |s: &str| -> Vec<String> { s.split('.').map(String::from).collect() };
        assert_eq!(s.list_type(&p("metadata.finalizers")), ListType::Set);
        assert_eq!(
            s.list_type(&p("metadata.ownerReferences")),
            ListType::Map(vec!["uid".into()])
        );
        assert!(!s.is_atomic_object(&p("metadata.labels")));
        assert!(s.keys_are_data(&p("metadata.labels")));
        assert!(s.is_atomic_object(&p("spec.template")));
        assert_eq!(s.list_type(&p("spec.items")), ListType::Atomic);
    }
}
