//! `GET /v1-berth/snapshot`, for `berth-controller snapshot save` while the controller runs
//! (redb lets only this process open the store file): every object at one revision, in the
//! snapshot file format (`berth_store::snapshot`). Only `system:masters` may take one: it
//! holds every Secret.

use super::authn::Identity;
use super::error::ApiError;
use super::{SharedState, blocking};
use crate::rbac::MASTERS;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The path of the endpoint.
pub const PATH: &str = "/v1-berth/snapshot";

pub async fn save(State(state): State<SharedState>, req: Request) -> Result<Response, ApiError> {
    let Some(id) = req.extensions().get::<Identity>() else {
        return Err(ApiError::Unauthorized);
    };
    if !id.groups.iter().any(|g| g == MASTERS) {
        return Err(ApiError::Forbidden(format!(
            "User \"{}\" cannot take a store snapshot: only {MASTERS} may",
            id.user
        )));
    }
    let store = state.registry.store().clone();
    let (revision, count, bytes) = blocking(move || {
        let (revision, objects) = store.snapshot();
        let count = objects.len();
        berth_store::snapshot::encode(revision, objects)
            .map(|b| (revision, count, b))
            .map_err(|e| ApiError::Internal(e.to_string()))
    })
    .await?;
    tracing::info!(user = %id.user, revision, objects = count, "store snapshot taken");
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bytes,
    )
        .into_response())
}
