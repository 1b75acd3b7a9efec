//! Create (POST), update (PUT), delete and deletecollection handlers.

use super::error::ApiError;
use super::list::Selectors;
use super::query::Query;
use super::{SharedState, blocking, json_response};
use axum::http::StatusCode;
use axum::response::Response;
use berth_registry::identity::Identity;
use berth_registry::{
    DeleteOptions, DeleteOutcome, Part, Registry, RegistryError, WriteOptions, prefix,
};
use berth_shared::resource::ResourceType;
use bytes::Bytes;
use serde_json::{Value, json};

pub async fn create(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    obj: Value,
    opts: WriteOptions,
    duplicates: Vec<String>,
) -> Result<Response, ApiError> {
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    Written::new(rt, Part::Main, StatusCode::CREATED)
        .run(obj, opts, duplicates, move |obj, opts| {
            registry.create(rt, ns.as_deref(), obj, opts)
        })
        .await
}

#[allow(clippy::too_many_arguments)]
pub async fn update(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    obj: Value,
    opts: WriteOptions,
    part: Part,
    duplicates: Vec<String>,
) -> Result<Response, ApiError> {
    let registry = state.registry.clone();
    let (ns, name) = (ns.map(String::from), name.to_string());
    Written::new(rt, part, StatusCode::OK)
        .run(obj, opts, duplicates, move |obj, opts| {
            registry.update(rt, ns.as_deref(), &name, obj, part, opts)
        })
        .await
}

/// The answer to a whole-object write (POST or PUT): which object part it wrote, with what
/// status code.
struct Written {
    rt: &'static ResourceType,
    part: Part,
    code: StatusCode,
}

impl Written {
    fn new(rt: &'static ResourceType, part: Part, code: StatusCode) -> Written {
        Written { rt, part, code }
    }

    /// Runs the registry write off the async threads and answers with the stored object and
    /// every warning: unknown and duplicate fields of the body, then admission's.
    async fn run(
        self,
        obj: Value,
        opts: WriteOptions,
        duplicates: Vec<String>,
        write: impl FnOnce(Value, &WriteOptions) -> Result<Value, RegistryError> + Send + 'static,
    ) -> Result<Response, ApiError> {
        let mut warnings = super::unknown_field_warnings(self.rt, &obj, &opts);
        warnings.extend(duplicates);
        let admitted = opts.warnings.clone();
        let stored = blocking(move || write(obj, &opts)).await?;
        warnings.extend(admitted.take());
        Ok(super::written(
            self.code,
            self.rt.kind,
            self.part,
            &stored,
            warnings,
        ))
    }
}

fn delete_options(raw: &Bytes, q: &Query) -> Result<DeleteOptions, ApiError> {
    let mut opts = super::query::delete_options(q)?;
    if !raw.is_empty() {
        let from_body: DeleteOptions = serde_json::from_slice(raw)
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?;
        opts.grace_period_seconds = from_body.grace_period_seconds.or(opts.grace_period_seconds);
        opts.propagation_policy = from_body.propagation_policy.or(opts.propagation_policy);
        opts.orphan_dependents = from_body.orphan_dependents.or(opts.orphan_dependents);
        opts.preconditions = from_body.preconditions.or(opts.preconditions);
        opts.dry_run = from_body.dry_run.or(opts.dry_run);
    }
    Ok(opts)
}

/// The kinds whose DELETE answers the deleted object rather than a `Status` (upstream's
/// `ReturnDeletedObject: true` in their storage).
fn returns_deleted_object(rt: &ResourceType) -> bool {
    matches!(
        (rt.group, rt.plural),
        ("", "pods" | "services" | "serviceaccounts") | ("storage.k8s.io", "storageclasses")
    )
}

fn outcome_response(rt: &ResourceType, outcome: DeleteOutcome) -> Response {
    match outcome {
        DeleteOutcome::Deleted(obj) if !returns_deleted_object(rt) => {
            json_response(StatusCode::OK, &Registry::deleted_status(rt, &obj))
        }
        DeleteOutcome::Deleted(obj) => json_response(StatusCode::OK, &obj),
        DeleteOutcome::Terminating(obj) => json_response(StatusCode::OK, &obj),
    }
}

pub async fn delete(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    raw: Bytes,
    q: &Query,
    requestor: Option<Identity>,
) -> Result<Response, ApiError> {
    let opts = delete_options(&raw, q)?;
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let outcome =
        blocking(move || registry.delete_by(rt, ns.as_deref(), &name, &opts, requestor.as_ref()))
            .await?;
    Ok(outcome_response(rt, outcome))
}

pub async fn delete_collection(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    raw: Bytes,
    q: &Query,
    requestor: Option<Identity>,
) -> Result<Response, ApiError> {
    let opts = delete_options(&raw, q)?;
    let selectors = Selectors::from_query(q, rt)?;
    let registry = state.registry.clone();
    let prefix = prefix(rt, ns);
    let list = blocking(move || {
        let (rev, items, _) = registry
            .store()
            .list(&prefix, None, None, |o| selectors.matches(o));
        let mut out = Vec::new();
        for item in items {
            let v = item.value()?;
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let ns = v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(String::from);
            match registry.delete_by(rt, ns.as_deref(), &name, &opts, requestor.as_ref()) {
                Ok(DeleteOutcome::Deleted(o)) | Ok(DeleteOutcome::Terminating(o)) => out.push(o),
                Err(berth_registry::RegistryError::NotFound { .. }) => {}
                Err(e) => return Err(ApiError::from(e)),
            }
        }
        Ok((rev, out))
    })
    .await?;
    let body = json!({
        "kind": rt.list_kind(),
        "apiVersion": rt.api_version(),
        "metadata": {"resourceVersion": list.0.to_string()},
        "items": list.1,
    });
    Ok(json_response(StatusCode::OK, &body))
}
