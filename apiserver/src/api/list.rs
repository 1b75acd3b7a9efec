//! GET of one object and of collections (label and field selectors, `limit`/`continue`), as
//! JSON or as a `meta.k8s.io` Table.

use super::error::ApiError;
use super::query::Query;
use super::watch_start::{self, Freshness, ListStart};
use super::{SharedState, list_body, table};
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_registry::prefix;
use berth_shared::custom::{self, selectable};
use berth_shared::resource::ResourceType;
use berth_shared::selector::{FieldSelector, LabelSelector};
use berth_shared::table::IncludeObject;
use berth_store::{ObjectIndex, Revision, Store, StoredObject};
use serde_json::Value;

/// Label and field selectors of a list or watch.
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// The terms' fields read from the object itself, by label and JSONPath: a custom
    /// resource's selectable fields (the store's index has the built-in kinds' fields only).
    from_object: Vec<(String, String)>,
}

impl Selectors {
    /// The request's selectors, refused with upstream's `field label not supported` when a
    /// field term names a field `rt` cannot be selected by: for a custom resource,
    /// `metadata.name`, `metadata.namespace` (namespaced ones) and the served version's
    /// `selectableFields`.
    pub fn from_query(q: &Query, rt: &ResourceType) -> Result<Selectors, ApiError> {
        let fields = q.field_selector()?;
        let mut from_object = Vec::new();
        match custom::served(rt) {
            Some(served) => {
                fields
                    .validate_fields(&selectable::field_labels(&served))
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
                for path in &served.version.selectable_fields {
                    let label = selectable::label(path);
                    if fields.requirements().iter().any(|r| r.field == label) {
                        from_object.push((label.to_string(), path.clone()));
                    }
                }
            }
            None => {
                let known: Vec<&str> = ObjectIndex::known_fields().collect();
                fields
                    .validate_fields(&known)
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            }
        }
        Ok(Selectors {
            labels: q.label_selector()?,
            fields,
            from_object,
        })
    }

    /// Whether a stored object is selected.
    pub fn matches(&self, obj: &StoredObject) -> bool {
        self.matches_parts(&obj.index, Some(&obj.data))
    }

    /// Whether an object, by its index and JSON, is selected; without its JSON, fields read
    /// from the object count as empty.
    pub fn matches_parts(&self, index: &ObjectIndex, data: Option<&[u8]>) -> bool {
        if !self.labels.matches(&index.labels) {
            return false;
        }
        if self.from_object.is_empty() {
            return self.fields.matches(|f| index.field(f).map(str::to_string));
        }
        let obj: Option<Value> = data.and_then(|d| serde_json::from_slice(d).ok());
        self.fields.matches(
            |f| match self.from_object.iter().find(|(label, _)| label == f) {
                Some((_, path)) => obj.as_ref().and_then(|o| selectable::value(o, path)),
                None => index.field(f).map(str::to_string),
            },
        )
    }
}

pub async fn get(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    as_table: Option<IncludeObject>,
) -> Result<Response, ApiError> {
    let obj = state.registry.get(rt, ns, name)?;
    if let Some(include) = as_table {
        let rv = obj.revision.to_string();
        let t = table::render(rt, std::slice::from_ref(&obj), &rv, None, include)?;
        return Ok(raw_json(t));
    }
    Ok(raw_json(obj.data.to_vec()))
}

/// A JSON document already serialized, ended with the newline Go's encoder writes.
fn raw_json(mut body: Vec<u8>) -> Response {
    body.push(b'\n');
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Brings the store to the state a read asks for and returns its revision: unset, the most
/// recent state (a consistent read); "0", whatever the cache holds; N, a state at least as new
/// as N, else upstream's 504 `Too large resource version`.
pub async fn reach(store: &Store, fresh: Freshness) -> Result<Revision, ApiError> {
    if fresh != Freshness::Any {
        store.sync().await?;
    }
    let current = store.current_revision();
    match fresh {
        Freshness::NotOlderThan(n) if current < n => Err(ApiError::Timeout(format!(
            "Too large resource version: {n}, current: {current}"
        ))),
        _ => Ok(current),
    }
}

pub async fn list(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    q: &Query,
    as_table: Option<IncludeObject>,
) -> Result<Response, ApiError> {
    let selectors = Selectors::from_query(q, rt)?;
    // Exactly N is only served when N is the current state (older states are not kept).
    let store = state.registry.store();
    match watch_start::list_start(q)? {
        ListStart::Fresh(fresh) => {
            reach(store, fresh).await?;
        }
        ListStart::Exact(n) => {
            let current = reach(store, Freshness::NotOlderThan(n)).await?;
            if current > n {
                return Err(ApiError::Gone(format!(
                    "too old resource version: {n} ({current})"
                )));
            }
        }
    }
    let prefix = prefix(rt, ns);
    let start = q.continue_key(&prefix)?;
    let (revision, items, more) =
        state
            .registry
            .store()
            .list(&prefix, start.as_deref(), q.limit(), |o: &StoredObject| {
                selectors.matches(o)
            });
    let rv = revision.to_string();
    let cont = more.map(|k| berth_shared::query::encode_continue(&k));
    if let Some(include) = as_table {
        if custom::served(rt).is_some() {
            let t = table::render(rt, &items, &rv, cont.as_deref(), include)?;
            return Ok(raw_json(t));
        }
        let body = list_body::table(rt.kind, include, rv, cont, items).await?;
        return Ok(json_response(body));
    }
    // Items are stored as JSON already: splice them into the list without re-encoding.
    let mut meta = serde_json::json!({"resourceVersion": rv});
    if let Some(c) = &cont {
        meta["continue"] = serde_json::json!(c);
    }
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        rt.list_kind(),
        rt.api_version(),
        meta
    );
    Ok(json_response(list_body::json_list(head, items)))
}

fn json_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
