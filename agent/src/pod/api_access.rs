//! Planner: pure, no I/O.
//!
//! How a pod reaches the API, as the kubelet arranges it: the `KUBERNETES_SERVICE_*` and
//! `KUBERNETES_PORT*` variables naming the API endpoint (until Services exist, a controller
//! address the pod can reach: the one the agent uses, or this node's address when the agent
//! talks to the controller over loopback), and the bound ServiceAccount tokens of projected
//! volumes (which token each volume needs, and when a token is due for renewal).

use berth_api::k8s_openapi::api::core::v1::Pod;

/// Where pods reach the API, from the agent's server URL and the node's address; when both
/// are loopback (a single-host setup), `host_ip`, an address of this host that pods reach.
pub fn endpoint(server_url: &str, node_ip: &str, host_ip: Option<&str>) -> Option<(String, u16)> {
    let rest = server_url.strip_prefix("https://")?;
    let authority = rest.split('/').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h.trim_matches(|c| c == '[' || c == ']'), p.parse().ok()?)
        }
        _ => (authority, 443),
    };
    let loopback = host == "localhost"
        || host
            .parse::<core::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let is_loopback = |ip: &str| {
        ip.is_empty()
            || ip
                .parse::<core::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    };
    let host = match (loopback, is_loopback(node_ip)) {
        (false, _) => host,
        (true, false) => node_ip,
        (true, true) => host_ip.filter(|h| !is_loopback(h))?,
    };
    Some((host.to_string(), port))
}

/// The kubelet's variables for the `kubernetes` service.
pub fn service_env(endpoint: &(String, u16)) -> Vec<(String, String)> {
    let (host, port) = endpoint;
    let url = format!("tcp://{host}:{port}");
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), host.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.to_string()),
        ("KUBERNETES_PORT".into(), url.clone()),
        (format!("KUBERNETES_PORT_{port}_TCP"), url),
        (format!("KUBERNETES_PORT_{port}_TCP_PROTO"), "tcp".into()),
        (format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.to_string()),
        (format!("KUBERNETES_PORT_{port}_TCP_ADDR"), host.clone()),
    ]
}

/// The kubelet's default lifetime for a projected token.
pub const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// A token a projected volume needs: for this audience and lifetime.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TokenNeed {
    pub audience: Option<String>,
    pub expiration_seconds: i64,
}

impl TokenNeed {
    /// The key of the token among a pod's tokens.
    pub fn key(&self) -> String {
        format!(
            "{}|{}",
            self.audience.as_deref().unwrap_or_default(),
            self.expiration_seconds
        )
    }
}

/// Every token the pod's projected volumes need, once each.
pub fn token_needs(pod: &Pod) -> Vec<TokenNeed> {
    let mut out: Vec<TokenNeed> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .filter_map(|s| s.service_account_token.as_ref())
        .map(|t| TokenNeed {
            audience: t.audience.clone().filter(|a| !a.is_empty()),
            expiration_seconds: t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The kubelet's renewal rule: a token is renewed once 80% of its lifetime has passed, or when
/// it is older than 24 hours (times in Unix seconds).
pub fn needs_renewal(issued_at: i64, expires_at: i64, now: i64) -> bool {
    let lifetime = expires_at - issued_at;
    now >= issued_at + lifetime * 4 / 5 || now - issued_at > 24 * 3600
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_reach_the_api_where_the_agent_does_unless_that_is_loopback() {
        let host = Some("192.0.2.7");
        let at = |h: &str, port| Some((h.to_string(), port));
        #[rustfmt::skip]
        let cases = [
            ("https://10.0.0.5:6443", "10.0.0.9", at("10.0.0.5", 6443)),
            ("https://127.0.0.1:41000", "10.0.0.9", at("10.0.0.9", 41000)),
            ("https://localhost:6443/", "10.0.0.9", at("10.0.0.9", 6443)),
            ("https://api.example", "10.0.0.9", at("api.example", 443)),
            // Everything on loopback (one host): the host's own address.
            ("https://127.0.0.1:41000", "127.0.0.1", at("192.0.2.7", 41000)),
        ];
        for (server, agent, want) in cases {
            assert_eq!(endpoint(server, agent, host), want, "{server} from {agent}");
        }
        assert_eq!(endpoint("https://[::1]:6443", "", None), None);
    }

    #[test]
    fn the_service_variables_name_host_and_port_as_the_kubelet_does() {
        let env = service_env(&("10.0.0.9".into(), 6443));
        assert!(env.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.0.0.9".into())));
        assert!(env.contains(&("KUBERNETES_SERVICE_PORT".into(), "6443".into())));
        assert!(env.contains(&(
            "KUBERNETES_PORT_6443_TCP".into(),
            "tcp://10.0.0.9:6443".into()
        )));
    }

    #[test]
    fn each_distinct_token_is_needed_once() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [], "volumes": [
            {"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}},
            {"name": "b", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3607}},
                                                    {"serviceAccountToken": {"path": "v", "audience": "vault"}}]}}]}}))
        .unwrap();
        let needs = token_needs(&pod);
        assert_eq!(needs.len(), 2);
        assert_eq!(needs[0].key(), "|3607");
        assert_eq!(needs[1].key(), "vault|3600");
    }

    #[test]
    fn tokens_are_renewed_after_four_fifths_of_their_life_or_a_day() {
        assert!(!needs_renewal(0, 3600, 2879));
        assert!(needs_renewal(0, 3600, 2880));
        assert!(!needs_renewal(0, 7 * 24 * 3600, 24 * 3600));
        assert!(needs_renewal(0, 7 * 24 * 3600, 24 * 3600 + 1));
    }
}
