//! JSON patch (RFC 6902), as sent by `kubectl rollout undo` and `patch --type=json`: a list of
//! add/remove/replace/move/copy/test operations applied all-or-nothing.

use json_patch::{Patch, PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::PatchError;

/// Upstream's cap on operations in one JSON patch.
const MAX_OPERATIONS: usize = 10_000;

/// How much a JSON patch's `copy` operations may copy in all, in bytes of JSON (the API's body
/// limit). Without it, each copy of a value into itself doubles the document: 40 operations
/// of a 2 KB patch asked for 2^40 nodes and ran the server out of memory.
const MAX_COPIED_BYTES: usize = 3 * 1024 * 1024;

/// Applies the operations in `patch` to `target`. On any failure `target` is left unchanged.
pub fn apply_json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Array(items) = patch else {
        return Err(PatchError::InvalidJsonPatch(
            "expected an array of operations".into(),
        ));
    };
    if items.len() > MAX_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_OPERATIONS,
            got: items.len(),
        });
    }
    let ops: Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::InvalidJsonPatch(e.to_string()))?;
    // Work on a copy so a failing operation cannot leave a half-patched target.
    let mut doc = target.clone();
    let mut copied = 0usize;
    for op in ops.iter() {
        if let PatchOperation::Copy(c) = op
            && let Some(value) = doc.pointer(c.from.as_str())
        {
            copied = copied.saturating_add(json_size(value, MAX_COPIED_BYTES - copied));
            if copied > MAX_COPIED_BYTES {
                return Err(PatchError::CopiedTooMuch {
                    max: MAX_COPIED_BYTES,
                });
            }
        }
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op))
            .map_err(|e| describe(op, &e))?;
    }
    *target = doc;
    Ok(())
}

/// About the size of `value` as compact JSON (separators counted generously), counted up to just
/// past `budget`, so that measuring a huge value costs no more than the budget.
fn json_size(value: &Value, budget: usize) -> usize {
    let mut size = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        if size > budget {
            break;
        }
        size += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                stack.extend(items);
                items.len() + 2
            }
            Value::Object(map) => {
                stack.extend(map.values());
                map.keys().map(|k| k.len() + 4).sum::<usize>() + 2
            }
        };
    }
    size
}

fn describe(op: &PatchOperation, err: &json_patch::PatchError) -> PatchError {
    let path = err.path.to_string();
    let name = match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    };
    let from = match op {
        PatchOperation::Move(m) => m.from.to_string(),
        PatchOperation::Copy(c) => c.from.to_string(),
        _ => path.clone(),
    };
    match err.kind {
        PatchErrorKind::TestFailed => PatchError::TestFailed { path },
        PatchErrorKind::InvalidFromPointer => PatchError::MissingPath {
            op: name,
            path: from,
        },
        PatchErrorKind::CannotMoveInsideItself => PatchError::MoveIntoItself { from, path },
        _ => PatchError::MissingPath { op: name, path },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "metadata": {"name": "web", "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {
                "replicas": 3,
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.16.1"}]}}
            }
        })
    }

    #[test]
    fn rollout_undo_replaces_template_and_annotations() {
        let mut target = deployment();
        let patch = json!([
            {"op": "replace", "path": "/spec/template",
             "value": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]}}},
            {"op": "replace", "path": "/metadata/annotations",
             "value": {"deployment.kubernetes.io/revision": "1"}}
        ]);
        apply_json_patch(&mut target, &patch).unwrap();
        assert_eq!(
            target["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.14.2"
        );
        assert_eq!(
            target["metadata"]["annotations"],
            json!({"deployment.kubernetes.io/revision": "1"})
        );
        assert_eq!(target["spec"]["replicas"], 3);
    }

    #[test]
    fn failing_test_op_leaves_the_target_untouched() {
        let mut target = deployment();
        let patch = json!([
            {"op": "replace", "path": "/spec/replicas", "value": 5},
            {"op": "test", "path": "/metadata/name", "value": "other"}
        ]);
        let err = apply_json_patch(&mut target, &patch).unwrap_err();
        assert_eq!(
            err.to_string(),
            "testing value /metadata/name failed: test failed"
        );
        assert_eq!(err.status_code(), 422);
        assert_eq!(target, deployment());
    }

    #[test]
    fn every_operation_kind_applies() {
        let mut target = json!({"a": {"b": 1}, "list": [1, 2]});
        let patch = json!([
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "move", "from": "/a/b", "path": "/d"},
            {"op": "remove", "path": "/list/0"},
            {"op": "test", "path": "/c/b", "value": 1}
        ]);
        apply_json_patch(&mut target, &patch).unwrap();
        assert_eq!(
            target,
            json!({"a": {}, "list": [2, 3], "c": {"b": 1}, "d": 1})
        );
    }

    #[test]
    fn copies_that_double_the_document_stop_at_the_copy_budget() {
        // Regression: each op copies /a into itself; 40 of them asked for 2^40 nodes and the
        // fuzzer's 2 GiB limit (the server's memory) ran out.
        let ops: Vec<Value> = (0..40)
            .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/a/x{i}")}))
            .collect();
        let mut target = json!({"a": {"k": "v"}});
        let err = apply_json_patch(&mut target, &Value::Array(ops)).unwrap_err();
        assert_eq!(
            err,
            PatchError::CopiedTooMuch {
                max: MAX_COPIED_BYTES
            }
        );
        assert_eq!(target, json!({"a": {"k": "v"}}));
        let ops: Vec<Value> = (0..5)
            .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/a/x{i}")}))
            .collect();
        apply_json_patch(&mut target, &Value::Array(ops)).unwrap();
        assert_eq!(target.pointer("/a/x4/x3/x2/x1/x0/k"), Some(&json!("v")));
    }

    #[test]
    fn json_sizes_are_about_compact_json_up_to_the_budget() {
        let v = json!({"ab": [1, "xy", null, true]});
        let (size, exact) = (json_size(&v, usize::MAX), v.to_string().len());
        assert!(size >= exact && size <= exact + 5, "{size} for {exact}");
        assert!(json_size(&json!([[1, 2], [3, 4], [5, 6]]), 3) < 20);
    }

    #[test]
    fn malformed_or_inapplicable_patches_are_rejected() {
        let cases = [
            (
                json!({"op": "add"}),
                400,
                "invalid JSON patch: expected an array of operations",
            ),
            (
                json!([{"op": "frob", "path": "/a"}]),
                400,
                "invalid JSON patch: ",
            ),
            (
                json!([{"op": "replace", "path": "/missing/x", "value": 1}]),
                422,
                "replace operation does not apply: doc is missing path: /missing/x",
            ),
            (
                json!([{"op": "remove", "path": "/nope"}]),
                422,
                "remove operation does not apply: doc is missing path: /nope",
            ),
            (
                json!([{"op": "copy", "from": "/nope", "path": "/x"}]),
                422,
                "copy operation does not apply: doc is missing path: /nope",
            ),
        ];
        for (patch, status, want) in cases {
            let mut target = json!({"a": 1});
            let err = apply_json_patch(&mut target, &patch).unwrap_err();
            assert_eq!(err.status_code(), status, "{patch}");
            assert!(err.to_string().starts_with(want), "{err}");
        }
    }
}
