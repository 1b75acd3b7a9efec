//! The CNI plugin configurations for a pod (pure): loopback, then bridge + host-local and,
//! when the pod asks for host ports, portmap.

use std::net::Ipv4Addr;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::NetworkConfig;

/// The CNI spec version we speak to the plugins.
pub(crate) const CNI_VERSION: &str = "1.0.0";

/// A host port forwarded to the pod (a container port with `hostPort` set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPort {
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: PortProtocol,
    /// Only forward traffic addressed to this host address (`hostIP`); all when `None`.
    pub host_ip: Option<Ipv4Addr>,
}

/// Transport protocol of a forwarded port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortProtocol {
    Tcp,
    Udp,
    Sctp,
}

impl PortProtocol {
    fn cni_name(self) -> &'static str {
        match self {
            PortProtocol::Tcp => "tcp",
            PortProtocol::Udp => "udp",
            PortProtocol::Sctp => "sctp",
        }
    }
}

/// One interface in the pod's netns, made by a list of plugins run in order (a CNI "conflist").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Attachment {
    pub if_name: String,
    /// Complete plugin configurations (with `cniVersion`, `name`, `runtimeConfig`), in ADD order.
    pub plugins: Vec<Value>,
}

/// Where host-local keeps its allocations (one file per IP, under `<dir>/<network name>/`).
pub(crate) fn ipam_dir(state_dir: &Path) -> std::path::PathBuf {
    state_dir.join("ipam")
}

/// The pod's attachments in ADD order: `lo` (loopback), then `eth0` (bridge [+ portmap]).
pub(crate) fn attachments(cfg: &NetworkConfig, host_ports: &[HostPort]) -> Vec<Attachment> {
    let loopback = json!({
        "cniVersion": CNI_VERSION,
        "name": cfg.network_name,
        "type": "loopback",
    });
    let mut bridge = json!({
        "cniVersion": CNI_VERSION,
        "name": cfg.network_name,
        "type": "bridge",
        "bridge": cfg.bridge,
        "isGateway": true,
        "ipMasq": false,
        "hairpinMode": true,
        "ipam": {
            "type": "host-local",
            "ranges": [[{ "subnet": cfg.pod_cidr }]],
            "routes": [{ "dst": "0.0.0.0/0" }],
            "dataDir": ipam_dir(&cfg.state_dir),
        },
    });
    if let Some(mtu) = cfg.mtu {
        bridge["mtu"] = json!(mtu);
    }
    let mut eth0 = vec![bridge];
    if !host_ports.is_empty() {
        let mappings: Vec<Value> = host_ports
            .iter()
            .map(|p| {
                json!({
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    "protocol": p.protocol.cni_name(),
                    "hostIP": p.host_ip.map(|ip| ip.to_string()).unwrap_or_default(),
                })
            })
            .collect();
        eth0.push(json!({
            "cniVersion": CNI_VERSION,
            "name": cfg.network_name,
            "type": "portmap",
            "capabilities": { "portMappings": true },
            "snat": true,
            "runtimeConfig": { "portMappings": mappings },
        }));
    }
    vec![
        Attachment {
            if_name: "lo".into(),
            plugins: vec![loopback],
        },
        Attachment {
            if_name: "eth0".into(),
            plugins: eth0,
        },
    ]
}

/// The plugin's `type` (its binary name); empty when missing.
pub(crate) fn plugin_type(conf: &Value) -> &str {
    conf.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// A plugin configuration with `prevResult` set (chained ADD, and every DEL).
pub(crate) fn with_prev_result(conf: &Value, prev: Option<&Value>) -> Value {
    let mut conf = conf.clone();
    if let (Some(prev), Some(map)) = (prev, conf.as_object_mut()) {
        map.insert("prevResult".into(), prev.clone());
    }
    conf
}

/// `CNI_ARGS` as kubelets pass it, so plugins that care can tell which pod this is.
pub(crate) fn cni_args(namespace: &str, name: &str, uid: &str) -> String {
    format!(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name};\
         K8S_POD_INFRA_CONTAINER_ID={uid};K8S_POD_UID={uid}"
    )
}

