//! The join endpoints agents use before they have credentials: the CA bundle (pinned by the
//! token's hash) and node certificate signing for holders of the join secret.

use super::SharedState;
use super::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

pub async fn cacerts(State(state): State<SharedState>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-pem-file")],
        state.signer.ca_pem.clone(),
    )
        .into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequest {
    node_name: String,
    csr: String,
    #[serde(default)]
    addresses: Vec<String>,
}

pub async fn node_certificate(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Json(req): Json<CertificateRequest>,
) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !state.signer.secret_matches(presented.trim()) {
        return ApiError::Unauthorized.into_response();
    }
    match state.signer.sign(&req.node_name, &req.csr, &req.addresses) {
        Ok(cert) => (
            StatusCode::OK,
            Json(json!({"certificate": cert, "ca": state.signer.ca_pem})),
        )
            .into_response(),
        Err(e) => ApiError::BadRequest(e.to_string()).into_response(),
    }
}
