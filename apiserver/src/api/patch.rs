//! PATCH: JSON patch, JSON merge patch, strategic merge patch and server-side apply. An apply
//! (`application/apply-patch+yaml`, `fieldManager` required) goes through field ownership
//! ([`berth_shared::managed_fields::apply`]): fields other managers own and the apply would
//! change are a 409 with upstream's conflict causes unless `force=true` takes them; fields the
//! applier stops applying are removed unless someone else owns them. `dryRun` answers what
//! would be stored (`kubectl diff --server-side`).

use super::error::ApiError;
use super::{SharedState, blocking, merge_shapes};
use axum::http::StatusCode;
use axum::response::Response;
use berth_registry::{Part, RegistryError, WriteOptions};
use berth_shared::admission::{FieldError, FieldErrorType};
use berth_shared::managed_fields::{self, Writer};
use berth_shared::patch::{self, PatchType};
use berth_shared::resource::ResourceType;
use bytes::Bytes;
use serde_json::Value;

use super::query::Query;

/// Applies a patch document to an object.
pub fn apply(kind: &str, pt: PatchType, current: Value, doc: &Value) -> Result<Value, ApiError> {
    let name = current
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    patch::apply_patch(kind, pt, current, doc).map_err(|e| match e {
        patch::PatchError::NotAnObject(_) => ApiError::BadRequest(e.to_string()),
        e => RegistryError::Invalid {
            kind: kind.to_string(),
            group: String::new(),
            name,
            causes: vec![berth_shared::admission::FieldError {
                error_type: berth_shared::admission::FieldErrorType::Invalid,
                field: "patch".to_string(),
                bad_value: None,
                detail: e.to_string(),
            }],
        }
        .into(),
    })
}

