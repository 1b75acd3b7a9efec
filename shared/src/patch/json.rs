//! JSON patch (RFC 6902), as sent by `kubectl rollout undo` and `patch --type=json`: a list of
//! add/remove/replace/move/copy/test operations applied all-or-nothing.

use json_patch::{Patch, PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::PatchError;

/// Upstream's cap on operations in one JSON patch.
const MAX_OPERATIONS: usize = 10_000;

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
    json_patch::patch_unsafe(&mut doc, &ops).map_err(|e| describe(&ops, &e))?;
    *target = doc;
    Ok(())
}

fn describe(ops: &Patch, err: &json_patch::PatchError) -> PatchError {
    let path = err.path.to_string();
    let op = ops.0.get(err.operation);
    let name = match op {
        Some(PatchOperation::Add(_)) => "add",
        Some(PatchOperation::Remove(_)) => "remove",
        Some(PatchOperation::Replace(_)) => "replace",
        Some(PatchOperation::Move(_)) => "move",
        Some(PatchOperation::Copy(_)) => "copy",
        Some(PatchOperation::Test(_)) | None => "test",
    };
    let from = match op {
        Some(PatchOperation::Move(m)) => m.from.to_string(),
        Some(PatchOperation::Copy(c)) => c.from.to_string(),
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
