//! Planner: pure, no I/O.
//!
//! The ingress route table, built from the Ingresses of Berth's class ([`is_ours`]), their
//! Services and those Services' EndpointSlices, with upstream's semantics:
//!
//! * hosts: an exact host (`foo.com`) before a wildcard (`*.foo.com`, which matches exactly one
//!   more label: `a.foo.com`, not `foo.com` nor `a.b.foo.com`); rules without a host serve the
//!   requests whose host no rule names;
//! * paths, within a host: the longest path first; at equal length `Exact` before `Prefix`.
//!   `Prefix` matches element-wise on `/`-separated segments, a trailing slash ignored
//!   (`/foo` matches `/foo`, `/foo/` and `/foo/bar`, not `/foobar`); `ImplementationSpecific`
//!   is treated as `Prefix`;
//! * across Ingresses the oldest (creation time, then namespace and name) wins where two claim
//!   the same host, path and type;
//! * a request whose host matches no rule, or whose host matches but no path does, goes to the
//!   default backend: the `spec.defaultBackend` of the oldest Ingress that has one; without
//!   one it has no route (404, as ingress-nginx's default backend answers);
//! * a backend is a Service port, by number or name, resolved to the ready endpoints' pod
//!   address and target port from the EndpointSlices; none ready (or no such Service, an
//!   `ExternalName` Service or a `resource` backend) is an upstream without endpoints (503).

use core::net::{IpAddr, SocketAddr};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use berth_api::ingress_class::is_ours;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressClass};

/// The label an EndpointSlice names its Service by.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How a path matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    Exact,
    Prefix,
}

/// Where a matched request goes: a Service port of an Ingress and its ready endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub namespace: String,
    /// The Ingress the route came from.
    pub ingress: String,
    pub service: String,
    /// The Service port as the Ingress names it (a number or a name).
    pub port: String,
    /// The ready endpoints' `podIP:targetPort`, sorted.
    pub endpoints: Vec<SocketAddr>,
}

impl Upstream {
    /// `namespace/service:port`: names the upstream's connection pool.
    pub fn key(&self) -> String {
        format!("{}/{}:{}", self.namespace, self.service, self.port)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathRoute {
    kind: PathKind,
    /// As written (`Exact`), or its non-empty segments joined by `/` (`Prefix`).
    path: String,
    upstream: Arc<Upstream>,
}

impl PathRoute {
    /// The length precedence is judged by: a prefix's without its trailing slash.
    fn length(&self) -> usize {
        match self.kind {
            PathKind::Exact => self.path.len(),
            PathKind::Prefix => self.path.len() + 1,
        }
    }

    fn matches(&self, path: &str) -> bool {
        match self.kind {
            PathKind::Exact => self.path == path,
            PathKind::Prefix => {
                let mut want = self.path.split('/').filter(|s| !s.is_empty());
                let mut got = path.split('/').filter(|s| !s.is_empty());
                want.all(|w| got.next() == Some(w))
            }
        }
    }
}

/// A host (or wildcard host) of a `spec.tls` entry and the Secret that holds its certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsRoute {
    /// Lower case; `*.foo.com` for a wildcard.
    pub host: String,
    /// `None`: the entry names no Secret (the default certificate answers).
    pub secret: Option<SecretRef>,
}

/// A Secret by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// What the proxy serves; immutable, replaced whole on every change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteTable {
    exact_hosts: BTreeMap<String, Vec<PathRoute>>,
    /// By the part after `*.`.
    wildcard_hosts: BTreeMap<String, Vec<PathRoute>>,
    any_host: Vec<PathRoute>,
    default_backend: Option<Arc<Upstream>>,
    /// In precedence order: oldest Ingress first.
    pub tls: Vec<TlsRoute>,
}

