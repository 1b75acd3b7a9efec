//! API errors and their one mapping to HTTP: a Kubernetes `Status` body with the upstream
//! reason, code, message and details.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_registry::RegistryError;
use berth_shared::admission::FieldError;
use berth_shared::resource::ResourceType;
use serde_json::{Value, json};

/// Everything an API request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What the registry refused or failed with, answered with its own message, the status
    /// and reason upstream gives it, and its details.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("Unauthorized")]
    Unauthorized,
    /// 401 with a reason the caller may know (an expired join token).
    #[error("{0}")]
    UnauthorizedBecause(String),
    #[error("{0}")]
    Gone(String),
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("the server could not find the requested resource")]
    UnknownPath,
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )]
    UnsupportedMediaType,
    /// A strategic merge patch of a custom resource (which has no patch strategy to merge by).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    UnsupportedPatchType,
    #[error("Request entity too large: limit is {0}")]
    TooLarge(usize),
    #[error("{0}")]
    TooManyRequests(String),
    /// 429 with causes and, when not 0, `Retry-After` (the eviction subresource's refusals).
    #[error("{message}")]
    TooManyRequestsBecause {
        message: String,
        /// (reason, message) of each cause.
        causes: Vec<(String, String)>,
        retry_after: u32,
    },
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// The storage cannot be reached (etcd without quorum): 503, retry later.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// 408: the client did not send its request in time (the connection is then closed).
    #[error("{0}")]
    RequestTimeout(String),
    /// 504: the server could not learn in time whether a write was applied (upstream's
    /// `StatusReasonTimeout`).
    #[error("{0}")]
    Timeout(String),
    /// 409 from server-side apply: fields other managers own (upstream's `NewApplyConflict`:
    /// no name or kind in the details, one `FieldManagerConflict` cause per field).
    #[error(transparent)]
    ApplyConflict(berth_shared::managed_fields::Conflicts),
    /// An error upstream has no `Status` for (a plain Go error): kube-apiserver answers 500 with
    /// the bare message and no reason (`ErrorToAPIStatus`).
    #[error("{0}")]
    Unknown(String),
}

impl ApiError {
    pub fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        RegistryError::not_found(rt, name).into()
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> ApiError {
        RegistryError::already_exists(rt, name).into()
    }

    pub fn conflict(rt: &ResourceType, name: &str) -> ApiError {
        RegistryError::conflict(rt, name).into()
    }

    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<FieldError>) -> ApiError {
        RegistryError::invalid(rt, name, causes).into()
    }

    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ApiError::Internal(_)
                | ApiError::ServiceUnavailable(_)
                | ApiError::Timeout(_)
                | ApiError::TooManyRequests(_)
                | ApiError::TooManyRequestsBecause { .. }
        ) || matches!(self, ApiError::Registry(e) if e.is_transient())
    }

    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::Registry(e) => registry_status(e).0,
            ApiError::UnknownPath => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Unauthorized | ApiError::UnauthorizedBecause(_) => StatusCode::UNAUTHORIZED,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType | ApiError::UnsupportedPatchType => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::ApplyConflict(_) => StatusCode::CONFLICT,
            ApiError::TooManyRequests(_) | ApiError::TooManyRequestsBecause { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Internal(_) | ApiError::Unknown(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// The `Status` reason; empty (and left out of the body) for [`ApiError::Unknown`].
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Registry(e) => registry_status(e).1,
            ApiError::UnknownPath => "NotFound",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::Unauthorized | ApiError::UnauthorizedBecause(_) => "Unauthorized",
            ApiError::Gone(_) => "Expired",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::UnsupportedMediaType | ApiError::UnsupportedPatchType => {
                "UnsupportedMediaType"
            }
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::ApplyConflict(_) => "Conflict",
            ApiError::TooManyRequests(_) | ApiError::TooManyRequestsBecause { .. } => {
                "TooManyRequests"
            }
            ApiError::Internal(_) => "InternalError",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::Timeout(_) | ApiError::RequestTimeout(_) => "Timeout",
            ApiError::Unknown(_) => "",
        }
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        let details = match self {
            ApiError::Registry(
                RegistryError::NotFound {
                    resource,
                    group,
                    name,
                }
                | RegistryError::AlreadyExists {
                    resource,
                    group,
                    name,
                }
                | RegistryError::Conflict {
                    resource,
                    group,
                    name,
                    ..
                },
            ) => {
                let kind = resource.split('.').next().unwrap_or_default();
                Some(details(name, group, kind))
            }
            ApiError::Registry(RegistryError::Invalid {
                kind,
                group,
                name,
                causes,
            }) => {
                let mut d = details(name, group, kind);
                d["causes"] = causes
                    .iter()
                    .map(|c| {
                        json!({
                            "reason": c.reason(),
                            "message": c.body(),
                            "field": c.field,
                        })
                    })
                    .collect();
                Some(d)
            }
            ApiError::Registry(RegistryError::PolicyDenied {
                resource,
                group,
                name,
                detail,
                ..
            }) => {
                // Upstream's `admission.NewForbidden` details, plus the denial as the one cause.
                let mut d = details(name, group, resource.split('.').next().unwrap_or_default());
                d["causes"] = json!([{"message": detail}]);
                Some(d)
            }
            ApiError::ApplyConflict(conflicts) => {
                Some(json!({"causes": conflicts.0.iter().map(|c| json!({
                "reason": berth_shared::managed_fields::Conflicts::CAUSE,
                "message": c.message(),
                "field": c.field,
            })).collect::<Vec<_>>()}))
            }
            ApiError::TooManyRequestsBecause {
                causes,
                retry_after,
                ..
            } => {
                let mut d = json!({"causes": causes.iter().map(|(reason, message)| json!({
                    "reason": reason, "message": message})).collect::<Vec<_>>()});
                if *retry_after > 0 {
                    d["retryAfterSeconds"] = json!(retry_after);
                }
                Some(d)
            }
            _ => None,
        };
        failure_status(
            &self.to_string(),
            self.reason(),
            details,
            self.code().as_u16(),
        )
    }
}

