//! The join endpoints agents use before they have credentials: the CA bundle (pinned by the
//! token's hash) and node certificate signing for holders of a join token's secret (the
//! cluster's, or a per-node token's for its own node only), bound to the node's own secret
//! (see `crate::join`). Every signing attempt is written to the audit log (target
//! `berth::audit::join`) with the node name, the token used, the source address and the
//! outcome; refused attempts (a wrong, deleted or expired token among them) count against the
//! source's rate limit.

use super::error::ApiError;
use super::tls::PeerAddr;
use super::{SharedState, blocking};
use crate::join::limiter::{FailureLimiter, retry_after_secs};
use crate::join::node_name::NodeName;
use crate::join::passwords::{Check, NodePasswords};
use crate::join::tokens::Credential;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_registry::RegistryError;
use serde::Deserialize;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::PoisonError;
use std::time::Instant;

/// Join requests are small: a name, a secret, a CSR and a few addresses.
const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Longest node secret accepted (agents send 64 hex digits).
const MAX_SECRET_BYTES: usize = 256;

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
struct CertificateRequest {
    node_name: String,
    #[serde(default)]
    node_secret: String,
    csr: String,
    #[serde(default)]
    addresses: Vec<String>,
}

/// A signed certificate, and whether this join registered the node's secret.
struct Issued {
    certificate: String,
    registered: bool,
}

fn limiter(state: &SharedState) -> std::sync::MutexGuard<'_, FailureLimiter> {
    // The limiter's state stays consistent across a panic (each call is one small update).
    state
        .join_failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// How long a join request's body may take to arrive.
const BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn node_certificate(State(state): State<SharedState>, req: Request) -> Response {
    let source = req
        .extensions()
        .get::<PeerAddr>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| {
            p.0.ip().to_canonical()
        });
    let (parts, body) = req.into_parts();
    // A client that never finishes its body would hold one of the join level's few slots for
    // as long as it likes: the body has a deadline.
    let body =
        match tokio::time::timeout(BODY_DEADLINE, axum::body::to_bytes(body, MAX_REQUEST_BYTES))
            .await
        {
            Ok(read) => read,
            Err(_) => {
                tracing::warn!(
                    target: "berth::audit::join",
                    %source, outcome = "body-timeout", code = 408,
                    "join: the request body did not arrive in time"
                );
                return ApiError::RequestTimeout(format!(
                    "the request body did not arrive within {}s",
                    BODY_DEADLINE.as_secs()
                ))
                .into_response();
            }
        };
    // The name as sent, for the log, before anything is validated.
    let claimed = body
        .as_ref()
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .and_then(|v| v["nodeName"].as_str().map(String::from))
        .unwrap_or_default();

    if let Err(wait) = limiter(&state).check(source, Instant::now()) {
        let secs = retry_after_secs(wait);
        tracing::warn!(
            target: "berth::audit::join",
            node = ?claimed, %source, outcome = "rate-limited", code = 429, retry_after = secs,
            "join rate limited"
        );
        let mut resp = ApiError::TooManyRequests(format!(
            "too many failed join attempts from {source}: try again in {secs}s"
        ))
        .into_response();
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return resp;
    }

    // Which token the request presented, for the log: `cluster`, a per-node token's id, or
    // `none` when no token was accepted.
    let mut token = String::from("none");
    let outcome = match body {
        Ok(body) => match authenticate(&state, &parts.headers).await {
            Ok(credential) => {
                token = credential.label().to_string();
                issue(&state, source, &credential, &body).await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(ApiError::BadRequest(format!(
            "reading the request (at most {MAX_REQUEST_BYTES} bytes): {e}"
        ))),
    };
    match outcome {
        Ok(issued) => {
            tracing::info!(
                target: "berth::audit::join",
                node = ?claimed, %token, %source, outcome = "issued", code = 200,
                registered = issued.registered,
                "join: certificate issued"
            );
            (
                StatusCode::OK,
                Json(json!({"certificate": issued.certificate, "ca": state.signer.ca_pem})),
            )
                .into_response()
        }
        Err(e) => {
            let code = e.code();
            if code.is_client_error() {
                limiter(&state).record_failure(source, Instant::now());
            }
            tracing::warn!(
                target: "berth::audit::join",
                node = ?claimed, %token, %source, outcome = "refused", code = code.as_u16(),
                reason = %e,
                "join refused"
            );
            e.into_response()
        }
    }
}

/// The credential of the request's bearer token, as the token files say now (401 otherwise).
async fn authenticate(state: &SharedState, headers: &HeaderMap) -> Result<Credential, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let tokens = state.join_tokens.clone();
    let now = jiff::Timestamp::now();
    blocking(move || tokens.authenticate(&presented, now))
        .await?
        .map_err(|refusal| ApiError::UnauthorizedBecause(refusal.to_string()))
}

