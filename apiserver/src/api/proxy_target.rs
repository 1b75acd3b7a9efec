//! Where `services/proxy` and `pods/proxy` requests go, as upstream resolves them: the path
//! (`/api/v1/namespaces/NS/services/[SCHEME:]NAME[:PORT]/proxy/REST`), the Service port (a
//! number names the Service port declaring it, whose name picks the Endpoints port), an
//! endpoint address backed by a pod, or the pod's IP and port (the first declared container
//! port when none is given). Pure: the objects are passed in.

use std::net::IpAddr;

use axum::http::Method;
use serde_json::Value;

use super::error::ApiError;

/// Which kind of object a proxy request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Through {
    Service,
    Pod,
}

impl Through {
    /// The plural resource name (`services`, `pods`).
    pub fn plural(self) -> &'static str {
        match self {
            Through::Service => "services",
            Through::Pod => "pods",
        }
    }
}

/// A parsed proxy request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPath {
    pub through: Through,
    pub namespace: String,
    /// `[SCHEME:]NAME[:PORT]`, percent-decoded.
    pub id: String,
    /// What follows `/proxy`, still escaped: empty, or starting with `/`.
    pub rest: String,
}

/// `/api/v1/namespaces/NS/{services,pods}/ID/proxy[/REST]`.
pub fn parse_path(path: &str) -> Option<ProxyPath> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (namespace, rest) = rest.split_once('/')?;
    let (plural, rest) = rest.split_once('/')?;
    let through = match plural {
        "services" => Through::Service,
        "pods" => Through::Pod,
        _ => return None,
    };
    let (id, rest) = rest.split_once('/')?;
    let tail = rest.strip_prefix("proxy")?;
    if namespace.is_empty() || id.is_empty() || !(tail.is_empty() || tail.starts_with('/')) {
        return None;
    }
    Some(ProxyPath {
        through,
        namespace: namespace.to_string(),
        id: percent_encoding::percent_decode_str(id)
            .decode_utf8_lossy()
            .into_owned(),
        rest: tail.to_string(),
    })
}

/// The scheme the proxy speaks to the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// The port of a URL without one (Go's defaults).
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A proxy id: `NAME`, `NAME:PORT` or `SCHEME:NAME:PORT` (scheme `http`, `https` or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyId {
    pub scheme: Scheme,
    pub name: String,
    /// A port number or name; empty when not given.
    pub port: String,
}

/// Splits an id as upstream's `SplitSchemeNamePort` does (`None`: invalid).
pub fn split_id(id: &str) -> Option<ProxyId> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    let scheme = match scheme {
        "" | "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return None,
    };
    if name.is_empty() {
        return None;
    }
    Some(ProxyId {
        scheme,
        name: name.to_string(),
        port: port.to_string(),
    })
}

/// A backend address: a pod's IP and a port, and the pod, whose node's agent dials it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    pub ip: IpAddr,
    pub port: u16,
    pub pod: String,
}

/// The name of the Endpoints port a Service proxy request uses: a port number is the Service
/// port declaring it (its name), anything else is a port name already.
pub fn service_port_name(service: &Value, id: &ProxyId) -> Result<String, ApiError> {
    let Ok(number) = id.port.parse::<i64>() else {
        return Ok(id.port.clone());
    };
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(number))
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .ok_or_else(|| {
            ApiError::ServiceUnavailable(format!(
                "no service port {number} found for service {:?}",
                id.name
            ))
        })
}

/// The addresses of `endpoints` (an Endpoints object in `namespace`) serving the port named
/// `port_name`, each backed by a pod (addresses without a pod target are skipped, as upstream
/// skips them); in the Endpoints' order.
pub fn endpoint_candidates(endpoints: &Value, namespace: &str, port_name: &str) -> Vec<Backend> {
    let mut out = Vec::new();
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let Some(port) = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for address in subset["addresses"].as_array().into_iter().flatten() {
            let target = &address["targetRef"];
            let is_pod = target["kind"].as_str().is_none_or(|k| k == "Pod")
                && target["namespace"].as_str().is_none_or(|n| n == namespace);
            let (Some(pod), Some(ip)) = (
                target["name"].as_str().filter(|_| is_pod),
                address["ip"].as_str().and_then(|ip| ip.parse().ok()),
            ) else {
                continue;
            };
            out.push(Backend {
                ip,
                port,
                pod: pod.to_string(),
            });
        }
    }
    out
}

/// Whether `pod` has the IP `ip` (upstream checks an endpoint's pod before using it).
pub fn pod_has_ip(pod: &Value, ip: IpAddr) -> bool {
    let ips = pod.pointer("/status/podIPs").and_then(Value::as_array);
    ips.into_iter()
        .flatten()
        .filter_map(|p| p["ip"].as_str())
        .chain(pod.pointer("/status/podIP").and_then(Value::as_str))
        .any(|p| p.parse::<IpAddr>().ok() == Some(ip))
}

/// The address of a `pods/proxy` request: the pod's IP and the id's port, else the first
/// container port the pod declares, else the scheme's default.
pub fn pod_backend(pod: &Value, id: &ProxyId) -> Result<Backend, ApiError> {
    let declared = || {
        pod.pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|c| c.pointer("/ports/0/containerPort").and_then(Value::as_u64))
    };
    let port = if id.port.is_empty() {
        declared()
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(id.scheme.default_port())
    } else {
        id.port.parse::<u16>().map_err(|_| {
            ApiError::ServiceUnavailable(format!(
                "error trying to reach service: dial tcp: address {}: unknown port",
                id.port
            ))
        })?
    };
    let ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .filter(is_global_unicast)
        .ok_or_else(|| ApiError::BadRequest("address not allowed".to_string()))?;
    Ok(Backend {
        ip,
        port,
        pod: id.name.clone(),
    })
}

/// Go's `IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or broadcast.
fn is_global_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unicast_link_local())
        }
    }
}

/// The RBAC verb of a proxy request: upstream's verb for the method (`HEAD` reads like
/// `GET`; other methods have none, which only a `*` rule grants).
pub fn verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The backend path for the rest of a proxy path: cleaned as Go's `path.Join` cleans (no
/// empty, `.` or `..` segments), keeping a trailing slash; empty for an empty rest (which
/// upstream answers with a redirect to `…/proxy/`).
pub fn backend_path(rest: &str) -> String {
    if rest.is_empty() {
        return String::new();
    }
    let mut segments: Vec<&str> = Vec::new();
    for s in rest.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut path = format!("/{}", segments.join("/"));
    if rest.ends_with('/') && !path.ends_with('/') {
        path.push('/');
    }
    path
}

#[cfg(test)]
mod tests;
