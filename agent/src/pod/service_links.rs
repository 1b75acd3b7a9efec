//! Planner: pure, no I/O.
//!
//! The kubelet's service environment variables (`enableServiceLinks`, on by default): for each
//! Service of the pod's namespace with a cluster IP, `<NAME>_SERVICE_HOST`,
//! `<NAME>_SERVICE_PORT` (the first port), `<NAME>_SERVICE_PORT_<PORTNAME>` for named ports and
//! the Docker link variables (`<NAME>_PORT`, `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`).
//! The `kubernetes` Service's variables are [`super::api_access::service_env`]'s.

use berth_api::k8s_openapi::api::core::v1::Service;

/// A Service name as a variable name: upper case, `-` → `_`.
fn var_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// The variables for `services` (those of the pod's namespace), ordered by Service name.
/// Headless Services and ones without an address or ports have none; so has `kubernetes` in
/// `default`, whose variables name the API endpoint pods can reach.
pub fn variables(namespace: &str, services: &[Service]) -> Vec<(String, String)> {
    let mut sorted: Vec<&Service> = services.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Vec::new();
    for svc in sorted {
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let Some(spec) = &svc.spec else { continue };
        let ip = spec.cluster_ip.as_deref().unwrap_or_default();
        let ports = spec.ports.as_deref().unwrap_or_default();
        if ip.is_empty() || ip == "None" || ports.is_empty() || name.is_empty() {
            continue;
        }
        if namespace == "default" && name == "kubernetes" {
            continue;
        }
        let prefix = var_name(name);
        out.push((format!("{prefix}_SERVICE_HOST"), ip.to_string()));
        out.push((format!("{prefix}_SERVICE_PORT"), ports[0].port.to_string()));
        for p in ports {
            if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((
                    format!("{prefix}_SERVICE_PORT_{}", var_name(port_name)),
                    p.port.to_string(),
                ));
            }
        }
        for (i, p) in ports.iter().enumerate() {
            let protocol = p.protocol.as_deref().unwrap_or("TCP");
            let lower = protocol.to_ascii_lowercase();
            let host_port = if ip.contains(':') {
                format!("[{ip}]:{}", p.port)
            } else {
                format!("{ip}:{}", p.port)
            };
            let url = format!("{lower}://{host_port}");
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_ascii_uppercase());
            out.push((port_prefix.clone(), url));
            out.push((format!("{port_prefix}_PROTO"), lower));
            out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
            out.push((format!("{port_prefix}_ADDR"), ip.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(name: &str, spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    }

    #[test]
    fn a_service_gets_the_kubelets_host_port_and_docker_link_variables() {
        let services = [svc(
            "my-web",
            json!({"clusterIP": "10.43.0.10", "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        )];
        let vars = variables("shop", &services);
        let want: Vec<(String, String)> = [
            ("MY_WEB_SERVICE_HOST", "10.43.0.10"),
            ("MY_WEB_SERVICE_PORT", "80"),
            ("MY_WEB_SERVICE_PORT_HTTP", "80"),
            ("MY_WEB_SERVICE_PORT_DNS", "53"),
            ("MY_WEB_PORT", "tcp://10.43.0.10:80"),
            ("MY_WEB_PORT_80_TCP", "tcp://10.43.0.10:80"),
            ("MY_WEB_PORT_80_TCP_PROTO", "tcp"),
            ("MY_WEB_PORT_80_TCP_PORT", "80"),
            ("MY_WEB_PORT_80_TCP_ADDR", "10.43.0.10"),
            ("MY_WEB_PORT_53_UDP", "udp://10.43.0.10:53"),
            ("MY_WEB_PORT_53_UDP_PROTO", "udp"),
            ("MY_WEB_PORT_53_UDP_PORT", "53"),
            ("MY_WEB_PORT_53_UDP_ADDR", "10.43.0.10"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(vars, want);
    }

    #[test]
    fn headless_services_and_the_kubernetes_service_in_default_get_none() {
        let services = [
            svc(
                "nginx",
                json!({"clusterIP": "None", "ports": [{"port": 80}]}),
            ),
            svc(
                "kubernetes",
                json!({"clusterIP": "10.43.0.1", "ports": [{"port": 443}]}),
            ),
            svc("pending", json!({"ports": [{"port": 80}]})),
        ];
        assert_eq!(variables("default", &services), vec![]);
        // In another namespace a Service called kubernetes is just a Service.
        assert_eq!(variables("other", &services[1..2]).len(), 7);
    }
}
