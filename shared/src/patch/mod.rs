//! Applying PATCH bodies to stored objects: JSON merge patch (RFC 7386), JSON patch (RFC 6902)
//! and Kubernetes strategic merge patch, with errors worded like the upstream API server's.

mod json;
mod list;
mod merge;
mod positions;
pub mod restore;
pub(crate) mod schema;
mod strategic;

pub use json::apply_json_patch;
pub use merge::apply_merge_patch;
pub use schema::{ListStrategy, list_strategy};
pub use strategic::apply_strategic_merge_patch;

use serde_json::{Map, Value};

/// The kind of a PATCH body, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    /// Server-side apply: objects and their status go through field ownership
    /// (`managed_fields::apply`); [`apply_patch`] merges it strategically where no ownership
    /// is kept (the scale subresource).
    Apply,
}

impl PatchType {
    /// The patch type of a request's media type; `None` for anything PATCH does not take.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies a decoded patch body of type `pt` to `current`, an object of kind `kind`, and
/// returns the patched object.
pub fn apply_patch(
    kind: &str,
    pt: PatchType,
    current: Value,
    doc: &Value,
) -> Result<Value, PatchError> {
    match pt {
        PatchType::Json => {
            let mut v = current;
            apply_json_patch(&mut v, doc)?;
            Ok(v)
        }
        PatchType::Merge => {
            if !doc.is_object() {
                return Err(PatchError::NotAnObject("merge patch"));
            }
            let mut v = current;
            apply_merge_patch(&mut v, doc);
            Ok(v)
        }
        PatchType::Strategic | PatchType::Apply => {
            if !doc.is_object() {
                return Err(PatchError::NotAnObject("strategic merge patch"));
            }
            apply_strategic_merge_patch(&current, doc, kind)
        }
    }
}

/// The object a server-side apply creates when nothing is stored under `name` yet: the applied
/// configuration, given the URL's name when its metadata names nothing. Metadata of the wrong
/// type is left for the registry's checks to refuse.
pub fn applied_object(doc: &Value, name: &str) -> Result<Value, PatchError> {
    let Value::Object(map) = doc else {
        return Err(PatchError::NotAnObject("server-side apply configuration"));
    };
    let mut map = map.clone();
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if metadata.is_null() {
        *metadata = Value::Object(Map::new());
    }
    if let Value::Object(meta) = metadata
        && !meta.contains_key("name")
    {
        meta.insert("name".to_string(), Value::String(name.to_string()));
    }
    Ok(Value::Object(map))
}

/// Why a patch could not be applied. Every variant is the client's fault; [`status_code`]
/// says whether upstream answers 400 (malformed patch), 413 or 422 (patch does not apply).
///
/// [`status_code`]: PatchError::status_code
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// A merge-type patch body that is not a JSON object (HTTP 400).
    #[error("a {0} must be a JSON object")]
    NotAnObject(&'static str),
    /// The patch (or the target) is not a JSON object where one is needed.
    #[error("invalid JSON document")]
    InvalidDocument,
    #[error("lists of lists are not supported")]
    ListOfLists,
    /// A `$deleteFromPrimitiveList` key without `/<field>`.
    #[error("invalid patch format of primitive list")]
    BadPrimitiveListFormat,
    /// `$retainKeys` is not a list, or the patch sets a key the list does not retain.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeysFormat,
    /// A `$setElementOrder` key without `/<field>`.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrderFormat,
    /// An item of a keyed list lacks the list's merge key.
    #[error("map: {item} does not contain declared merge key: {key}")]
    NoMergeKey { item: String, key: String },
    /// A value of the wrong JSON type; types are named like Go's decoded JSON.
    #[error("expected a {expected}, but received a {found}")]
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    /// `$patch` with a value other than `replace` / `delete` (or `merge` in a list).
    #[error("unknown patch type: {directive} in map: {item}")]
    UnknownDirective { directive: String, item: String },
    #[error("merging lists cannot yet be specified in the patch")]
    ListMergeDirective,
    /// A list directive on a list of objects that has no merge key.
    #[error("cannot merge lists without merge key for {0}")]
    NoMergeKeyForList(String),
    #[error("list element types are not identical: {0}")]
    MixedListElements(String),
    /// The patch's list items are not in the order its `$setElementOrder` list gives.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    OrderMismatch { patch: String, order: String },
    /// A JSON patch body that is not an array of operations.
    #[error("invalid JSON patch: {0}")]
    InvalidJsonPatch(String),
    /// More JSON patch operations than upstream allows.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations { max: usize, got: usize },
    /// A JSON patch whose `copy` operations copy more than the limit in all.
    #[error(
        "The accumulated size of the values a JSON patch copies exceeds the limit of {max} bytes"
    )]
    CopiedTooMuch { max: usize },
    /// A JSON patch `test` operation found a different value.
    #[error("testing value {path} failed: test failed")]
    TestFailed { path: String },
    /// A JSON patch operation names a location the document does not have.
    #[error("{op} operation does not apply: doc is missing path: {path}: missing value")]
    MissingPath { op: &'static str, path: String },
    /// A JSON patch `move` into a child of its source.
    #[error("move operation does not apply: cannot move {from} into its own child {path}")]
    MoveIntoItself { from: String, path: String },
}

