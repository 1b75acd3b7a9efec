//! `berth-agent uninstall`: removes from the host everything a (stopped) agent made — its pod
//! containers, their cgroups (`/<containerd namespace>`: `kubepods` and its tiers), pod network
//! namespaces and addresses, bridge, iptables chains and rules (host,
//! masquerade, service proxy and network policy), routes to other nodes and the VXLAN device, and writes back
//! the `route_localnet` sysctl localhost NodePorts changed. The root and log
//! directories stay (they hold the node's credentials; remove them by hand when the node is
//! gone for good).

use std::path::{Path, PathBuf};

use crate::config::HostSetup;
use crate::network::{Network, NetworkConfig};
use crate::runtime::Runtime;

/// Where the agent keeps the pod CIDR it was given, for uninstall (`<root>/network/pod-cidr`).
pub fn pod_cidr_file(root_dir: &Path) -> PathBuf {
    crate::network::state_dir(root_dir).join("pod-cidr")
}

/// What uninstall needs to know: the agent's own flags.
#[derive(Debug, Clone)]
pub struct Uninstall {
    pub node_name: String,
    pub host: HostSetup,
}

#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error(transparent)]
    Network(#[from] crate::network::NetworkError),
    #[error(transparent)]
    Routes(#[from] crate::network::peers::netlink::NetlinkError),
}

/// Removes it all; returns one line per kind of thing removed. Steps that cannot run (no
/// containerd) are reported and skipped, not fatal: uninstall does what it can.
pub async fn run(u: &Uninstall) -> Result<Vec<String>, UninstallError> {
    let host = &u.host;
    let mut done = Vec::new();
    match Runtime::connect(&host.containerd_socket, &host.containerd_namespace).await {
        Ok(runtime) => match runtime.list().await {
            Ok(containers) => {
                let mut removed = 0;
                for c in containers {
                    match runtime.remove(&c.id).await {
                        Ok(()) => removed += 1,
                        Err(e) => done.push(format!("container {}: not removed: {e}", c.id)),
                    }
                }
                done.push(format!("{removed} containers removed"));
            }
            Err(e) => done.push(format!("containers not listed: {e}")),
        },
        Err(e) => done.push(format!("containerd not reachable, containers left: {e}")),
    }

    let cgroups = crate::node::cgroups::CgroupFs::host();
    match crate::node::qos_cgroups::QosCgroups::remove_all(&cgroups, &host.containerd_namespace) {
        Ok(()) => done.push(format!(
            "cgroups under /{} removed (kubepods and its QoS tiers)",
            host.containerd_namespace
        )),
        Err(e) => done.push(format!("cgroups not removed: {e}")),
    }

    let network_name = crate::network::network_name(&u.node_name);
    let pod_cidr = tokio::fs::read_to_string(pod_cidr_file(&host.root_dir))
        .await
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if pod_cidr.is_empty() {
        done.push("no recorded pod CIDR: pod networks and host rules not looked for".into());
    } else {
        let network = Network::new(NetworkConfig::for_node(host, &u.node_name, pod_cidr).await?);
        let pods = network.list().await?;
        for uid in &pods {
            network.teardown(uid).await?;
        }
        done.push(format!("{} pod networks removed", pods.len()));
        network.cleanup_host().await?;
        done.push(format!("bridge {} and host rules removed", host.cni_bridge));
    }
    crate::network::proxy::remove(&network_name).await?;
    done.push("service proxy rules removed".into());
    crate::network::policy::remove(&network_name).await?;
    done.push("network policy rules removed".into());
    if crate::network::proxy::localnet::restore_sysctl(&crate::network::state_dir(&host.root_dir))
        .await?
    {
        done.push("net.ipv4.conf.all.route_localnet written back".into());
    }
    let handle = crate::network::peers::netlink::connect()?;
    let routes = crate::network::peers::netlink::remove_all(
        &handle,
        &host.vxlan_device,
        std::net::Ipv4Addr::UNSPECIFIED,
    )
    .await?;
    done.push(format!(
        "{routes} routes and devices to other nodes removed"
    ));
    let addresses = crate::network::announce::remove_all(&handle).await?;
    done.push(format!("{addresses} load-balancer addresses removed"));
    Ok(done)
}