/// `StatusDetails` as Go writes it: `name, group, kind` in that order, empty ones left out
/// (`omitempty`), so a core kind's details carry no `group`.
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            d.insert(key.into(), json!(value));
        }
    }
    Value::Object(d)
}

/// A failure `Status` with kube-apiserver's field order — `kind, apiVersion, metadata, status,
/// message, reason, details, code`, the order of Go's `metav1.Status` — and its `omitempty`s:
/// an empty reason and absent details are left out. Clients that compare bodies byte for byte
/// (the Python client's tests do) see what upstream sends.
pub fn failure_status(message: &str, reason: &str, details: Option<Value>, code: u16) -> Value {
    let mut s = serde_json::Map::new();
    s.insert("kind".into(), json!("Status"));
    s.insert("apiVersion".into(), json!("v1"));
    s.insert("metadata".into(), json!({}));
    s.insert("status".into(), json!("Failure"));
    s.insert("message".into(), json!(message));
    if !reason.is_empty() {
        s.insert("reason".into(), json!(reason));
    }
    if let Some(d) = details {
        s.insert("details".into(), d);
    }
    s.insert("code".into(), json!(code));
    Value::Object(s)
}

/// The bytes of a `Status` body: compact JSON ended by the newline Go's `json.Encoder` writes
/// after every value.
pub fn status_body(status: &Value) -> String {
    format!("{status}\n")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = status_body(&self.status());
        let mut resp = (
            self.code(),
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if let ApiError::TooLarge(_) | ApiError::RequestTimeout(_) = &self {
            // The unread rest of the body must not be parsed as the next request: HTTP/1
            // closes the connection after this answer (HTTP/2 drops the header: its streams
            // end on their own).
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        if let ApiError::TooManyRequestsBecause { retry_after, .. } = &self
            && *retry_after > 0
            && let Ok(v) = axum::http::HeaderValue::from_str(&retry_after.to_string())
        {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, v);
        }
        resp
    }
}

/// The status and reason upstream answers each registry error with (a bare storage error, a
/// create that carries a resourceVersion, is a 500 with no reason).
fn registry_status(e: &RegistryError) -> (StatusCode, &'static str) {
    use RegistryError as R;
    match e {
        R::NotFound { .. } | R::UnknownPath => (StatusCode::NOT_FOUND, "NotFound"),
        R::AlreadyExists { .. } => (StatusCode::CONFLICT, "AlreadyExists"),
        R::Conflict { .. } => (StatusCode::CONFLICT, "Conflict"),
        R::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        R::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        R::Forbidden(_) => (StatusCode::FORBIDDEN, "Forbidden"),
        R::PolicyDenied { reason, code, .. } => (
            StatusCode::from_u16(*code).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY),
            reason,
        ),
        R::WebhookDenied { code, reason, .. } => (
            StatusCode::from_u16(*code).unwrap_or(StatusCode::BAD_REQUEST),
            reason,
        ),
        R::Gone(_) => (StatusCode::GONE, "Expired"),
        R::ResourceVersionOnCreate => (StatusCode::INTERNAL_SERVER_ERROR, ""),
        R::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        R::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        R::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
    }
}

