//! Errors the HTTP layer answers by itself (the router's 405 for a known path, extractor
//! rejections, a proxied error in plain text, a handler that panicked) get a Kubernetes `Status`
//! body like every other API error, so clients print a reason instead of an empty body. Answers
//! that already carry JSON are left as they are.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// A plain-text error body longer than this is replaced by the generic message.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// Upstream's `StatusReason` for a code, and its message when there is no better one.
fn reason_and_message(code: StatusCode) -> (&'static str, String) {
    let reason = match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    };
    let message = match code.as_u16() {
        404 => "the server could not find the requested resource".to_string(),
        405 => "the server does not allow this method on the requested resource".to_string(),
        _ => code
            .canonical_reason()
            .map_or_else(|| format!("HTTP {}", code.as_u16()), str::to_string),
    };
    (reason, message)
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"))
}

/// A handler that panics answers 500 (with upstream's message) instead of dropping the
/// connection: kube-apiserver recovers from panics the same way.
pub async fn recover(req: Request, next: Next) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
        Ok(resp) => resp,
        Err(_) => {
            tracing::error!("a request handler panicked");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "This request caused apiserver to panic. Look in the logs for details.",
            )
                .into_response()
        }
    }
}

/// The middleware: outermost, so it sees every answer of the router.
pub async fn ensure(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let code = resp.status();
    if !(code.is_client_error() || code.is_server_error()) || is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let (reason, generic) = reason_and_message(code);
    let text = axum::body::to_bytes(body, MAX_MESSAGE_BYTES)
        .await
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .filter(|t| !t.is_empty());
    // Upstream leaves an unknown reason out.
    let message = text.unwrap_or(generic);
    let status = super::error::failure_status(&message, reason, None, code.as_u16());
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        axum::body::Body::from(super::error::status_body(&status)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::Method;
    use axum::response::IntoResponse;
    use axum::routing::get;
    use tower::ServiceExt;

    fn app() -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/text",
                get(|| async { (StatusCode::BAD_GATEWAY, "agent unreachable") }),
            )
            .route(
                "/panic",
                get(|| async {
                    if true {
                        panic!("a bug");
                    }
                    "unreachable"
                }),
            )
            .route(
                "/json",
                get(|| async {
                    (
                        StatusCode::CONFLICT,
                        [(header::CONTENT_TYPE, "application/json")],
                        "{\"kind\":\"Status\"}",
                    )
                        .into_response()
                }),
            )
            .layer(axum::middleware::from_fn(recover))
            .layer(axum::middleware::from_fn(ensure))
    }

    async fn call(method: Method, uri: &str) -> (u16, String) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .expect("request");
        let resp = app().oneshot(req).await.expect("answer");
        let code = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    /// The answer's code and its body, which must be JSON.
    async fn status_of(method: Method, uri: &str) -> (u16, serde_json::Value) {
        let (code, body) = call(method, uri).await;
        (code, serde_json::from_str(&body).expect("JSON"))
    }

    #[tokio::test]
    async fn a_405_from_the_router_gets_a_method_not_allowed_status() {
        let (code, status) = status_of(Method::POST, "/healthz").await;
        assert_eq!(code, 405);
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "MethodNotAllowed");
        assert_eq!(status["code"], 405);
        assert_eq!(
            status["message"],
            "the server does not allow this method on the requested resource"
        );
    }

    #[tokio::test]
    async fn a_plain_text_error_keeps_its_text_as_the_message() {
        let (code, status) = status_of(Method::GET, "/text").await;
        assert_eq!(code, 502);
        assert_eq!(status["message"], "agent unreachable");
        assert_eq!(status["code"], 502);
        assert!(status.get("reason").is_none(), "{status}");
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_a_500_status() {
        let (code, status) = status_of(Method::GET, "/panic").await;
        assert_eq!(code, 500);
        assert_eq!(status["reason"], "InternalError");
        assert_eq!(
            status["message"],
            "This request caused apiserver to panic. Look in the logs for details."
        );
    }

    #[tokio::test]
    async fn json_errors_and_successes_are_left_alone() {
        assert_eq!(
            call(Method::GET, "/json").await,
            (409, "{\"kind\":\"Status\"}".to_string())
        );
        assert_eq!(call(Method::GET, "/healthz").await, (200, "ok".to_string()));
    }
}