impl PatchError {
    /// Patches fail because of their content; retrying the same patch cannot help.
    pub fn is_transient(&self) -> bool {
        false
    }

    /// The HTTP status upstream uses: 400 for a malformed patch, 413 for an oversized JSON
    /// patch, 422 for a well-formed patch that does not apply.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::InvalidDocument
            | PatchError::NotAnObject(_)
            | PatchError::BadPrimitiveListFormat
            | PatchError::BadRetainKeysFormat
            | PatchError::BadSetElementOrderFormat
            | PatchError::InvalidJsonPatch(_) => 400,
            PatchError::TooManyOperations { .. } | PatchError::CopiedTooMuch { .. } => 413,
            _ => 422,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn malformed_patches_are_bad_requests_and_the_rest_unprocessable() {
        assert_eq!(PatchError::InvalidDocument.status_code(), 400);
        assert_eq!(PatchError::BadRetainKeysFormat.status_code(), 400);
        assert_eq!(PatchError::InvalidJsonPatch("x".into()).status_code(), 400);
        assert_eq!(
            PatchError::TooManyOperations { max: 1, got: 2 }.status_code(),
            413
        );
        assert_eq!(PatchError::ListOfLists.status_code(), 422);
        assert_eq!(
            PatchError::TestFailed { path: "/a".into() }.status_code(),
            422
        );
    }

    #[test]
    fn patch_types_come_from_media_types() {
        let cases = [
            ("application/json-patch+json", Some(PatchType::Json)),
            ("application/merge-patch+json", Some(PatchType::Merge)),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::Strategic),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("application/json", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
        }
    }

    #[test]
    fn merge_type_patches_must_be_objects() {
        for pt in [PatchType::Merge, PatchType::Strategic, PatchType::Apply] {
            let err = apply_patch("Pod", pt, json!({}), &json!([1])).unwrap_err();
            assert_eq!(err.status_code(), 400, "{pt:?}");
        }
        assert_eq!(
            apply_patch("Pod", PatchType::Merge, json!({"a": 1}), &json!({"b": 2})),
            Ok(json!({"a": 1, "b": 2}))
        );
    }

    #[test]
    fn applied_objects_take_the_url_name_and_never_panic_on_odd_metadata() {
        // Regression: `{"metadata": "x"}` or `[1]` used to panic the request (IndexMut on a
        // non-object) on a server-side apply that creates.
        assert_eq!(
            applied_object(&json!({"kind": "ConfigMap"}), "c"),
            Ok(json!({"kind": "ConfigMap", "metadata": {"name": "c"}}))
        );
        assert_eq!(
            applied_object(&json!({"metadata": null}), "c"),
            Ok(json!({"metadata": {"name": "c"}}))
        );
        assert_eq!(
            applied_object(&json!({"metadata": {"name": "own"}}), "c"),
            Ok(json!({"metadata": {"name": "own"}}))
        );
        assert_eq!(
            applied_object(&json!({"metadata": "x"}), "c"),
            Ok(json!({"metadata": "x"}))
        );
        assert_eq!(
            applied_object(&json!({"metadata": [1]}), "c"),
            Ok(json!({"metadata": [1]}))
        );
        assert_eq!(
            applied_object(&json!([1]), "c").unwrap_err().status_code(),
            400
        );
    }
}
