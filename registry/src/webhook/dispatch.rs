//! Webhooks applied to one request, as upstream's generic webhook dispatchers: each webhook
//! whose rules, selectors and match conditions match is sent an `AdmissionReview`; mutating
//! webhooks run one after another, each seeing the previous one's patch, and those with
//! `reinvocationPolicy: IfNeeded` run once more when a later webhook changed the object;
//! validating webhooks see the final object. A call that fails is decided by the webhook's
//! failure policy; the first denial answers the request.

use std::time::Duration;

use berth_shared::cel::{Activation, PER_CALL_LIMIT};
use serde_json::Value;

use super::compiled::{Client, Hook};
use super::review;
use crate::admission_policy::matching::{Attributes, Match};

/// One HTTPS POST of a review.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// Host (name or IP) and port to dial.
    pub host: String,
    pub port: u16,
    /// The name the server's certificate must carry.
    pub server_name: String,
    /// Path and query (`/validate?timeout=10s`).
    pub path: String,
    /// `clientConfig.caBundle` (PEM), the only roots trusted for this call.
    pub ca_bundle: Option<&'a [u8]>,
    pub body: Vec<u8>,
    /// The whole call's deadline: connect, TLS, request and answer.
    pub timeout: Duration,
}

impl Call<'_> {
    /// The URL as upstream's errors show it.
    pub fn url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("https://{host}:{}{}", self.port, self.path)
    }
}

/// Posts reviews: the HTTPS client, outside this crate.
pub trait Transport: Send + Sync {
    /// The response body of a 200 answer; `Err` says why the call failed, as Go's HTTP
    /// client words it where it can (`context deadline exceeded`, `connection refused`).
    fn post(&self, call: &Call<'_>) -> Result<Vec<u8>, String>;
}

/// What dispatch reads from the cluster.
pub trait Lookup {
    /// The labels of Namespace `name`.
    fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, String>;
    /// The address and port serving Service `namespace/name`'s port `port`.
    fn service_endpoint(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<(String, u16), String>;
}

/// The request, apart from the object (which mutating webhooks change).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `attributes.object` is ignored: the object is passed alongside.
    pub attributes: Attributes<'a>,
    pub equivalents: &'a [&'a str],
    /// Upstream's `AdmissionRequest` without objects (`admission_policy::request`).
    pub request: &'a Value,
    pub dry_run: bool,
}

/// Why a request does not go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The webhook said no.
    #[error("{}", .0.message)]
    Denied(review::Denial),
    /// A call failed under `failurePolicy: Fail` (upstream's internal error text, without
    /// the `Internal error occurred: ` its Status adds).
    #[error("{0}")]
    Failed(String),
    /// A dry run reached a webhook that has side effects.
    #[error("admission webhook \"{0}\" does not support dry run")]
    DryRunUnsupported(String),
}

/// What the webhooks left: their warnings (the object is changed in place).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    pub warnings: Vec<String>,
}

/// Splits `https://host[:port]/path` into host, port and path.
pub fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("unsupported webhook URL {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, tail) = v6
            .split_once(']')
            .ok_or_else(|| format!("unsupported webhook URL {url:?}"))?;
        (h, tail.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("invalid port in webhook URL {url:?}"))?,
        None => 443,
    };
    if host.is_empty() {
        return Err(format!("no host in webhook URL {url:?}"));
    }
    Ok((host.to_string(), port, path.to_string()))
}

fn with_timeout(path: &str, timeout: Duration) -> String {
    format!("{path}?timeout={}s", timeout.as_secs())
}