/// PatchOptions as upstream validates them: an apply names its field manager; only an apply
/// may force.
fn check_patch_options(pt: PatchType, query: &Query) -> Result<(), ApiError> {
    let field_manager = query.get("fieldManager").unwrap_or_default();
    let mut causes = Vec::new();
    if pt == PatchType::Apply && field_manager.is_empty() {
        causes.push(FieldError {
            error_type: FieldErrorType::Required,
            field: "fieldManager".to_string(),
            bad_value: None,
            detail: "is required for apply patch".to_string(),
        });
    }
    if pt != PatchType::Apply && query.get("force").is_some() {
        causes.push(FieldError {
            error_type: FieldErrorType::Forbidden,
            field: "force".to_string(),
            bad_value: None,
            detail: "may not be specified for non-apply patch".to_string(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(RegistryError::Invalid {
        kind: "PatchOptions".to_string(),
        group: "meta.k8s.io".to_string(),
        name: String::new(),
        causes,
    }
    .into())
}

/// The apply of `config` as `manager` over `live` (none for a create), both in `view`'s
/// version: the object to store, with its managedFields, or the conflicts.
fn apply_configuration(
    view: &'static ResourceType,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    part: Part,
    force: bool,
) -> Result<Value, ApiError> {
    // Upstream's check: the configuration is in the version it is sent to.
    let api_version = view.api_version();
    let sent = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if sent != api_version {
        return Err(ApiError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {sent}, expected: {api_version}"
        )));
    }
    // Managed fields are the server's to record: a configuration carries none.
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::BadRequest(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    let time = berth_registry::meta::now_rfc3339();
    let writer = Writer {
        manager,
        operation: "Apply",
        subresource: part.subresource(),
        api_version: &api_version,
        time: &time,
        status_subresource: view.has_status,
    };
    // A built-in kind's list types and atomic objects, or a custom resource's schema's.
    let schema = managed_fields::schema_for(view);
    managed_fields::apply(schema.as_ref(), live, config, &writer, force)
        .map_err(ApiError::ApplyConflict)
}

#[allow(clippy::too_many_arguments)]
pub async fn patch(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    content_type: &str,
    raw: Bytes,
    mut opts: WriteOptions,
    part: Part,
    query: &Query,
) -> Result<Response, ApiError> {
    let pt = PatchType::from_content_type(content_type).ok_or(ApiError::UnsupportedMediaType)?;
    if rt.custom && pt == PatchType::Strategic {
        return Err(ApiError::UnsupportedPatchType);
    }
    check_patch_options(pt, query)?;
    opts.apply = pt == PatchType::Apply;
    let force = query.flag("force");
    let manager = query.get("fieldManager").unwrap_or_default().to_string();
    let doc = super::body::decode(
        if pt == PatchType::Apply {
            "application/apply-patch+yaml"
        } else {
            "application/json"
        },
        &raw,
    )?;
    // A patch to a converted version applies to the object in that version.
    let view = rt;
    let rt = berth_shared::resource::storage_of(view);
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let admitted = opts.warnings.clone();
    let clean_shapes = state.clean_shapes.clone();
    let (code, obj, mut unknown) = blocking(move || {
        // Only an apply to an object that does not exist creates it.
        if pt == PatchType::Apply
            && part == Part::Main
            && registry.get(rt, ns.as_deref(), &name).is_err()
        {
            // The applied configuration is the whole object: it names itself, as the URL does.
            // (A configuration or metadata that is not an object is refused before the checks
            // below index into it.)
            if !doc.is_object() || doc.get("metadata").is_some_and(|m| !m.is_object()) {
                return Err(ApiError::BadRequest(
                    "a server-side apply configuration and its metadata must be JSON objects"
                        .to_string(),
                ));
            }
            let mut obj = apply_configuration(view, None, &doc, &manager, part, force)?;
            berth_registry::meta::check_type(view, &mut obj)?;
            let mut obj = super::conversion::body_to_storage_blocking(&registry, view, obj)?;
            berth_registry::meta::set_namespace(rt, ns.as_deref(), &mut obj)?;
            berth_registry::meta::check_name(&obj, &name)?;
            let unknown = super::unknown_field_warnings(rt, &obj, &opts);
            let created = registry.create(rt, ns.as_deref(), obj, &opts)?;
            return Ok::<_, ApiError>((StatusCode::CREATED, created, unknown));
        }
        let strict = opts.field_validation == berth_registry::FieldValidation::Strict;
        let mut unknown = Vec::new();
        let merge_shape = (pt == PatchType::Merge && merge_shapes::REMEMBERED.contains(&rt.kind))
            .then(|| merge_shapes::shape(rt.kind, &doc));
        let updated = registry.update_with(rt, ns.as_deref(), &name, part, &opts, |current| {
            let current = super::conversion::object_in_version_blocking(&registry, view, current)?;
            let patched = if pt == PatchType::Apply {
                apply_configuration(view, Some(&current), &doc, &manager, part, force)?
            } else {
                apply(rt.kind, pt, current, &doc)?
            };
            let patched = super::conversion::body_to_storage_blocking(&registry, view, patched)?;
            // One typed decode answers both whether a strategic patch left a well-typed
            // object and which fields the schema does not know.
            let warn = opts.field_validation == berth_registry::FieldValidation::Warn;
            let checked = pt == PatchType::Strategic || strict || (warn && !rt.custom);
            let (decode_error, unknown_fields) = match &merge_shape {
                _ if !checked => (None, Vec::new()),
                Some(shape) if clean_shapes.known(shape) => (None, Vec::new()),
                _ => {
                    let found =
                        berth_shared::admission::decode_error_and_unknown_fields(rt.kind, &patched);
                    if let (Some(shape), (None, [])) =
                        (&merge_shape, (&found.0, found.1.as_slice()))
                    {
                        clean_shapes.remember(shape.clone());
                    }
                    found
                }
            };
            if pt == PatchType::Strategic
                && let Some(e) = decode_error
            {
                return Err(RegistryError::Invalid {
                    kind: String::new(),
                    group: String::new(),
                    name: String::new(),
                    causes: vec![patch::restore::type_error_cause(&doc, &e)],
                }
                .into());
            }
            if strict && !unknown_fields.is_empty() {
                return Err(ApiError::BadRequest(format!(
                    "strict decoding error: {}",
                    unknown_fields.join(", ")
                )));
            }
            // A custom resource's unknown fields are its schema's to judge (the registry
            // prunes them).
            unknown = if warn && !rt.custom {
                unknown_fields
            } else {
                Vec::new()
            };
            Ok(patched)
        })?;
        Ok((StatusCode::OK, updated, unknown))
    })
    .await?;
    unknown.extend(admitted.take());
    Ok(super::written(code, rt.kind, part, &obj, unknown))
}
