//! Duplicate fields in a JSON request body (`{"spec": {"replicas": 1, "replicas": 2}}`): a
//! decoder into a map keeps the last silently, where upstream's strict decoder names each
//! (`duplicate field "spec.replicas"`) as a warning under `fieldValidation=Warn` and an error
//! under `Strict`. Pure.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The paths of the fields `raw` (JSON) names twice in one object, in document order, as
/// upstream writes them (`spec.template.spec.containers[0].name`). Empty for a body that is
/// not JSON or does not parse (decoding reports that).
pub fn duplicate_fields(raw: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    let walk = Walk {
        path: String::new(),
        out: &mut out,
    };
    if walk.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    out
}

/// Visits one value at `path`, recording repeated keys of the objects in it.
struct Walk<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let item = Walk {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            };
            if seq.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_named_by_their_path() {
        let body = br#"{"kind": "Deployment", "spec": {"replicas": 1, "replicas": 2,
            "template": {"spec": {"containers": [{"name": "a", "image": "x", "name": "b"}]}}},
            "kind": "Deployment"}"#;
        assert_eq!(
            duplicate_fields(body),
            [
                "spec.replicas",
                "spec.template.spec.containers[0].name",
                "kind"
            ]
        );
    }

    #[test]
    fn a_body_without_repeats_or_that_does_not_parse_names_none() {
        assert!(duplicate_fields(br#"{"a": {"b": [1, {"c": 2}]}, "b": null}"#).is_empty());
        assert!(duplicate_fields(b"{not json").is_empty());
        assert!(duplicate_fields(b"apiVersion: v1\nkind: Pod\n").is_empty());
    }
}
