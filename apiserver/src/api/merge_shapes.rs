//! Merge-patch shapes known to add no unknown field. A JSON merge patch's result has the
//! stored object's fields and the patch's, and a stored built-in object has no field its kind
//! does not know (admission re-encodes it from its typed form, as upstream's decoder drops
//! them), so a patch of the same kind with the same keys as one whose result had no unknown
//! field cannot have any either. Heartbeat-like writers (a node's status, a Lease renewal) send
//! the same keys every time: the typed round trip that looks for unknown fields is then made
//! once per shape instead of once per write. Shapes whose result had unknown fields are never
//! remembered, so their warnings (and `Strict`'s 400) come every time.

use serde_json::Value;
use std::collections::HashSet;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// The kinds whose stored objects admission always re-encodes from their typed form (so they
/// hold no unknown field) and whose writers patch the same keys over and over: pods' and
/// nodes' status, Leases.
pub const REMEMBERED: [&str; 3] = ["Pod", "Node", "Lease"];

/// At most this many shapes are remembered; the set starts over when it is full.
const MAX_SHAPES: usize = 1024;

/// The shapes seen to leave no unknown field, per API server ([`super::ApiState`]). Cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct CleanShapes {
    clean: Arc<Mutex<HashSet<String>>>,
}

impl CleanShapes {
    /// Whether a patch of this shape was seen to leave no unknown field.
    pub fn known(&self, shape: &str) -> bool {
        self.clean
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(shape)
    }

    /// Remembers that a patch of this shape left no unknown field.
    pub fn remember(&self, shape: String) {
        let mut set = self.clean.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() >= MAX_SHAPES {
            set.clear();
        }
        set.insert(shape);
    }
}

/// The shape of a patch to `kind`: its key paths with array positions, without the values
/// (`{"status":{"phase":"x"}}` and `{"status":{"phase":"y"}}` share one).
pub fn shape(kind: &str, patch: &Value) -> String {
    let mut out = String::from(kind);
    out.push(':');
    write_shape(patch, &mut out);
    out
}

fn write_shape(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            for (k, v) in m {
                let _ = write!(out, "{k:?}:");
                write_shape(v, out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for v in a {
                write_shape(v, out);
                out.push(',');
            }
            out.push(']');
        }
        // A scalar adds no key; null (a removal) adds none either.
        _ => out.push('.'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_shape_is_the_keys_and_positions_without_the_values() {
        let a = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let b = json!({"status": {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(shape("Pod", &a), shape("Pod", &b));
        let more = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]}});
        let other_key = json!({"status": {"phasee": "Running"}});
        let other_kind = shape("Node", &a);
        for different in [shape("Pod", &more), shape("Pod", &other_key), other_kind] {
            assert_ne!(shape("Pod", &a), different);
        }
        // Keys are quoted: a key holding the separators cannot pass for two keys.
        assert_ne!(
            shape("Pod", &json!({"a:{": 1})),
            shape("Pod", &json!({"a": {"": 1}}))
        );
    }

    #[test]
    fn only_shapes_remembered_clean_are_known_and_a_full_set_starts_over() {
        let shapes = CleanShapes::default();
        let s = shape("Pod", &json!({"status": {"phase": "Running"}}));
        assert!(!shapes.known(&s));
        shapes.remember(s.clone());
        assert!(shapes.known(&s));
        assert!(!CleanShapes::default().known(&s), "each server has its own");
        for i in 1..MAX_SHAPES {
            shapes.remember(format!("Pod:{i}"));
        }
        assert!(shapes.known(&s));
        shapes.remember("Pod:one too many".into());
        assert!(!shapes.known(&s));
        assert!(shapes.known("Pod:one too many"));
    }
}
