//! The Kubernetes-compatible HTTP API: routing, authentication, content negotiation and the
//! resource handlers. Handlers parse the request, call the [`Registry`] and render the answer.

mod aggregated;
pub mod authn;
pub mod authz;
mod auto_answer;
mod body;
mod conn;
mod conn_table;
mod conversion;
pub mod discovery;
pub mod error;
pub mod flow_control;
mod guarded;
mod impersonate;
pub mod inflight;
mod join;
mod list;
mod list_body;
pub mod listener;
pub mod merge_shapes;
pub mod metrics;
mod patch;
pub mod path;
pub mod proxy;
mod proxy_html;
mod proxy_http;
mod proxy_rewrite;
mod proxy_target;
mod query;
pub mod resource_metrics;
mod review;
pub mod snapshot;
mod status_body;
mod subresource;
mod table;
pub mod tls;
mod watch;
mod watch_start;
mod write;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use berth_registry::Registry;
use error::ApiError;
use path::{ApiPath, ResourcePath};
use query::Query;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Shared state of the API handlers.
pub struct ApiState {
    pub registry: Registry,
    pub metrics: metrics::Metrics,
    pub git_version: String,
    /// Signs node certificates for agents holding a join token's secret.
    pub signer: crate::join::NodeSigner,
    /// The cluster's and the per-node join tokens (read from the data dir on each join).
    pub join_tokens: crate::join::tokens::JoinTokens,
    /// Each node name's secret, registered by the first agent that joined under it.
    pub node_passwords: crate::join::passwords::NodePasswords,
    /// Which addresses a node's certificate may carry.
    pub node_addresses: crate::join::addresses::AddressRule,
    /// Refused join attempts per source address.
    pub join_failures: std::sync::Mutex<crate::join::limiter::FailureLimiter>,
    /// Connects to agents for logs and exec.
    pub dialer: proxy::AgentDialer,
    /// The agents' last resource metrics scrapes, for the metrics API.
    pub resource_metrics: std::sync::Arc<resource_metrics::ResourceMetrics>,
    /// Cancelled at shutdown: open watches end.
    pub shutdown: CancellationToken,
    /// The controllers' metrics (work queues, the scheduler), for `/metrics`.
    pub controller_metrics: berth_runtime::ControllerMetrics,
    /// The caps on requests in flight.
    pub inflight: Arc<inflight::InFlight>,
    /// The accept loop's counters.
    pub connections: Arc<listener::ConnectionStats>,
    /// Whether this controller leads the others sharing its store (`/metrics`).
    pub leader: Arc<berth_runtime::leader_election::LeaderStatus>,
    /// RBAC decisions.
    pub authorizer: crate::rbac::Authorizer,
    /// Signs and checks ServiceAccount tokens.
    pub tokens: Arc<crate::serviceaccount::token::TokenSigner>,
    /// The serving certificate, renewed in place (its expiry is in `/metrics`).
    pub serving: Arc<crate::certificates::serving::ServingCertificate>,
    /// The APIServices requests are routed by.
    pub aggregator: Arc<crate::aggregation::Aggregator>,
    /// How aggregated API servers are called.
    pub front_proxy: Arc<crate::aggregation::front_proxy::FrontProxy>,
    /// Merge-patch shapes seen to add no unknown field.
    pub clean_shapes: merge_shapes::CleanShapes,
}

pub type SharedState = Arc<ApiState>;

/// Requests larger than this are refused (upstream's limit for a write body).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The router of the whole API. Layers, outermost first: `Status` bodies for the HTTP layer's
/// own errors, recovery from a panicking handler, authentication (and impersonation),
/// authorization of non-resource paths, metrics (which see the 429s), the in-flight caps.
pub fn router(state: SharedState) -> Router {
    Router::new()
        .route("/healthz", get(store_health))
        .route("/livez", get(health))
        .route("/readyz", get(store_health))
        .route("/version", get(discovery::version))
        // The Python client's `VersionApi().get_code()` asks with the trailing slash.
        .route("/version/", get(discovery::version))
        .route("/api", get(discovery::core_root))
        .route("/apis", get(discovery::groups_root))
        .route("/openapi/v3", get(discovery::openapi_root))
        .route("/openapi/v3/{*path}", get(discovery::openapi_doc))
        .route("/openapi/v2", get(discovery::openapi_v2))
        .route("/metrics", get(metrics::serve))
        .route("/cacerts", get(join::cacerts))
        .route(
            "/v1-berth/node-certificate",
            axum::routing::post(join::node_certificate),
        )
        .route(snapshot::PATH, get(snapshot::save))
        .fallback(dispatch)
        .layer(axum::middleware::from_fn_with_state(
            state.inflight.clone(),
            inflight::limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::observe,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authz::non_resource,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authn::require_identity,
        ))
        .layer(axum::middleware::from_fn(status_body::recover))
        .layer(axum::middleware::from_fn(status_body::ensure))
        .with_state(state)
}

