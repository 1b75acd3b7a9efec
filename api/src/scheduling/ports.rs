//! Host ports: which `hostPort`s a pod's containers claim and whether a claim conflicts with
//! the ports already claimed on a node (same port and protocol, on the same address or on the
//! wildcard address).

use k8s_openapi::api::core::v1 as core;

/// The wildcard host address a port binds when `hostIP` is empty.
pub const ANY_HOST_IP: &str = "0.0.0.0";

/// One claimed host port, with its address and protocol filled in (`0.0.0.0`, `TCP`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    pub fn new(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort {
            ip: if ip.is_empty() { ANY_HOST_IP } else { ip }.to_string(),
            protocol: if protocol.is_empty() { "TCP" } else { protocol }.to_string(),
            port,
        }
    }

    /// Whether this claim and `other` cannot both be held on one node: same port and protocol,
    /// and the same address or either one the wildcard.
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == ANY_HOST_IP || other.ip == ANY_HOST_IP)
    }
}

/// The host ports claimed by `ports` (the container ports of a pod's app containers); ports
/// without a positive `hostPort` claim nothing.
pub fn host_ports<'a>(ports: impl IntoIterator<Item = &'a core::ContainerPort>) -> Vec<HostPort> {
    ports
        .into_iter()
        .filter_map(|p| {
            let port = p.host_port.filter(|hp| *hp > 0)?;
            Some(HostPort::new(
                p.host_ip.as_deref().unwrap_or_default(),
                p.protocol.as_deref().unwrap_or_default(),
                port,
            ))
        })
        .collect()
}

/// The host ports a pod claims (its app containers' ports, as upstream counts them).
pub fn pod_host_ports(spec: &core::PodSpec) -> Vec<HostPort> {
    host_ports(
        spec.containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten()),
    )
}

/// Whether any of `wanted` conflicts with any of `used`.
pub fn any_conflict(used: &[HostPort], wanted: &[HostPort]) -> bool {
    wanted
        .iter()
        .any(|w| used.iter().any(|u| u.conflicts_with(w)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_conflict_on_port_protocol_and_overlapping_address() {
        let hp = HostPort::new;
        let cases = [
            ("same everything", hp("", "", 80), hp("", "TCP", 80), true),
            ("another port", hp("", "", 80), hp("", "", 81), false),
            (
                "another protocol",
                hp("", "TCP", 53),
                hp("", "UDP", 53),
                false,
            ),
            (
                "wildcard against a specific address",
                hp("", "", 80),
                hp("10.0.0.1", "", 80),
                true,
            ),
            (
                "a specific address against the wildcard",
                hp("10.0.0.1", "", 80),
                hp("0.0.0.0", "", 80),
                true,
            ),
            (
                "two different addresses",
                hp("10.0.0.1", "", 80),
                hp("10.0.0.2", "", 80),
                false,
            ),
            (
                "the same address",
                hp("10.0.0.1", "", 80),
                hp("10.0.0.1", "TCP", 80),
                true,
            ),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(a.conflicts_with(&b), want, "{name}");
            assert_eq!(b.conflicts_with(&a), want, "{name} (reversed)");
        }
    }

    #[test]
    fn only_positive_host_ports_of_app_containers_are_claimed() {
        let spec: core::PodSpec = serde_json::from_value(json!({
            "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 1}]}],
            "containers": [{"name": "a", "ports": [
                {"containerPort": 80, "hostPort": 8080},
                {"containerPort": 81},
                {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
            ]}],
        }))
        .unwrap();
        assert_eq!(
            pod_host_ports(&spec),
            vec![
                HostPort::new("", "", 8080),
                HostPort::new("10.0.0.1", "UDP", 53)
            ]
        );
    }
}
