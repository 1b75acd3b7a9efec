//! Pod templates as the Deployment controller compares and names them: `EqualIgnoreHash` (two
//! templates are the same revision when they differ only in the `pod-template-hash` label,
//! nulls, empty lists/label maps and `creationTimestamp: null`) and `ComputeHash` (FNV-32a over
//! a canonical rendering of the template, plus the collision count, spelled with upstream's
//! `SafeEncodeString` alphabet so names look like `nginx-deployment-75675f5897`).
//!
//! The hash is computed over the same normalized form that equality uses, so equal templates
//! always hash alike, and it is stable across restarts (sorted keys, no randomness). It does not
//! reproduce upstream's value byte for byte (that is a Go `spew` dump of the struct).
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value};

/// The label the controller adds to a ReplicaSet's selector and template.
pub const HASH_LABEL: &str = "pod-template-hash";

/// Upstream `rand.SafeEncodeString`'s alphabet: no vowels (no words) and no look-alikes.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Removes nulls and empty lists everywhere (Go treats nil and empty slices as equal).
fn prune(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Array(a) => {
            let items: Vec<Value> = a.iter().map(|x| prune(x).unwrap_or(Value::Null)).collect();
            if items.is_empty() {
                None
            } else {
                Some(Value::Array(items))
            }
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                if let Some(x) = prune(&m[k]) {
                    out.insert(k.clone(), x);
                }
            }
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    }
}

/// The template as compared and hashed: pruned, keys sorted, without the hash label,
/// `creationTimestamp` and empty label/annotation maps (maps are nil-equals-empty in Go).
pub fn normalized(t: &PodTemplateSpec) -> Value {
    let raw = serde_json::to_value(t).unwrap_or(Value::Null);
    let mut v = prune(&raw).unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("creationTimestamp");
        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(HASH_LABEL);
        }
        for key in ["labels", "annotations"] {
            if meta
                .get(key)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                meta.remove(key);
            }
        }
    }
    if let Some(m) = v.as_object_mut()
        && m.get("metadata")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        m.remove("metadata");
    }
    v
}

/// Upstream `EqualIgnoreHash`.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    normalized(a) == normalized(b)
}

fn fnv32a(h: u32, bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u32::from(*b)).wrapping_mul(16_777_619))
}

/// Upstream `rand.SafeEncodeString`: each byte picks a character of the alphabet.
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// Upstream `controller.ComputeHash`: FNV-32a of the template, then of the collision count as
/// eight little-endian bytes when it is set; the decimal value, safe-encoded.
pub fn compute_hash(t: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let rendered = normalized(t).to_string();
    let mut h = fnv32a(2_166_136_261, rendered.as_bytes());
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&c.to_le_bytes());
        h = fnv32a(h, &bytes);
    }
    safe_encode(&h.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tpl(v: Value) -> PodTemplateSpec {
        serde_json::from_value(v).unwrap()
    }

    fn nginx(image: &str) -> Value {
        json!({
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": image,
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
        })
    }

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(2_166_136_261, b""), 0x811c_9dc5);
        assert_eq!(fnv32a(2_166_136_261, b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(2_166_136_261, b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_maps_digits_onto_the_upstream_alphabet() {
        // '0' is byte 48, 48 % 27 = 21 → '4'; '9' is 57 → 3 → 'f'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        let h = compute_hash(&tpl(nginx("nginx:1.14.2")), None);
        assert!(!h.is_empty() && h.len() <= 10);
        assert!(h.bytes().all(|b| ALPHANUMS.contains(&b)), "{h}");
    }

    #[test]
    fn the_hash_ignores_the_hash_label_and_key_order_but_not_the_image() {
        let a = tpl(nginx("nginx:1.14.2"));
        let mut with_label = nginx("nginx:1.14.2");
        with_label["metadata"]["labels"]["pod-template-hash"] = json!("abc");
        let reordered = tpl(json!({
            "spec": {"containers": [{"ports": [{"protocol": "TCP", "containerPort": 80}],
                "image": "nginx:1.14.2", "name": "nginx"}]},
            "metadata": {"labels": {"app": "nginx"}, "creationTimestamp": null}
        }));
        assert_eq!(compute_hash(&a, None), compute_hash(&tpl(with_label), None));
        assert_eq!(compute_hash(&a, None), compute_hash(&reordered, None));
        assert_ne!(
            compute_hash(&a, None),
            compute_hash(&tpl(nginx("nginx:1.16.1")), None)
        );
    }

    #[test]
    fn the_collision_count_changes_the_hash() {
        let a = tpl(nginx("nginx:1.14.2"));
        let plain = compute_hash(&a, None);
        let zero = compute_hash(&a, Some(0));
        let one = compute_hash(&a, Some(1));
        assert_ne!(plain, zero);
        assert_ne!(zero, one);
        assert_eq!(one, compute_hash(&a, Some(1)));
    }

    #[test]
    fn templates_equal_ignoring_the_hash_label_nulls_and_empty_lists() {
        let base = nginx("nginx:1.16.1");
        let mut rs_copy = base.clone();
        rs_copy["metadata"]["labels"]["pod-template-hash"] = json!("c4747d96c");
        rs_copy["metadata"]["creationTimestamp"] = Value::Null;
        rs_copy["spec"]["volumes"] = json!([]);
        rs_copy["metadata"]["annotations"] = json!({});
        let cases = [
            ("same template", base.clone(), true),
            ("copy on the ReplicaSet", rs_copy, true),
            ("other image", nginx("nginx:1.161"), false),
            (
                "restartedAt annotation",
                {
                    let mut v = base.clone();
                    v["metadata"]["annotations"] =
                        json!({"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"});
                    v
                },
                false,
            ),
            (
                "other label",
                {
                    let mut v = base.clone();
                    v["metadata"]["labels"]["tier"] = json!("web");
                    v
                },
                false,
            ),
        ];
        for (name, other, want) in cases {
            assert_eq!(
                equal_ignore_hash(&tpl(base.clone()), &tpl(other)),
                want,
                "{name}"
            );
        }
    }
}