/// A request's host as routes compare it: lower case, without port or final dot.
pub fn normalize_host(host: &str) -> String {
    let host = if let Some(rest) = host.strip_prefix('[') {
        // An IPv6 literal, `[::1]:80`.
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl RouteTable {
    /// The upstream for a request to `host` (normalized, see [`normalize_host`]) and `path`
    /// (without the query); `None`: no route.
    pub fn route(&self, host: &str, path: &str) -> Option<&Arc<Upstream>> {
        let wildcard = || {
            let (first, rest) = host.split_once('.')?;
            (!first.is_empty())
                .then(|| self.wildcard_hosts.get(rest))
                .flatten()
        };
        let routes = self
            .exact_hosts
            .get(host)
            .or_else(wildcard)
            .unwrap_or(&self.any_host);
        routes
            .iter()
            .find(|r| r.matches(path))
            .map(|r| &r.upstream)
            .or(self.default_backend.as_ref())
    }

    /// Every upstream the table routes to (one may appear several times).
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.exact_hosts
            .values()
            .chain(self.wildcard_hosts.values())
            .flatten()
            .chain(self.any_host.iter())
            .map(|r| &r.upstream)
            .chain(self.default_backend.iter())
    }

    /// Whether any route or default backend is set.
    pub fn is_empty(&self) -> bool {
        self.exact_hosts.is_empty()
            && self.wildcard_hosts.is_empty()
            && self.any_host.is_empty()
            && self.default_backend.is_none()
    }
}

/// Ours, oldest first (creation time, then namespace, then name).
fn ours_by_age<'a>(ingresses: &'a [Ingress], classes: &[IngressClass]) -> Vec<&'a Ingress> {
    let mut ours: Vec<&Ingress> = ingresses
        .iter()
        .filter(|i| i.spec.is_some() && is_ours(i, classes))
        .collect();
    ours.sort_by_key(|i| {
        let m = &i.metadata;
        (
            m.creation_timestamp.as_ref().map(|t| t.0),
            m.namespace.clone(),
            m.name.clone(),
        )
    });
    ours
}

/// The Secrets the TLS entries of our Ingresses name.
pub fn tls_secrets(ingresses: &[Ingress], classes: &[IngressClass]) -> BTreeSet<SecretRef> {
    ours_by_age(ingresses, classes)
        .into_iter()
        .flat_map(|i| {
            let ns = i.metadata.namespace.clone().unwrap_or_default();
            i.spec
                .iter()
                .flat_map(|s| s.tls.iter().flatten())
                .filter_map(move |t| {
                    Some(SecretRef {
                        namespace: ns.clone(),
                        name: t.secret_name.clone()?,
                    })
                })
        })
        .collect()
}

/// Services by `namespace/name` and their EndpointSlices.
pub struct Backends<'a> {
    pub services: &'a BTreeMap<String, Service>,
    pub slices: &'a BTreeMap<String, EndpointSlice>,
}

