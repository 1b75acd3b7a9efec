//! Discovery and OpenAPI endpoints: `/version`, `/api`, `/apis` (aggregated v2/v2beta1 with the
//! media type echoed, or the legacy forms), group-version resource lists, OpenAPI v3.

use super::error::ApiError;
use super::{SharedState, json_response};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_shared::discovery;

pub async fn version(State(state): State<SharedState>) -> Response {
    json_response(StatusCode::OK, &discovery::version_info(&state.git_version))
}

fn aggregated(headers: &HeaderMap, core: bool) -> Option<Response> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())?;
    let media = discovery::negotiate_aggregated(accept)?;
    let api_version = if media == discovery::AGGREGATED_V2 {
        "apidiscovery.k8s.io/v2"
    } else {
        "apidiscovery.k8s.io/v2beta1"
    };
    let body = discovery::aggregated_discovery(core, api_version);
    Some(
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, media)],
            body.to_string(),
        )
            .into_response(),
    )
}

pub async fn core_root(headers: HeaderMap) -> Response {
    aggregated(&headers, true)
        .unwrap_or_else(|| json_response(StatusCode::OK, &discovery::api_versions()))
}

pub async fn groups_root(headers: HeaderMap) -> Response {
    aggregated(&headers, false)
        .unwrap_or_else(|| json_response(StatusCode::OK, &discovery::api_group_list()))
}

pub fn group_version(group: &str, version: &str) -> Result<Response, ApiError> {
    discovery::api_resource_list(group, version)
        .map(|v| json_response(StatusCode::OK, &v))
        .ok_or(ApiError::UnknownPath)
}

pub async fn openapi_root() -> Response {
    json_response(StatusCode::OK, &berth_shared::openapi::openapi_v3_root())
}

pub async fn openapi_doc(Path(path): Path<String>) -> Response {
    match berth_shared::openapi::openapi_v3_group_version(path.trim_matches('/')) {
        Some(doc) => json_response(StatusCode::OK, &doc),
        None => ApiError::UnknownPath.into_response(),
    }
}

/// An empty OpenAPI v2 document (a protobuf message with no fields is zero bytes). kubectl
/// falls back to v2 when a kind is missing from v3; with no schema for the kind it skips
/// client-side validation, so an unknown kind or apiVersion reaches the server-side mapping and
/// gets upstream's `no matches for kind` message, and patches use kubectl's built-in types.
pub async fn openapi_v2() -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        )],
        Vec::<u8>::new(),
    )
        .into_response()
}
