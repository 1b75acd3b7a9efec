//! Discovery and OpenAPI endpoints: `/version`, `/api`, `/apis` (aggregated v2/v2beta1 with the
//! media type echoed, or the legacy forms), group-version resource lists, OpenAPI v3 (with
//! upstream's caching headers) and v2 in protobuf.

use super::error::ApiError;
use super::{SharedState, json_response};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_shared::discovery;

pub async fn version(State(state): State<SharedState>) -> Response {
    json_response(StatusCode::OK, &discovery::version_info(&state.git_version))
}

fn aggregated(state: &SharedState, headers: &HeaderMap, core: bool) -> Option<Response> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())?;
    let media = discovery::negotiate_aggregated(accept)?;
    let api_version = if media == discovery::AGGREGATED_V2 {
        "apidiscovery.k8s.io/v2"
    } else {
        "apidiscovery.k8s.io/v2beta1"
    };
    let mut body = discovery::aggregated_discovery(core, api_version);
    if !core {
        body = super::aggregated::with_remote_discovery(state, body);
    }
    Some(
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, media)],
            body.to_string(),
        )
            .into_response(),
    )
}

pub async fn core_root(State(state): State<SharedState>, headers: HeaderMap) -> Response {
    aggregated(&state, &headers, true)
        .unwrap_or_else(|| json_response(StatusCode::OK, &discovery::api_versions()))
}

pub async fn groups_root(State(state): State<SharedState>, headers: HeaderMap) -> Response {
    aggregated(&state, &headers, false).unwrap_or_else(|| {
        let list = super::aggregated::with_remote_groups(&state, discovery::api_group_list());
        json_response(StatusCode::OK, &list)
    })
}

pub fn group_version(group: &str, version: &str) -> Result<Response, ApiError> {
    discovery::api_resource_list(group, version)
        .map(|v| json_response(StatusCode::OK, &v))
        .ok_or(ApiError::UnknownPath)
}

/// `/apis/<group>`: the group's `APIGroup`.
pub fn group(group: &str) -> Result<Response, ApiError> {
    discovery::api_group(group)
        .map(|v| json_response(StatusCode::OK, &v))
        .ok_or(ApiError::UnknownPath)
}

/// `/openapi/v3`. The documents are built on first use, off the async workers.
pub async fn openapi_root() -> Response {
    match super::blocking(|| Ok::<_, ApiError>(berth_shared::openapi::v3_root())).await {
        Ok(root) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-cache, private"),
            ],
            root,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// `/openapi/v3/<group-version>`, cached as upstream caches it: the URL the root hands out
/// (`?hash=` the document's) never changes, so it may be kept for a year; another hash is
/// redirected to the current one; without a hash the ETag revalidates it.
pub async fn openapi_doc(
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let found = super::blocking(move || {
        berth_shared::openapi::v3_document(&path)
            .map(|doc| (path, doc))
            .ok_or(ApiError::UnknownPath)
    })
    .await;
    let (path, doc) = match found {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    let etag = format!("\"{}\"", doc.hash());
    let asked = query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("hash="));
    let cache = match asked {
        Some(hash) if hash != doc.hash() => {
            let url = format!("/openapi/v3/{}?hash={}", path.trim_matches('/'), doc.hash());
            return (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, url)]).into_response();
        }
        Some(_) => "public, immutable, max-age=31536000",
        None => "no-cache, private",
    };
    let matched = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let head = [
        (header::ETAG, etag),
        (header::CACHE_CONTROL, cache.to_string()),
    ];
    if matched {
        return (StatusCode::NOT_MODIFIED, head).into_response();
    }
    let mut resp = (StatusCode::OK, head, doc.json().to_vec()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// `/openapi/v2` in protobuf, the form kubectl asks for: kubectl ≤ 1.26 explains and
/// validates with it, and kubectl 1.27/1.28 check its PATCH operations for `fieldValidation`
/// (found, so they leave validation to the server). Its PATCH operations offer no
/// strategic-merge patch, so kubectl's patches still come from its built-in types; those that
/// use the schema anyway (≤ 1.26) find upstream's patch merge keys on it.
pub async fn openapi_v2() -> Response {
    let doc = || Ok::<_, ApiError>(berth_shared::openapi::v2_protobuf().as_ref().clone());
    match super::blocking(doc).await {
        Ok(doc) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            doc,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