async fn health() -> &'static str {
    "ok"
}

/// `/readyz` and `/healthz`: failed (500, upstream's check list) while the store's commits
/// fail — a full disk — and saying why; `/livez` stays ok, as a restart would not help.
async fn store_health(State(state): State<SharedState>) -> Response {
    match state.registry.store().write_health().failing {
        None => "ok".into_response(),
        Some(why) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("[+]ping ok\n[-]store failed: writes fail: {why}\nreadyz check failed\n"),
        )
            .into_response(),
    }
}

pub fn json_response(code: StatusCode, body: &Value) -> Response {
    // Go's json.Encoder, which kube-apiserver writes every body with, ends it with a newline.
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}

/// Adds upstream's `Warning: 299 - "<text>"` headers for what admission warns about the written
/// object (kubectl prints each as `Warning: <text>`).
pub fn with_warnings(resp: Response, kind: &str, obj: &Value) -> Response {
    add_warnings(resp, berth_shared::admission::warnings(kind, obj))
}

/// The answer to a write of `part` of an object: `obj` as JSON with `code`, a warning header per
/// text of `warnings` and, for the main resource, per warning admission has about `obj`.
pub fn written(
    code: StatusCode,
    kind: &str,
    part: berth_registry::Part,
    obj: &Value,
    warnings: Vec<String>,
) -> Response {
    use berth_registry::Part;
    let resp = add_warnings(json_response(code, obj), warnings);
    match part {
        Part::Main => with_warnings(resp, kind, obj),
        Part::Status | Part::EphemeralContainers | Part::Approval => resp,
    }
}