/// Checks one request and signs its certificate.
async fn issue(
    state: &SharedState,
    source: IpAddr,
    credential: &Credential,
    body: &[u8],
) -> Result<Issued, ApiError> {
    let req: CertificateRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid certificate request: {e}")))?;
    let name = NodeName::parse(&req.node_name).map_err(|causes| RegistryError::Invalid {
        kind: "Node".into(),
        group: String::new(),
        name: req.node_name.clone(),
        causes,
    })?;
    if let Credential::Node(token) = credential
        && token.node != name
    {
        return Err(ApiError::Forbidden(format!(
            "join token \"{}\" is for node \"{}\" only: it may not join as \"{name}\"",
            token.id, token.node
        )));
    }
    if req.node_secret.len() > MAX_SECRET_BYTES {
        return Err(ApiError::BadRequest(format!(
            "nodeSecret is longer than {MAX_SECRET_BYTES} bytes"
        )));
    }
    let addresses = req
        .addresses
        .iter()
        .map(|a| {
            a.parse::<IpAddr>()
                .map_err(|_| ApiError::BadRequest(format!("invalid address {a:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let passwords = state.node_passwords.clone();
    let (n, secret) = (name.clone(), req.node_secret.clone());
    let check = blocking(move || passwords.check(&n, &secret)).await?;
    match check {
        // An empty secret never matches a record (none is ever registered).
        Check::Mismatch => return Err(taken(&name)),
        Check::Unregistered if req.node_secret.is_empty() => {
            return Err(ApiError::BadRequest(format!(
                "nodeSecret is required: the first agent to join as \"{name}\" registers it, \
                 and later joins under the name must present it"
            )));
        }
        Check::Unregistered | Check::Matches => {}
    }
    let refused = state.node_addresses.refused(source, &addresses);
    if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(IpAddr::to_string).collect();
        return Err(ApiError::Forbidden(format!(
            "node \"{name}\" may not have the address(es) {} in its certificate: a node may \
             claim the address it joins from ({source}), the controller host's addresses when \
             it joins from that host, and addresses in the controller's --node-address-range \
             (at most {})",
            list.join(", "),
            crate::join::addresses::MAX_ADDRESSES
        )));
    }
    let certificate = state
        .signer
        .sign(&name, &req.csr, &addresses)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let registered = check == Check::Unregistered;
    if registered {
        register(&state.node_passwords, &name, &req.node_secret).await?;
    }
    Ok(Issued {
        certificate,
        registered,
    })
}

/// Registers the secret of a name seen unregistered; another agent may have registered it in
/// the meantime, and then this one must hold the same secret.
async fn register(
    passwords: &NodePasswords,
    name: &NodeName,
    secret: &str,
) -> Result<(), ApiError> {
    let (p, n, s) = (passwords.clone(), name.clone(), secret.to_string());
    let ok = blocking(move || {
        if p.register(&n, &s)? {
            return Ok(true);
        }
        p.check(&n, &s).map(|c| c == Check::Matches)
    })
    .await?;
    if ok { Ok(()) } else { Err(taken(name)) }
}

fn taken(name: &NodeName) -> ApiError {
    ApiError::Forbidden(format!(
        "node \"{name}\" is registered to another agent: rejoining under a registered name \
         needs that node's secret (kept in its root dir), or an administrator's \
         `berth-controller node forget {name}`"
    ))
}