impl Backends<'_> {
    /// The upstream of `backend` in `namespace` for the Ingress `ingress`.
    fn upstream(&self, namespace: &str, ingress: &str, backend: &IngressBackend) -> Upstream {
        let service = backend.service.as_ref();
        let port = service.and_then(|s| s.port.as_ref());
        let port_text = match port {
            Some(p) => p
                .name
                .clone()
                .or(p.number.map(|n| n.to_string()))
                .unwrap_or_default(),
            None => String::new(),
        };
        let mut up = Upstream {
            namespace: namespace.to_string(),
            ingress: ingress.to_string(),
            service: service.map(|s| s.name.clone()).unwrap_or_default(),
            port: port_text,
            endpoints: Vec::new(),
        };
        if let Some(port) = port {
            up.endpoints =
                self.endpoints(namespace, &up.service, port.number, port.name.as_deref());
        }
        up
    }

    /// The ready endpoints of a Service port given by number or name.
    fn endpoints(
        &self,
        namespace: &str,
        service: &str,
        number: Option<i32>,
        name: Option<&str>,
    ) -> Vec<SocketAddr> {
        let Some(spec) = self
            .services
            .get(&format!("{namespace}/{service}"))
            .and_then(|s| s.spec.as_ref())
        else {
            return Vec::new();
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            return Vec::new();
        }
        let Some(svc_port) = spec.ports.iter().flatten().find(|p| match (number, name) {
            (Some(n), _) => p.port == n,
            (None, Some(name)) => p.name.as_deref() == Some(name),
            (None, None) => false,
        }) else {
            return Vec::new();
        };
        let port_name = svc_port.name.as_deref().unwrap_or("");
        let mut out: Vec<SocketAddr> = self
            .slices
            .values()
            .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .is_some_and(|n| n == service)
            })
            .flat_map(|s| {
                let target = s
                    .ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref().unwrap_or("") == port_name)
                    .and_then(|p| p.port)
                    .and_then(|p| u16::try_from(p).ok());
                s.endpoints
                    .iter()
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                    .flat_map(|e| e.addresses.iter())
                    .filter_map(move |a| Some(SocketAddr::new(a.parse::<IpAddr>().ok()?, target?)))
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The route table of `ingresses` (those of Berth's class, see [`is_ours`]).
pub fn plan_routes(
    ingresses: &[Ingress],
    classes: &[IngressClass],
    backends: &Backends<'_>,
) -> RouteTable {
    let mut table = RouteTable::default();
    for ing in ours_by_age(ingresses, classes) {
        let (Some(spec), ns, name) = (
            ing.spec.as_ref(),
            ing.metadata.namespace.as_deref().unwrap_or_default(),
            ing.metadata.name.as_deref().unwrap_or_default(),
        ) else {
            continue;
        };
        if table.default_backend.is_none()
            && let Some(b) = &spec.default_backend
        {
            table.default_backend = Some(Arc::new(backends.upstream(ns, name, b)));
        }
        for tls in spec.tls.iter().flatten() {
            for host in tls.hosts.iter().flatten() {
                table.tls.push(TlsRoute {
                    host: host.to_ascii_lowercase(),
                    secret: tls.secret_name.clone().map(|name| SecretRef {
                        namespace: ns.to_string(),
                        name,
                    }),
                });
            }
        }
        for rule in spec.rules.iter().flatten() {
            let routes = match rule.host.as_deref().map(str::to_ascii_lowercase) {
                None => &mut table.any_host,
                Some(h) => match h.strip_prefix("*.") {
                    Some(rest) => table.wildcard_hosts.entry(rest.to_string()).or_default(),
                    None => table.exact_hosts.entry(h).or_default(),
                },
            };
            for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                let path = p.path.clone().unwrap_or_else(|| "/".into());
                let (kind, path) = match p.path_type.as_str() {
                    "Exact" => (PathKind::Exact, path),
                    _ => (
                        PathKind::Prefix,
                        path.split('/')
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>()
                            .join("/"),
                    ),
                };
                if routes.iter().any(|r| r.kind == kind && r.path == path) {
                    // An older Ingress (or an earlier path of this one) has it.
                    continue;
                }
                routes.push(PathRoute {
                    kind,
                    path,
                    upstream: Arc::new(backends.upstream(ns, name, &p.backend)),
                });
            }
        }
    }
    let order = |routes: &mut Vec<PathRoute>| {
        // Stable: at equal length and kind, the older keeps its place.
        routes.sort_by_key(|r| (Reverse(r.length()), r.kind));
    };
    table.exact_hosts.values_mut().for_each(order);
    table.wildcard_hosts.values_mut().for_each(order);
    order(&mut table.any_host);
    table
}

/// The TLS route for a client's SNI name: an exact host first, then a wildcard, each in the
/// table's order (oldest Ingress first).
pub fn tls_route<'a>(tls: &'a [TlsRoute], server_name: &str) -> Option<&'a TlsRoute> {
    let name = server_name.trim_end_matches('.').to_ascii_lowercase();
    tls.iter().find(|t| t.host == name).or_else(|| {
        let (first, rest) = name.split_once('.')?;
        if first.is_empty() {
            return None;
        }
        tls.iter().find(|t| t.host.strip_prefix("*.") == Some(rest))
    })
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