/// One `Warning: 299 - "…"` header per text, as upstream's warning recorder writes them.
pub fn add_warnings(mut resp: Response, texts: impl IntoIterator<Item = String>) -> Response {
    for w in texts {
        let text = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = axum::http::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// fieldValidation=Warn: the fields of `obj` its kind does not have (upstream warns of each and
/// drops it); none for `Ignore`, and none for `Strict`, which refuses them before this.
pub fn unknown_field_warnings(
    rt: &berth_shared::resource::ResourceType,
    obj: &Value,
    opts: &berth_registry::WriteOptions,
) -> Vec<String> {
    // A custom resource's unknown fields are its schema's to judge (the registry prunes them).
    if opts.field_validation == berth_registry::FieldValidation::Warn && !rt.custom {
        berth_shared::admission::unknown_fields(rt.kind, obj)
    } else {
        Vec::new()
    }
}

/// The fields a body repeats (`duplicate field "spec.replicas"`): warnings under
/// `fieldValidation=Warn`, a 400 `strict decoding error` under `Strict`, nothing under `Ignore`.
fn duplicate_field_warnings(
    paths: Vec<String>,
    opts: &berth_registry::WriteOptions,
) -> Result<Vec<String>, ApiError> {
    use berth_registry::FieldValidation;
    let texts = paths
        .iter()
        .map(|p| format!("duplicate field {}", serde_json::Value::from(p.as_str())));
    match opts.field_validation {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(texts.collect()),
        FieldValidation::Strict if paths.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::BadRequest(format!(
            "strict decoding error: {}",
            texts.collect::<Vec<_>>().join(", ")
        ))),
    }
}

async fn dispatch(State(state): State<SharedState>, req: Request) -> Response {
    match route(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Authorizes `req`'s method on `target` for the caller the request carries. (Not an `async
/// fn`: its future holds the identity and method, not the request, which is not `Sync`.)
fn authorize_request<'a>(
    state: &'a ApiState,
    req: &'a Request,
    target: &'a path::ResourcePath,
    query: &'a Query,
) -> impl Future<Output = Result<(), ApiError>> + Send + 'a {
    let id = req.extensions().get::<authn::Identity>();
    authz::authorize(state, id, req.method(), target, query, None)
}

async fn route(state: SharedState, req: Request) -> Result<Response, ApiError> {
    // A group-version a remote APIService serves goes to its server.
    if let Some(reg) = aggregated::remote_for(&state, req.uri().path()) {
        return aggregated::serve(&state, reg, req).await;
    }
    // services/proxy and pods/proxy go to a pod's address.
    if let Some(target) = proxy_target::parse_path(req.uri().path()) {
        return proxy_http::serve(&state, target, req).await;
    }
    // A node's agent answers GETs under nodes/proxy (its metrics).
    if let Some((node, agent_path)) = proxy::node_proxy_path(req.uri().path()) {
        let query = Query::parse(req.uri().query());
        let target = path::ResourcePath {
            rt: berth_shared::resource::NODES,
            namespace: None,
            name: Some(node.clone()),
            subresource: Some("proxy".to_string()),
        };
        authorize_request(&state, &req, &target, &query).await?;
        if req.method() != Method::GET {
            return Err(ApiError::MethodNotAllowed);
        }
        let raw_query = req.uri().query().unwrap_or_default().to_string();
        return proxy::node(&state, &node, &agent_path, &raw_query).await;
    }
    // Log, exec, attach and port-forward are proxied to the pod's agent with the whole request.
    if let ApiPath::Resource(target) = path::parse(req.uri().path())
        && target.rt.kind == "Pod"
        && let (Some(ns), Some(name), Some(sub)) = (
            target.namespace.clone(),
            target.name.clone(),
            target.subresource.clone(),
        )
        && matches!(sub.as_str(), "log" | "exec" | "attach" | "portforward")
    {
        let query = Query::parse(req.uri().query());
        authorize_request(&state, &req, &target, &query).await?;
        return match (req.method(), sub.as_str()) {
            (&Method::GET, "log") => {
                let q = req.uri().query().unwrap_or_default().to_string();
                proxy::log(&state, &ns, &name, &q).await
            }
            (&Method::GET | &Method::POST, "exec" | "attach" | "portforward") => {
                proxy::upgrade(&state, &ns, &name, &sub, req).await
            }
            _ => Err(ApiError::MethodNotAllowed),
        };
    }
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let target = match path::parse(parts.uri.path()) {
        ApiPath::Resource(r) => r,
        ApiPath::GroupVersion { group, version } => {
            return discovery::group_version(&group, &version);
        }
        ApiPath::Group(group) => {
            return discovery::group(&group).or_else(|e| {
                aggregated::group_document(&state, &group)
                    .map(|doc| json_response(StatusCode::OK, &doc))
                    .ok_or(e)
            });
        }
        ApiPath::Unknown => return Err(ApiError::UnknownPath),
    };
    let identity = parts.extensions.get::<authn::Identity>().cloned();
    // A TokenRequest is authorized with the pod it binds to (nodes may ask only for their
    // pods' tokens): read its body first.
    let mut body = Some(body);
    let mut token_request = None;
    if parts.method == Method::POST
        && target.subresource.as_deref() == Some("token")
        && target.rt.group.is_empty()
        && target.rt.plural == "serviceaccounts"
        && let Some(b) = body.take()
    {
        token_request = Some(body::read(b, &parts.headers).await?);
    }
    authz::authorize(
        &state,
        identity.as_ref(),
        &parts.method,
        &target,
        &query,
        token_request
            .as_ref()
            .and_then(crate::serviceaccount::bound_pod),
    )
    .await?;
    if let (Some(request), Some(ns), Some(name)) =
        (token_request, target.namespace.clone(), target.name.clone())
    {
        return review::token_request(&state, ns, name, request).await;
    }
    let body = body.unwrap_or_default();
    if target.rt.read_only {
        return match parts.method {
            Method::GET => resource_metrics::serve(&state, &target, &query),
            _ => Err(ApiError::MethodNotAllowed),
        };
    }
    if target.rt.create_only {
        return match parts.method {
            Method::POST => {
                let body = body::read(body, &parts.headers).await?;
                review::create(&state, identity.as_ref(), &target, body).await
            }
            _ => Err(ApiError::MethodNotAllowed),
        };
    }
    if authz::escalation::applies(target.rt) {
        state.authorizer.catch_up().await;
    }
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let table = table::requested(accept, &query)?;
    // Writes carry the requesting node, if it is one, for NodeRestriction.
    let write_options = || {
        query::write_options(&query).map(|mut o| {
            // Without a fieldManager, the manager is named after the client, as upstream
            // names it.
            if o.manager.is_none() {
                o.manager = parts
                    .headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .map(berth_shared::managed_fields::manager_from_user_agent)
                    .filter(|m| !m.is_empty());
            }
            o.node = parts
                .extensions
                .get::<authn::Identity>()
                .and_then(authz::node_of)
                .map(String::from);
            o.user = identity.as_ref().map(|id| id.user.clone());
            o.requestor = identity.clone();
            if subresource_is_approval(&target)
                && let Some(id) = &identity
            {
                o.guard = Some(crate::certificates::approval::approval_guard(
                    &state.authorizer,
                    id,
                ));
            }
            if authz::escalation::applies(target.rt)
                && let Some(id) = &identity
            {
                o.guard = Some(authz::escalation::guard(&state.authorizer, id));
            }
            o
        })
    };
    let view = target.rt;
    let (name, subresource) = (&target.name, &target.subresource);
    // A version stored as another one (autoscaling/v1 HPAs) reads and writes the stored
    // version: bodies are converted on the way in, answers on the way out.
    let rt = berth_shared::resource::storage_of(view);
    let converted = conversion::is_converted(view);
    // A list or watch decodes its options first: a malformed integer is a 400 before anything.
    if parts.method == Method::GET
        && subresource.is_none()
        && (name.is_none() || query.flag("watch"))
    {
        query.check_list_options()?;
    }
    // A Table of objects a webhook converts is printed from the converted objects.
    let webhook_table = table.filter(|_| {
        parts.method == Method::GET
            && subresource.is_none()
            && !query.flag("watch")
            && conversion::converts_by_webhook(view)
    });
    let answer = Box::pin(serve_resource(
        &state,
        &parts,
        body,
        &query,
        &target,
        rt,
        if webhook_table.is_some() { None } else { table },
        &write_options,
    ))
    .await?;
    if let Some(include) = webhook_table {
        return conversion::table_in_version(&state.registry, view, answer, include).await;
    }
    // Watch streams convert each event as they encode it.
    if converted && !(parts.method == Method::GET && query.flag("watch")) {
        return conversion::answer_in_version(&state.registry, view, answer).await;
    }
    Ok(answer)
}

/// The verbs on a resource collection, object or its subresources, reading and writing `rt`
/// (the stored version of `target.rt`).
#[allow(clippy::too_many_arguments)]
async fn serve_resource(
    state: &SharedState,
    parts: &axum::http::request::Parts,
    body: Body,
    query: &Query,
    target: &ResourcePath,
    rt: &'static berth_shared::resource::ResourceType,
    table: Option<berth_shared::table::IncludeObject>,
    write_options: &(dyn Fn() -> Result<berth_registry::WriteOptions, ApiError> + Sync),
) -> Result<Response, ApiError> {
    let state = state.clone();
    let query = query.clone();
    let view = target.rt;
    let ns = target.namespace.as_deref();
    let name = &target.name;
    let subresource = &target.subresource;
    match (&parts.method, name.as_deref(), subresource.as_deref()) {
        (&Method::GET, None, None) if query.flag("watch") => {
            watch::serve(&state, view, ns, &query, table).await
        }
        (&Method::GET, None, None) => list::list(&state, rt, ns, &query, table).await,
        (&Method::GET, Some(name), None) if query.flag("watch") => {
            // Old-style watch of one object.
            let _ = name;
            watch::serve(&state, view, ns, &query, table).await
        }
        (&Method::GET, Some(name), None) => {
            if query.get("resourceVersion").is_none_or(str::is_empty) {
                state.registry.store().sync().await?;
            }
            list::get(&state, rt, ns, name, table).await
        }
        (&Method::POST, None, None) => {
            let (body, duplicates) = body::read_as(body, &parts.headers, rt.kind).await?;
            let body = conversion::body_to_storage(&state.registry, view, body).await?;
            authz::authorize_create(parts.extensions.get::<authn::Identity>(), target, &body)?;
            let opts = write_options()?;
            let duplicates = duplicate_field_warnings(duplicates, &opts)?;
            write::create(&state, rt, ns, body, opts, duplicates).await
        }
        (&Method::PUT, Some(name), sub) => {
            let kind = if sub == Some("scale") {
                "Scale"
            } else {
                rt.kind
            };
            let (body, duplicates) = body::read_as(body, &parts.headers, kind).await?;
            let body = match sub {
                None | Some("status") => {
                    conversion::body_to_storage(&state.registry, view, body).await?
                }
                _ => body,
            };
            match (sub, written_part(rt, sub)) {
                (Some("scale"), _) if rt.has_scale => {
                    // The request's own options: its manager (else its user-agent's) and
                    // identity, as for any write.
                    subresource::put_scale(&state, rt, ns, name, body, write_options()?).await
                }
                (_, Some(part)) => {
                    let opts = write_options()?;
                    let duplicates = duplicate_field_warnings(duplicates, &opts)?;
                    write::update(&state, rt, ns, name, body, opts, part, duplicates).await
                }
                _ => Err(ApiError::UnknownPath),
            }
        }
        (&Method::PATCH, Some(name), sub) => {
            let content_type = body::content_type(&parts.headers);
            let body = body::read_raw(body, &parts.headers).await?;
            match (sub, written_part(rt, sub)) {
                (Some("scale"), _) if rt.has_scale => {
                    let opts = write_options()?;
                    subresource::patch_scale(&state, rt, ns, name, &content_type, body, opts).await
                }
                (_, Some(part)) => {
                    let opts = write_options()?;
                    patch::patch(
                        &state,
                        view,
                        ns,
                        name,
                        &content_type,
                        body,
                        opts,
                        part,
                        &query,
                    )
                    .await
                }
                _ => Err(ApiError::UnknownPath),
            }
        }
        (&Method::DELETE, Some(name), None) => {
            let body = body::read_raw(body, &parts.headers).await?;
            let who = parts.extensions.get::<authn::Identity>().cloned();
            write::delete(&state, rt, ns, name, body, &query, who).await
        }
        (&Method::DELETE, None, None) => {
            query.check_list_options()?;
            let body = body::read_raw(body, &parts.headers).await?;
            let who = parts.extensions.get::<authn::Identity>().cloned();
            write::delete_collection(&state, rt, ns, body, &query, who).await
        }
        // The status and ephemeralcontainers subresources read as the whole object (and print
        // as it: `kubectl get --subresource=status`).
        (&Method::GET, Some(name), Some(sub)) if written_part(rt, Some(sub)).is_some() => {
            list::get(&state, rt, ns, name, table).await
        }
        (&Method::GET, Some(name), Some("scale")) if rt.has_scale => {
            subresource::get_scale(&state, rt, ns, name, table).await
        }
        (&Method::POST, Some(name), Some("binding")) if rt.kind == "Pod" => {
            let body = body::read(body, &parts.headers).await?;
            subresource::bind(&state, ns, name, body).await
        }
        (&Method::POST, Some(name), Some("eviction")) if rt.kind == "Pod" => {
            let body = body::read(body, &parts.headers).await?;
            subresource::evict(&state, ns, name, body, &query).await
        }
        (_, _, Some(_)) => Err(ApiError::UnknownPath),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// A write to a CertificateSigningRequest's `approval` subresource.
fn subresource_is_approval(target: &ResourcePath) -> bool {
    target.rt.kind == "CertificateSigningRequest"
        && target.subresource.as_deref() == Some("approval")
}

/// The part of an object a write to the subresource `sub` (`None`: the object itself)
/// changes; `None` for subresources with their own handlers (scale) or none at all.
fn written_part(
    rt: &berth_shared::resource::ResourceType,
    sub: Option<&str>,
) -> Option<berth_registry::Part> {
    use berth_registry::Part;
    match sub {
        None => Some(Part::Main),
        Some("status") if rt.has_status => Some(Part::Status),
        Some("ephemeralcontainers") if rt.kind == "Pod" => Some(Part::EphemeralContainers),
        Some("approval") if rt.kind == "CertificateSigningRequest" => Some(Part::Approval),
        _ => None,
    }
}

/// Runs a blocking registry call off the async workers.
pub async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::Internal(format!("request task failed: {e}")))?
        .map_err(Into::into)
}

/// An empty body for responses that need none.
pub fn empty() -> Body {
    Body::empty()
}
