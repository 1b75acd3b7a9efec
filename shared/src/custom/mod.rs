//! Custom resources: what a CustomResourceDefinition serves, read from the definition, and the
//! process-wide table of the custom types served now (for admission, tables, conversion and
//! the scale subresource). [`install`] is fed the stored definitions; only those whose
//! `Established` condition is true are served, with their accepted names.

mod definition;
pub mod printer;
pub mod selectable;

pub use definition::{Definition, Names, ScalePaths, Version, parse_definition};

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::resource::{self, ResourceType};
use crate::schema::Structural;

/// One served version of a custom resource type.
#[derive(Debug)]
pub struct Served {
    pub rt: &'static ResourceType,
    pub definition: Arc<Definition>,
    pub version: Version,
    /// The version objects are stored in.
    pub storage_version: &'static str,
    /// The version's schema, parsed; `None` for a schema that does not parse (the definition's
    /// admission refuses those, so only an old stored definition can have one).
    pub structural: Option<Arc<Structural>>,
}

impl Served {
    /// The version's `openAPIV3Schema`, for its CEL rules.
    pub fn schema(&self) -> Option<&Value> {
        self.version.schema.as_ref()
    }
}

static SERVED: RwLock<Vec<Arc<Served>>> = RwLock::new(Vec::new());

/// Bumped by every [`install`], so what is derived from the served types (the OpenAPI
/// documents) knows when to be built again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// How many times the served types have been replaced.
pub fn generation() -> u64 {
    GENERATION.load(AtomicOrdering::Acquire)
}

/// The served version `rt` is, if it is a custom type.
pub fn served(rt: &ResourceType) -> Option<Arc<Served>> {
    if !rt.custom {
        return None;
    }
    SERVED
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|s| s.rt == rt)
        .cloned()
}

/// Every custom type served now.
pub fn all_served() -> Vec<Arc<Served>> {
    SERVED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether a definition is established (its `Established` condition is `True`).
pub fn is_established(crd: &Value) -> bool {
    condition_is_true(crd, "Established")
}

/// Whether a definition is served: its names are accepted (the controller then marks it
/// `Established` once its own API server serves it, so a client that sees the condition finds
/// the types) or it is established already.
pub fn is_servable(crd: &Value) -> bool {
    condition_is_true(crd, "NamesAccepted") || is_established(crd)
}

/// Whether this process serves `name`'s (a definition's) storage version now.
pub fn serves_definition(name: &str) -> bool {
    SERVED
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|s| s.definition.name == name)
}

/// Whether `obj`'s status has a condition of `type_` whose status is `True`.
pub fn condition_is_true(obj: &Value, type_: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

/// Serves the custom types of `definitions` (stored CustomResourceDefinitions): each
/// servable one's ([`is_servable`]) served versions, under its accepted names; everything else
/// stops being served. `parsed` caches parsed schemas by definition name and resourceVersion, so a change
/// of one definition does not parse every other again.
pub fn install(definitions: &[Value], parsed: &mut SchemaCache) {
    // Each served version, with its resource type by value until the table interns it.
    let mut pending = Vec::new();
    let mut keep = Vec::new();
    for crd in definitions.iter().filter(|c| is_servable(c)) {
        let Ok(def) = parse_definition(crd) else {
            continue;
        };
        let def = Arc::new(def);
        let rv = crd
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        keep.push(def.name.clone());
        let storage = resource::intern(def.storage_version().unwrap_or_default());
        let mut versions: Vec<&Version> = def.versions.iter().filter(|v| v.served).collect();
        versions.sort_by(|a, b| compare_versions(&a.name, &b.name));
        for v in versions {
            let structural = parsed.get(&def.name, rv, &v.name, v.schema.as_ref());
            pending.push((
                def.resource_type(v, storage),
                def.clone(),
                v.clone(),
                storage,
                structural,
            ));
        }
    }
    parsed.retain(&keep);
    resource::set_custom(pending.iter().map(|p| p.0).collect());
    let served: Vec<Arc<Served>> = pending
        .into_iter()
        .filter_map(|(rt, definition, version, storage_version, structural)| {
            let rt = resource::custom().into_iter().find(|c| **c == rt)?;
            Some(Arc::new(Served {
                rt,
                definition,
                version,
                storage_version,
                structural,
            }))
        })
        .collect();
    *SERVED.write().unwrap_or_else(|e| e.into_inner()) = served;
    GENERATION.fetch_add(1, AtomicOrdering::AcqRel);
}

/// Parsed schemas by definition, version and the definition's resourceVersion.
#[derive(Default)]
pub struct SchemaCache {
    entries: Vec<(String, String, String, Option<Arc<Structural>>)>,
}

impl SchemaCache {
    fn get(
        &mut self,
        crd: &str,
        rv: &str,
        version: &str,
        schema: Option<&Value>,
    ) -> Option<Arc<Structural>> {
        if let Some((_, _, _, s)) = self
            .entries
            .iter()
            .find(|(c, r, v, _)| c == crd && r == rv && v == version)
        {
            return s.clone();
        }
        self.entries
            .retain(|(c, _, v, _)| !(c == crd && v == version));
        let parsed = schema
            .and_then(|s| Structural::from_schema(s, "openAPIV3Schema").ok())
            .map(Arc::new);
        self.entries.push((
            crd.to_string(),
            rv.to_string(),
            version.to_string(),
            parsed.clone(),
        ));
        parsed
    }

    fn retain(&mut self, names: &[String]) {
        self.entries.retain(|(c, _, _, _)| names.contains(c));
    }
}

/// Upstream's kube-aware version order (`CompareKubeAwareVersionStrings`): GA before beta
/// before alpha, higher numbers first within each; versions not of the `v1beta2` form go last,
/// alphabetically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (kube_version(a), kube_version(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// `(stability, major, minor)` where GA is 2, beta 1 and alpha 0; larger sorts first.
fn kube_version(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    if major == 0 {
        return None;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((2, major, 0));
    }
    let (stability, num) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n)
    } else {
        return None;
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) || num.starts_with('0') {
        return None;
    }
    Some((stability, major, num.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_upstream_sorts_them() {
        let mut v = vec![
            "v1alpha1",
            "v2",
            "foo10",
            "v1beta2",
            "v1",
            "v11alpha2",
            "v12beta1",
            "foo1",
            "v10beta3",
            "v2beta1",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            [
                "v2",
                "v1",
                "v12beta1",
                "v10beta3",
                "v2beta1",
                "v1beta2",
                "v11alpha2",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
    }
}
