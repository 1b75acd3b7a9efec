//! JSON merge patch (RFC 7386), as sent by `kubectl label`, `annotate`, `scale` and
//! `patch --type=merge`: objects merge recursively, `null` deletes, anything else replaces.

use serde_json::{Map, Value};

/// Applies `patch` to `target` in place. Key order of the target is kept; new keys go last.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            map.shift_remove(key);
        } else {
            let slot = map.entry(key.clone()).or_insert(Value::Null);
            apply_merge_patch(slot, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let cases = [
            (
                json!({"metadata": {"labels": {"a": "1"}}}),
                json!({"metadata": {"labels": {"k": "v"}}}),
                json!({"metadata": {"labels": {"a": "1", "k": "v"}}}),
            ),
            (
                json!({"metadata": {"labels": {"a": "1", "k": "v"}}}),
                json!({"metadata": {"labels": {"k": null}}}),
                json!({"metadata": {"labels": {"a": "1"}}}),
            ),
            (
                json!({"metadata": {"name": "x"}}),
                json!({"metadata": {"labels": {"k": "v", "gone": null}}}),
                json!({"metadata": {"name": "x", "labels": {"k": "v"}}}),
            ),
            (
                json!({"spec": {"replicas": 1, "list": [1, 2]}}),
                json!({"spec": {"replicas": 3, "list": [3]}}),
                json!({"spec": {"replicas": 3, "list": [3]}}),
            ),
            (json!({"a": {"b": 1}}), json!({"a": "x"}), json!({"a": "x"})),
            (
                json!({"a": "x"}),
                json!({"a": {"b": 1}}),
                json!({"a": {"b": 1}}),
            ),
            (json!({"a": 1}), json!(["whole"]), json!(["whole"])),
            (json!({"a": 1}), json!({}), json!({"a": 1})),
        ];
        for (mut target, patch, want) in cases {
            apply_merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn deleting_a_key_keeps_the_order_of_the_others() {
        let mut target = json!({"a": 1, "b": 2, "c": 3});
        apply_merge_patch(&mut target, &json!({"a": null}));
        let keys: Vec<&String> = target.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "c"]);
    }
}