/// The host ports a pod asks for: every container (and init container) port with a
/// `hostPort`, as the kubelet collects them.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    let mut out = Vec::new();
    for port in containers.flat_map(|c| c.ports.iter().flatten()) {
        let Some(host_port) = port.host_port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        let Ok(container_port) = u16::try_from(port.container_port) else {
            continue;
        };
        if host_port == 0 {
            continue;
        }
        let protocol = match port.protocol.as_deref() {
            Some("UDP") => PortProtocol::Udp,
            Some("SCTP") => PortProtocol::Sctp,
            _ => PortProtocol::Tcp,
        };
        let host_ip = port.host_ip.as_deref().and_then(|ip| ip.parse().ok());
        out.push(HostPort {
            host_port,
            container_port,
            protocol,
            host_ip,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::config::example;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    #[test]
    fn a_pod_without_host_ports_gets_loopback_then_bridge_with_host_local() {
        let att = attachments(&example(), &[]);
        assert_eq!(att.len(), 2);
        assert_eq!(att[0].if_name, "lo");
        assert_eq!(plugin_type(&att[0].plugins[0]), "loopback");
        assert_eq!(att[1].if_name, "eth0");
        assert_eq!(att[1].plugins.len(), 1);
        let bridge = &att[1].plugins[0];
        assert_eq!(bridge["cniVersion"], "1.0.0");
        assert_eq!(bridge["name"], "berth-node1");
        assert_eq!(bridge["bridge"], "berth0");
        assert_eq!(bridge["isGateway"], true);
        assert!(
            bridge.get("mtu").is_none(),
            "the bridge's own MTU by default"
        );
        assert_eq!(
            bridge["ipMasq"], false,
            "the node masquerades, not a chain per pod"
        );
        assert_eq!(bridge["hairpinMode"], true);
        assert_eq!(bridge["ipam"]["type"], "host-local");
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.42.1.0/24");
        assert_eq!(bridge["ipam"]["routes"][0]["dst"], "0.0.0.0/0");
        assert_eq!(
            bridge["ipam"]["dataDir"],
            "/var/lib/berth/agent/network/ipam"
        );
    }

    #[test]
    fn host_ports_chain_portmap_after_bridge_with_runtime_config() {
        let ports = [HostPort {
            host_port: 8080,
            container_port: 80,
            protocol: PortProtocol::Tcp,
            host_ip: Some(Ipv4Addr::new(192, 0, 2, 1)),
        }];
        let att = attachments(&example(), &ports);
        let portmap = &att[1].plugins[1];
        assert_eq!(plugin_type(portmap), "portmap");
        assert_eq!(portmap["capabilities"]["portMappings"], true);
        assert_eq!(
            portmap["runtimeConfig"]["portMappings"],
            json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "192.0.2.1"}])
        );
    }

    #[test]
    fn prev_result_is_added_without_touching_the_original() {
        let conf = json!({"type": "bridge"});
        let prev = json!({"ips": []});
        let with = with_prev_result(&conf, Some(&prev));
        assert_eq!(with["prevResult"], prev);
        assert!(conf.get("prevResult").is_none());
        assert_eq!(with_prev_result(&conf, None), conf);
    }

    #[test]
    fn cni_args_carry_the_pod_identity_like_the_kubelet() {
        assert_eq!(
            cni_args("default", "web", "u1"),
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;\
             K8S_POD_INFRA_CONTAINER_ID=u1;K8S_POD_UID=u1"
        );
    }

    #[test]
    fn host_ports_come_from_ports_with_a_host_port_only() {
        let port = |container_port, host_port: Option<i32>, protocol: Option<&str>| ContainerPort {
            container_port,
            host_port,
            protocol: protocol.map(String::from),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![Container {
                    name: "side".into(),
                    ports: Some(vec![port(9000, Some(19000), Some("UDP"))]),
                    ..Default::default()
                }]),
                containers: vec![Container {
                    name: "web".into(),
                    ports: Some(vec![
                        port(80, Some(8080), None),
                        port(443, None, None),
                        port(53, Some(0), Some("UDP")),
                    ]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let got: Vec<(u16, u16, PortProtocol)> = host_ports(&pod)
            .into_iter()
            .map(|p| (p.host_port, p.container_port, p.protocol))
            .collect();
        assert_eq!(
            got,
            vec![
                (19000, 9000, PortProtocol::Udp),
                (8080, 80, PortProtocol::Tcp)
            ]
        );
    }
}
