//! Structural OpenAPI schemas of CustomResourceDefinitions, judged as kube-apiserver's
//! apiextensions-apiserver judges them: a CRD version's `schema.openAPIV3Schema` is read once
//! ([`Structural::from_schema`], which says why a schema is refused), then custom resources are
//! pruned of unknown fields, defaulted and validated against it with upstream's field paths and
//! messages. `x-kubernetes-validations` (CEL) are not checked here.
//!
//! ```
//! use berth_shared::schema::Structural;
//! use serde_json::json;
//! let s = Structural::from_schema(&json!({"type": "object", "properties": {"spec": {
//!     "type": "object", "properties": {
//!         "replicas": {"type": "integer", "minimum": 0, "default": 1},
//!         "color": {"type": "string", "enum": ["red", "blue"]}}}}}),
//!     "spec.versions[0].schema.openAPIV3Schema").unwrap();
//! let mut cr = json!({"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"},
//!     "spec": {"color": "green", "size": 3}});
//! assert_eq!(s.prune(&mut cr), ["spec.size"]);
//! s.apply_defaults(&mut cr);
//! assert_eq!(cr["spec"]["replicas"], 1);
//! let errs: Vec<String> = s.validate(&cr).iter().map(|e| e.message()).collect();
//! assert_eq!(errs, [r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#]);
//! ```

mod defaults;
mod embedded;
mod field_schema;
mod format;
mod list_type;
mod node;
mod openapi_rules;
mod prune;
mod ratchet;
mod report;
mod structural;
mod values;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::admission::FieldError;
pub use list_type::ListType;
use node::Node;
use structural::SchemaPath;

/// Upstream's warnings on writing a CRD whose `type: string` schemas name formats validation
/// ignores: `unrecognized format "quantity"`, one per such schema, in document order.
pub fn unrecognized_format_warnings(schema: &Value) -> Vec<String> {
    let mut formats = Vec::new();
    format::unrecognized(schema, &mut formats);
    formats
        .iter()
        .map(|f| format!("unrecognized format {}", report::quote(f)))
        .collect()
}

/// Upstream's reason not to run `x-kubernetes-validations` after the other errors
/// (`hasBlockingErr`): some error is an unsupported value, a wrong type (formats included), a
/// missing required value, or a too long or too large value, so a rule could see a value its
/// schema does not promise or blow its cost estimate. Returns the error upstream reports
/// instead of the rules' results; other errors (bounds, patterns) let the rules run.
pub fn rules_blocked_by(errs: &[FieldError]) -> Option<FieldError> {
    use crate::admission::FieldErrorType as T;
    let blocking = errs.iter().any(|e| match e.error_type {
        T::NotSupported | T::Required | T::TooLong | T::TooMany => true,
        // kube-openapi's type (and format) errors are `TypeInvalid` upstream.
        T::Invalid => e.detail.contains(" in body must be of type "),
        _ => false,
    });
    blocking.then(|| {
        report::invalid(
            "<nil>",
            Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )
    })
}

/// A structural schema, ready to prune, default and validate custom resources.
#[derive(Debug)]
pub struct Structural {
    root: Node,
}

impl Structural {
    /// Parses a `JSONSchemaProps`, and reports why the CRD may not have it, with upstream's
    /// paths and messages under `path` (the caller passes
    /// `spec.versions[0].schema.openAPIV3Schema`): `nullable` at the root, then the reasons it
    /// is not structural (sorted, as upstream sorts them) or else the defaults that do not
    /// validate or do not survive pruning, then the CRD's other schema rules.
    pub fn from_schema(schema: &Value, path: &str) -> Result<Structural, Vec<FieldError>> {
        let root = Node::parse(schema);
        let path = SchemaPath::new(path);
        let mut errs = Vec::new();
        if root.nullable {
            errs.push(report::forbidden(
                path.child("nullable").as_str(),
                "nullable cannot be true at the root",
            ));
        }
        let not_structural = structural::validate(&root, &path);
        if not_structural.is_empty() {
            errs.extend(defaults::validate_defaults(&root, &path));
        } else {
            errs.extend(not_structural);
        }
        errs.extend(openapi_rules::validate(&root, &path));
        if errs.is_empty() {
            Ok(Structural { root })
        } else {
            Err(errs)
        }
    }

    /// Removes the fields the schema does not specify (honouring
    /// `x-kubernetes-preserve-unknown-fields` and `x-kubernetes-embedded-resource`; at the root
    /// `apiVersion`, `kind` and `metadata` are kept, and every metadata is cut down to
    /// ObjectMeta's fields), and nulls the schema does not allow and cannot default. Returns
    /// the removed fields' paths (`spec.foo`, `metadata.bar`), for `fieldValidation`.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune(&self.root, obj)
    }

    /// Applies the schema's `default`s (after pruning): absent properties, and non-nullable
    /// nulls, take their default; the properties of absent objects are not created.
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaults::apply(obj, &self.root);
    }

    /// Validates a whole custom resource: the schema's value validations, embedded resources'
    /// `apiVersion`/`kind`/`metadata`, and `x-kubernetes-list-type` set/map uniqueness. The
    /// root object's own metadata is validated elsewhere.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = values::validate(&self.root, obj, None);
        errs.extend(embedded::validate(&self.root, obj, ""));
        errs.extend(list_type::validate(&self.root, obj));
        errs
    }

    /// Validates an update from `old` as upstream does with validation ratcheting (on by
    /// default since 1.30): the schema's errors on values unchanged from the old object are
    /// dropped, list-type uniqueness is only checked when the old object kept it, embedded
    /// resources are checked as on a create.
    pub fn validate_update(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = values::validate_update(&self.root, obj, old, None);
        errs.extend(embedded::validate(&self.root, obj, ""));
        if list_type::validate(&self.root, old).is_empty() {
            errs.extend(list_type::validate(&self.root, obj));
        }
        errs
    }

    /// Validates only `status` (a status subresource write), as upstream's status validator:
    /// paths start at `status`; with `old` (the old object's status), ratcheting as
    /// [`Structural::validate_update`].
    pub fn validate_status(&self, status: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let Some(s) = self.root.properties.get("status") else {
            return Vec::new();
        };
        match old {
            Some(old) => values::validate_update(s, status, old, Some("status")),
            None => values::validate(s, status, Some("status")),
        }
    }

    /// The `metadata` of each embedded resource in `obj`, with its field path
    /// (`spec.template.metadata`), for ObjectMeta's own rules (labels, annotations …).
    pub fn embedded_metadata<'a>(&self, obj: &'a Value) -> Vec<(String, &'a Value)> {
        embedded::metadata_of(&self.root, obj)
    }

    /// The list type at a path of field names (`["spec", "ports"]`), for server-side apply's
    /// merge rules; lists without `x-kubernetes-list-type` are atomic. `None` when the schema
    /// has no list there.
    /// (`Structural` is also server-side apply's
    /// [`FieldSchema`](crate::managed_fields::FieldSchema) of its custom resources.)
    pub fn list_type_at(&self, path: &[&str]) -> Option<ListType> {
        list_type::at(&self.root, path)
    }
}
