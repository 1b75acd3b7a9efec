//! Ingress and IngressClass admission (networking.k8s.io/v1): upstream's `SetDefaults_IngressClass`
//! and `ValidateIngressCreate`/`ValidateIngressUpdate`/`ValidateIngressClass(Update)` with their
//! field paths and messages: a default backend or rules, backends naming a Service and one port
//! (or a resource), v1's required `pathType` and absolute `Exact`/`Prefix` paths, hosts that are
//! DNS names (one leading `*.` allowed) and not IPs, TLS hosts and Secret names, and a class
//! whose controller is a domain-prefixed path that never changes.

use std::net::IpAddr;

use crate::ingress_class::LEGACY_CLASS_ANNOTATION;
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, Ingress, IngressBackend, IngressClass, IngressClassParametersReference,
    IngressRule, IngressSpec,
};

use super::admission_rules::path_segment;
use super::field::{FieldError, Path};
use super::names::{
    dns1035_label, dns1123_label, dns1123_subdomain, each_invalid, port_name, port_num,
    regex_error, wildcard_dns1123_subdomain,
};

const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];
const PARAMETER_SCOPES: &[&str] = &["Cluster", "Namespace"];
/// Upstream `maxLenIngressClassController`.
const MAX_CONTROLLER_LEN: usize = 250;
const NOT_AN_IP: &str = "must be a DNS name, not an IP address";

/// Upstream `SetDefaults_IngressClass`: parameters without a scope are cluster-scoped.
pub(crate) fn default_ingress_class(class: &mut IngressClass) {
    if let Some(p) = class.spec.as_mut().and_then(|s| s.parameters.as_mut()) {
        p.scope.get_or_insert_with(|| "Cluster".into());
    }
}

/// Upstream `ValidateIngressCreate` (with `old`, `ValidateIngressUpdate`): the spec, the
/// load-balancer status and, on create, the class annotation agreeing with `ingressClassName`.
/// An update may keep a stored TLS Secret name that is no longer valid, as upstream allows.
pub(crate) fn validate_ingress(ing: &Ingress, old: Option<&Ingress>) -> Vec<FieldError> {
    let spec = ing.spec.clone().unwrap_or_default();
    let allow_invalid_secret = old.is_some_and(|o| {
        tls_secret_names(o)
            .iter()
            .any(|n| !dns1123_subdomain(n).is_empty())
    });
    let mut errs = validate_ingress_spec(&spec, &Path::new("spec"), allow_invalid_secret);
    errs.extend(validate_load_balancer_status(ing));
    if old.is_none() {
        let annotated = ing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
        if let (Some(a), Some(class)) = (annotated, &spec.ingress_class_name)
            && a != class
        {
            errs.push(FieldError::invalid(
                &Path::new("annotations").child(LEGACY_CLASS_ANNOTATION),
                a.as_str(),
                "must match `ingressClassName` when both are specified",
            ));
        }
    }
    errs
}

fn tls_secret_names(ing: &Ingress) -> Vec<String> {
    let tls = ing.spec.as_ref().and_then(|s| s.tls.as_ref());
    tls.into_iter()
        .flatten()
        .filter_map(|t| t.secret_name.clone())
        .filter(|n| !n.is_empty())
        .collect()
}