/// Whether `hook` applies to the request about `object`: `Ok(false)` skips it, `Err` is a
/// configuration or evaluation error for the failure policy.
fn applies(
    hook: &Hook,
    req: &Request<'_>,
    object: Option<&Value>,
    lookup: &dyn Lookup,
) -> Result<bool, String> {
    if !hook.has_rules() {
        return Ok(false);
    }
    let constraints = hook.constraints.as_ref().map_err(Clone::clone)?;
    let attributes = Attributes {
        object,
        ..req.attributes
    };
    match constraints.matches(&attributes, req.equivalents, || {
        lookup.namespace_labels(attributes.namespace)
    }) {
        Match::No => return Ok(false),
        Match::Error(e) => return Err(e),
        Match::Yes => {}
    }
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let null = Value::Null;
    let mut vars = Activation::new();
    vars.bind("object", object.unwrap_or(&null))
        .bind("oldObject", req.attributes.old_object.unwrap_or(&null))
        .bind("request", req.request);
    let mut errors = Vec::new();
    for (name, program) in &hook.match_conditions {
        let program = match program {
            Ok(p) => p,
            Err(e) => {
                errors.push(format!("{name}: {e}"));
                continue;
            }
        };
        match program.eval_bool_within(&vars, PER_CALL_LIMIT) {
            // Any false condition skips the webhook, even when another one failed.
            Ok((false, _)) => return Ok(false),
            Ok((true, _)) => {}
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(true)
    } else {
        Err(format!(
            "failed to evaluate match conditions: {}",
            errors.join(", ")
        ))
    }
}

/// Calls `hook` about `object`; `Err` is why the call failed.
fn call(
    hook: &Hook,
    req: &Request<'_>,
    object: Option<&Value>,
    mutating: bool,
    transport: &dyn Transport,
    lookup: &dyn Lookup,
) -> Result<review::Answer, String> {
    let Some(version) = hook.review_version else {
        return Err("webhook does not accept known AdmissionReview versions".to_string());
    };
    let (host, port, path, server_name) = match &hook.client {
        Client::Url(url) => {
            let (host, port, path) = split_url(url)?;
            (host.clone(), port, path, host)
        }
        Client::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let (ip, target) = lookup.service_endpoint(namespace, name, *port)?;
            let path = if path.is_empty() { "/" } else { path };
            (
                ip,
                target,
                path.to_string(),
                format!("{name}.{namespace}.svc"),
            )
        }
    };
    let body = review::review(version, req.request, object, req.attributes.old_object);
    let call = Call {
        host,
        port,
        server_name,
        path: with_timeout(&path, hook.timeout),
        ca_bundle: hook.ca_bundle.as_deref(),
        body: serde_json::to_vec(&body).map_err(|e| e.to_string())?,
        timeout: hook.timeout,
    };
    let uid = req
        .request
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let start = std::time::Instant::now();
    let response = transport.post(&call);
    tracing::debug!(
        webhook = %hook.name,
        configuration = %hook.configuration,
        operation = req.attributes.operation.as_str(),
        resource = req.attributes.resource,
        ok = response.is_ok(),
        elapsed_us = start.elapsed().as_micros() as u64,
        "admission webhook called"
    );
    let response =
        response.map_err(|e| format!("failed to call webhook: Post \"{}\": {e}", call.url()))?;
    review::answer(version, &hook.name, uid, &response, mutating)
}

/// A failed call: refused under Fail, logged and passed over under Ignore.
fn failed(hook: &Hook, cause: String) -> Result<(), Refusal> {
    if hook.ignore_failures {
        tracing::warn!(webhook = %hook.name, error = %cause, "failed calling webhook, failing open");
        Ok(())
    } else {
        Err(Refusal::Failed(format!(
            "failed calling webhook \"{}\": {cause}",
            hook.name
        )))
    }
}

/// One webhook's turn; returns whether it changed `object`.
fn run_one(
    hook: &Hook,
    req: &Request<'_>,
    object: &mut Option<Value>,
    mutating: bool,
    transport: &dyn Transport,
    lookup: &dyn Lookup,
    out: &mut Outcome,
) -> Result<bool, Refusal> {
    match applies(hook, req, object.as_ref(), lookup) {
        Ok(false) => return Ok(false),
        Ok(true) => {}
        Err(e) => return failed(hook, e).map(|()| false),
    }
    if req.dry_run && !hook.dry_run_safe {
        return Err(Refusal::DryRunUnsupported(hook.name.clone()));
    }
    let answer = match call(hook, req, object.as_ref(), mutating, transport, lookup) {
        Ok(a) => a,
        Err(e) => return failed(hook, e).map(|()| false),
    };
    out.warnings.extend(answer.warnings);
    if let Some(d) = answer.denial {
        return Err(Refusal::Denied(d));
    }
    let (Some(patch), Some(obj)) = (answer.patch, object.as_mut()) else {
        return Ok(false);
    };
    let before = obj.clone();
    if let Err(e) = berth_shared::patch::apply_json_patch(obj, &patch) {
        return failed(hook, format!("JSONPatch failed to apply: {e}")).map(|()| false);
    }
    Ok(*obj != before)
}

/// Runs the mutating `hooks` in order over `object`, then once more those asking for it
/// whose object a later webhook changed (upstream's single reinvocation).
pub fn mutate(
    hooks: &[&Hook],
    req: &Request<'_>,
    object: &mut Option<Value>,
    transport: &dyn Transport,
    lookup: &dyn Lookup,
) -> Result<Outcome, Refusal> {
    let mut out = Outcome::default();
    // Index of each webhook run so far, and whether a later one changed the object.
    let mut ran: Vec<(usize, bool)> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let changed = run_one(hook, req, object, true, transport, lookup, &mut out)?;
        if changed {
            for (_, stale) in ran.iter_mut() {
                *stale = true;
            }
        }
        ran.push((i, false));
    }
    for (i, stale) in ran {
        if stale && hooks[i].reinvoke_if_needed {
            run_one(hooks[i], req, object, true, transport, lookup, &mut out)?;
        }
    }
    Ok(out)
}

/// Runs the validating `hooks` over the final `object`; the first denial or failure answers.
pub fn validate(
    hooks: &[&Hook],
    req: &Request<'_>,
    object: Option<&Value>,
    transport: &dyn Transport,
    lookup: &dyn Lookup,
) -> Result<Outcome, Refusal> {
    let mut out = Outcome::default();
    let mut object = object.cloned();
    for hook in hooks {
        run_one(hook, req, &mut object, false, transport, lookup, &mut out)?;
    }
    Ok(out)
}
