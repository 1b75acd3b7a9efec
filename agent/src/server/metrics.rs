//! `/metrics` and `/metrics/resource`: the backend's text, with the Prometheus content type.

use super::SharedBackend;
use crate::metrics::exposition::CONTENT_TYPE;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

fn answer(r: Result<String, String>) -> Response {
    match r {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e).into_response(),
    }
}

pub async fn own(State(backend): State<SharedBackend>) -> Response {
    answer(backend.metrics().await)
}

pub async fn resource(State(backend): State<SharedBackend>) -> Response {
    answer(backend.resource_metrics().await)
}
