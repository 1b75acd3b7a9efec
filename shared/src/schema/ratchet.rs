//! Validation ratcheting (upstream's `CRDValidationRatcheting`, on by default): on an update,
//! a value that the schema correlates with the old object's and that has not changed keeps
//! its errors to itself, so objects stored under an older, looser schema can still be updated
//! elsewhere. Values are correlated as apiserver's `CorrelatedObject` does: object fields by
//! name (when the schema specifies them), items of `x-kubernetes-list-type: map` lists by their
//! keys; items of other lists are not correlated (the list is compared whole).

use serde_json::Value;

use super::node::Node;

/// The old value correlated with a new one, and the structural schema both are read with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Correlation<'a> {
    pub(crate) schema: &'a Node,
    pub(crate) old: &'a Value,
}

impl<'a> Correlation<'a> {
    /// The correlation of field `name` of `new`: none for the root's `apiVersion` and `kind`,
    /// fields missing on either side, or fields the schema does not specify.
    pub(crate) fn field(&self, new: &Value, name: &str, at_root: bool) -> Option<Correlation<'a>> {
        if at_root && (name == "kind" || name == "apiVersion") {
            return None;
        }
        self.key(new, name)
    }

    fn key(&self, new: &Value, name: &str) -> Option<Correlation<'a>> {
        let old = self.old.as_object()?.get(name)?;
        new.as_object()?.get(name)?;
        let schema = self
            .schema
            .properties
            .get(name)
            .or_else(|| self.schema.additional_schema())?;
        Some(Correlation { schema, old })
    }

    /// The correlation of item `item` of a list: the old item with the same keys, in a map list.
    pub(crate) fn item(&self, item: &Value) -> Option<Correlation<'a>> {
        if self.schema.list_type.as_deref() != Some("map") {
            return None;
        }
        let schema = self.schema.items.as_deref()?;
        let old = map_list_get(&self.schema.list_map_keys, self.old.as_array()?, item)?;
        Some(Correlation { schema, old })
    }

    /// Upstream `CachedDeepEqual`: whether `new` is unchanged from the old value.
    pub(crate) fn unchanged(&self, new: &Value) -> bool {
        match (new, self.old) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            (Value::Array(n), Value::Array(o)) => {
                if n.len() != o.len() {
                    return false;
                }
                if self.schema.list_type.as_deref() != Some("map") {
                    return n == o;
                }
                n.iter()
                    .all(|item| self.item(item).is_some_and(|c| c.unchanged(item)))
            }
            (Value::Object(n), Value::Object(o)) => {
                n.len() == o.len()
                    && n.iter()
                        .all(|(k, v)| self.key(new, k).is_some_and(|c| c.unchanged(v)))
            }
            (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
                false
            }
            (n, o) => n == o,
        }
    }
}

/// The item of `old` whose list-map keys equal `item`'s (every key must be present).
fn map_list_get<'a>(keys: &[String], old: &'a [Value], item: &Value) -> Option<&'a Value> {
    let item = item.as_object()?;
    let wanted: Vec<&Value> = keys.iter().map(|k| item.get(k)).collect::<Option<_>>()?;
    old.iter().find(|o| {
        o.as_object()
            .is_some_and(|o| keys.iter().zip(&wanted).all(|(k, w)| o.get(k) == Some(*w)))
    })
}