fn validate_ingress_spec(
    spec: &IngressSpec,
    sp: &Path,
    allow_invalid_secret: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = spec.rules.as_deref().unwrap_or_default();
    if rules.is_empty() && spec.default_backend.is_none() {
        errs.push(FieldError::invalid(
            sp,
            serde_json::Value::Null,
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = &spec.default_backend {
        errs.extend(validate_backend(b, &sp.child("defaultBackend")));
    }
    for (i, rule) in rules.iter().enumerate() {
        errs.extend(validate_rule(rule, &sp.child("rules").index(i)));
    }
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        let tp = sp.child("tls").index(i);
        for (j, host) in tls.hosts.iter().flatten().enumerate() {
            let check = if host.contains('*') {
                wildcard_dns1123_subdomain
            } else {
                dns1123_subdomain
            };
            errs.extend(each_invalid(&tp.child("hosts").index(j), host, check(host)));
        }
        let secret = tls.secret_name.as_deref().unwrap_or_default();
        if !allow_invalid_secret && !secret.is_empty() {
            errs.extend(each_invalid(
                &tp.child("secretName"),
                secret,
                dns1123_subdomain(secret),
            ));
        }
    }
    if let Some(class) = &spec.ingress_class_name {
        errs.extend(each_invalid(
            &sp.child("ingressClassName"),
            class,
            dns1123_subdomain(class),
        ));
    }
    errs
}

fn validate_rule(rule: &IngressRule, rp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let host = rule.host.as_deref().unwrap_or_default();
    if !host.is_empty() {
        let hp = rp.child("host");
        if host.parse::<IpAddr>().is_ok() {
            errs.push(FieldError::invalid(&hp, host, NOT_AN_IP));
        }
        let check = if host.contains('*') {
            wildcard_dns1123_subdomain
        } else {
            dns1123_subdomain
        };
        errs.extend(each_invalid(&hp, host, check(host)));
    }
    if let Some(http) = &rule.http {
        let hp = rp.child("http");
        if http.paths.is_empty() {
            errs.push(FieldError::required(&hp.child("paths"), ""));
        }
        for (i, p) in http.paths.iter().enumerate() {
            errs.extend(validate_path(p, &hp.child("paths").index(i)));
        }
    }
    errs
}

/// Upstream `validateHTTPIngressPath`: v1 requires `pathType`; `Exact` and `Prefix` paths are
/// absolute and free of `//`, `/./`, `/../`, encoded slashes and a trailing `/.` or `/..`.
fn validate_path(p: &HTTPIngressPath, pp: &Path) -> Vec<FieldError> {
    if p.path_type.is_empty() {
        return vec![FieldError::required(
            &pp.child("pathType"),
            "pathType must be specified",
        )];
    }
    let mut errs = Vec::new();
    let path = p.path.as_deref().unwrap_or_default();
    let path_field = pp.child("path");
    match p.path_type.as_str() {
        "Exact" | "Prefix" => {
            if !path.starts_with('/') {
                errs.push(FieldError::invalid(
                    &path_field,
                    path,
                    "must be an absolute path",
                ));
            }
            for seq in INVALID_PATH_SEQUENCES.iter().filter(|s| path.contains(**s)) {
                errs.push(FieldError::invalid(
                    &path_field,
                    path,
                    format!("must not contain '{seq}'"),
                ));
            }
            for suffix in INVALID_PATH_SUFFIXES.iter().filter(|s| path.ends_with(**s)) {
                errs.push(FieldError::invalid(
                    &path_field,
                    path,
                    format!("cannot end with '{suffix}'"),
                ));
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() && !path.starts_with('/') {
                errs.push(FieldError::invalid(
                    &path_field,
                    path,
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &pp.child("pathType"),
            other,
            PATH_TYPES,
        )),
    }
    errs.extend(validate_backend(&p.backend, &pp.child("backend")));
    errs
}

/// Upstream `validateIngressBackend`: a Service (named as a DNS-1035 label, with a port name or
/// number, not both) or a resource reference, exactly one.
fn validate_backend(b: &IngressBackend, bp: &Path) -> Vec<FieldError> {
    match (&b.resource, &b.service) {
        (Some(_), Some(_)) => vec![FieldError::invalid(
            bp,
            "",
            "cannot set both resource and service backends",
        )],
        (Some(r), None) => validate_typed_reference(r, &bp.child("resource")),
        (None, Some(svc)) => {
            let sp = bp.child("service");
            let mut errs = Vec::new();
            if svc.name.is_empty() {
                errs.push(FieldError::required(&sp.child("name"), ""));
            } else {
                errs.extend(each_invalid(
                    &sp.child("name"),
                    &svc.name,
                    dns1035_label(&svc.name),
                ));
            }
            let port = svc.port.clone().unwrap_or_default();
            let name = port.name.filter(|n| !n.is_empty());
            let number = port.number.filter(|n| *n != 0);
            match (name, number) {
                (Some(_), Some(_)) => errs.push(FieldError::invalid(
                    bp,
                    "",
                    "cannot set both port name & port number",
                )),
                (Some(n), None) => errs.extend(each_invalid(
                    &sp.child("port").child("name"),
                    &n,
                    port_name(&n),
                )),
                (None, Some(n)) => errs.extend(
                    port_num(i64::from(n))
                        .into_iter()
                        .map(|m| FieldError::invalid(&sp.child("port").child("number"), n, m)),
                ),
                (None, None) => {
                    errs.push(FieldError::required(bp, "port name or number is required"))
                }
            }
            errs
        }
        (None, None) => vec![FieldError::invalid(
            bp,
            "",
            "resource or service backend is required",
        )],
    }
}

/// Upstream `validateIngressTypedLocalObjectReference`.
fn validate_typed_reference(r: &TypedLocalObjectReference, rp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(g) = &r.api_group {
        errs.extend(each_invalid(&rp.child("apiGroup"), g, dns1123_subdomain(g)));
    }
    errs.extend(required_segment(&rp.child("kind"), &r.kind));
    errs.extend(required_segment(&rp.child("name"), &r.name));
    errs
}

fn required_segment(path: &Path, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        vec![FieldError::required(path, "")]
    } else {
        each_invalid(path, value, path_segment(value))
    }
}

/// Upstream `ValidateIngressLoadBalancerStatus`: addresses are IPs, host names DNS names.
fn validate_load_balancer_status(ing: &Ingress) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lb = ing.status.as_ref().and_then(|s| s.load_balancer.as_ref());
    let ip_path = Path::new("status").child("loadBalancer").child("ingress");
    for (i, entry) in lb
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let ep = ip_path.index(i);
        if let Some(ip) = entry.ip.as_deref().filter(|ip| !ip.is_empty())
            && ip.parse::<IpAddr>().is_err()
        {
            errs.push(FieldError::invalid(
                &ep.child("ip"),
                ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
        if let Some(host) = entry.hostname.as_deref().filter(|h| !h.is_empty()) {
            errs.extend(each_invalid(
                &ep.child("hostname"),
                host,
                dns1123_subdomain(host),
            ));
            if host.parse::<IpAddr>().is_ok() {
                errs.push(FieldError::invalid(&ep.child("hostname"), host, NOT_AN_IP));
            }
        }
    }
    errs
}

/// Upstream `ValidateIngressClass` (with `old`, `ValidateIngressClassUpdate`: the controller
/// never changes).
pub(crate) fn validate_ingress_class(
    class: &IngressClass,
    old: Option<&IngressClass>,
) -> Vec<FieldError> {
    let sp = Path::new("spec");
    let spec = class.spec.clone().unwrap_or_default();
    let mut errs = Vec::new();
    if let Some(o) = old {
        let before = o.spec.as_ref().and_then(|s| s.controller.clone());
        if before != spec.controller {
            errs.push(FieldError::immutable(
                &sp.child("controller"),
                spec.controller.clone().unwrap_or_default(),
            ));
        }
    }
    let controller = spec.controller.as_deref().unwrap_or_default();
    let cp = sp.child("controller");
    if controller.is_empty() {
        errs.push(FieldError::required(&cp, ""));
    } else {
        if controller.len() > MAX_CONTROLLER_LEN {
            errs.push(FieldError::too_long(&cp, MAX_CONTROLLER_LEN));
        }
        errs.extend(domain_prefixed_path(&cp, controller));
    }
    if let Some(p) = &spec.parameters {
        errs.extend(validate_parameters(p, &sp.child("parameters")));
    }
    errs
}

/// Upstream `IsDomainPrefixedPath` (`acme.io/foo`).
fn domain_prefixed_path(path: &Path, value: &str) -> Vec<FieldError> {
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs = each_invalid(path, host, dns1123_subdomain(host));
    let http_path_char = |c: char| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c);
    if !rest.chars().all(http_path_char) {
        errs.push(FieldError::invalid(
            path,
            rest,
            regex_error("Invalid path", "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+", &[]),
        ));
    }
    errs
}

/// Upstream `validateIngressClassParametersReference`.
fn validate_parameters(p: &IngressClassParametersReference, pp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(g) = &p.api_group {
        errs.extend(each_invalid(&pp.child("apiGroup"), g, dns1123_subdomain(g)));
    }
    errs.extend(required_segment(&pp.child("kind"), &p.kind));
    errs.extend(required_segment(&pp.child("name"), &p.name));
    let Some(scope) = p.scope.as_deref() else {
        errs.push(FieldError::required(&pp.child("scope"), ""));
        return errs;
    };
    let np = pp.child("namespace");
    match (scope, p.namespace.as_deref()) {
        ("Namespace", None) => errs.push(FieldError::required(
            &np,
            "`parameters.scope` is set to 'Namespace'",
        )),
        ("Namespace", Some(ns)) => errs.extend(each_invalid(&np, ns, dns1123_label(ns))),
        ("Cluster", Some(_)) => errs.push(FieldError::forbidden(
            &np,
            "`parameters.scope` is set to 'Cluster'",
        )),
        ("Cluster", None) => {}
        (other, _) => errs.push(FieldError::not_supported(
            &pp.child("scope"),
            other,
            PARAMETER_SCOPES,
        )),
    }
    errs
}

#[cfg(test)]
#[path = "ingress_tests.rs"]
mod tests;