/// The eviction subresource's refusals as upstream answers them.
impl From<berth_registry::eviction::EvictionError> for ApiError {
    fn from(e: berth_registry::eviction::EvictionError) -> ApiError {
        use berth_registry::eviction::EvictionError as E;
        use berth_registry::eviction::decide::Refusal;
        match e {
            E::Registry(r) => r.into(),
            E::Refused(r @ (Refusal::Exhausted { .. } | Refusal::Pending(_))) => {
                let retry_after = if matches!(r, Refusal::Pending(_)) {
                    10
                } else {
                    0
                };
                ApiError::TooManyRequestsBecause {
                    message: E::TOO_MANY.to_string(),
                    causes: vec![("DisruptionBudget".to_string(), r.to_string())],
                    retry_after,
                }
            }
            E::Refused(r) => ApiError::Forbidden(r.to_string()),
            e @ E::MultipleBudgets => ApiError::Unknown(e.to_string()),
            e @ E::Conflicts(_) => ApiError::Internal(e.to_string()),
        }
    }
}

/// A store error as the registry words it.
impl From<berth_store::StoreError> for ApiError {
    fn from(e: berth_store::StoreError) -> ApiError {
        ApiError::Registry(e.into())
    }
}

/// A join token file that cannot be read is the server's problem, not the agent's.
impl From<crate::join::tokens::TokenError> for ApiError {
    fn from(e: crate::join::tokens::TokenError) -> ApiError {
        ApiError::Internal(e.to_string())
    }
}

/// A node password record that cannot be read is the server's problem, not the agent's.
impl From<crate::join::passwords::PasswordError> for ApiError {
    fn from(e: crate::join::passwords::PasswordError) -> ApiError {
        ApiError::Internal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(e: ApiError) -> String {
        let resp = e.into_response();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn status_bodies_are_byte_for_byte_what_kube_apiserver_writes() {
        let table = [
            (
                ApiError::from(RegistryError::NotFound {
                    resource: "pods".into(),
                    group: String::new(),
                    name: "web".into(),
                }),
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"web\" not found","reason":"NotFound","details":{"name":"web","kind":"pods"},"code":404}"#,
            ),
            (
                ApiError::from(RegistryError::AlreadyExists {
                    resource: "deployments.apps".into(),
                    group: "apps".into(),
                    name: "web".into(),
                }),
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"web\" already exists","reason":"AlreadyExists","details":{"name":"web","group":"apps","kind":"deployments"},"code":409}"#,
            ),
            (
                ApiError::from(RegistryError::PolicyDenied {
                    resource: "deployments.apps".into(),
                    group: "apps".into(),
                    name: "web".into(),
                    reason: "Invalid",
                    code: 422,
                    detail:
                        "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 5"
                            .into(),
                }),
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 5","reason":"Invalid","details":{"name":"web","group":"apps","kind":"deployments","causes":[{"message":"ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 5"}]},"code":422}"#,
            ),
            (
                ApiError::BadRequest("bad".into()),
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"bad","reason":"BadRequest","code":400}"#,
            ),
            (
                ApiError::Unknown("error reading the request body".into()),
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"error reading the request body","code":500}"#,
            ),
        ];
        for (e, want) in table {
            assert_eq!(body_of(e).await, format!("{want}\n"));
        }
    }

    #[test]
    fn invalid_details_list_name_group_kind_then_causes() {
        let e = ApiError::from(RegistryError::Invalid {
            kind: "Pod".into(),
            group: String::new(),
            name: "web".into(),
            causes: vec![FieldError {
                error_type: berth_shared::admission::FieldErrorType::Required,
                field: "spec.containers".into(),
                bad_value: None,
                detail: String::new(),
            }],
        });
        let status = e.status();
        let keys: Vec<&String> = status.as_object().unwrap().keys().collect();
        let want = [
            "kind",
            "apiVersion",
            "metadata",
            "status",
            "message",
            "reason",
            "details",
            "code",
        ];
        assert_eq!(keys, want);
        let details: Vec<&String> = status["details"].as_object().unwrap().keys().collect();
        assert_eq!(details, ["name", "kind", "causes"]);
    }
}
