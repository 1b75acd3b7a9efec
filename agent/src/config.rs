//! The agent's configuration, as its flags give it.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// Where the agent keeps its state and what it makes on the host (containers, the pod bridge,
/// routes): what `berth-agent uninstall`, given the same flags, needs to find it all again.
#[derive(Debug, Clone)]
pub struct HostSetup {
    pub root_dir: PathBuf,
    pub containerd_socket: PathBuf,
    pub containerd_namespace: String,
    pub cni_bridge: String,
    pub cni_bin_dir: PathBuf,
    pub cluster_cidr: String,
    /// The VXLAN device's name (`--vxlan-device`).
    pub vxlan_device: String,
}

/// Everything `berth-agent` is told at start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The controllers, `https://host:6443` each (at least one), in the order they are tried.
    pub servers: Vec<String>,
    /// The join token (`K10<ca-hash>::node:<secret>`); needed until the node has credentials.
    pub token: Option<String>,
    pub node_name: String,
    /// Its state directory and what it makes on the host.
    pub host: HostSetup,
    /// Where local-path PersistentVolumes of this node live (`--local-path-dir`, default
    /// `<root_dir>/storage`); published on the Node for the provisioner.
    pub local_path_dir: PathBuf,
    pub listen: SocketAddr,
    pub node_labels: String,
    pub register_with_taints: String,
    pub registries_config: PathBuf,
    pub max_pods: u32,
    /// Container logs: `<log_dir>/<ns>_<pod>_<uid>/<container>/<restart>.log`.
    pub log_dir: PathBuf,
    /// The crash-loop back-off's cap (`--max-container-restart-period`, the kubelet's
    /// `crashLoopBackOff.maxContainerRestartPeriod`) and first delay.
    pub crash_loop_backoff: crate::pod::CrashLoopBackOff,
    /// A container's log file is rotated when it grows past this many bytes.
    pub container_log_max_bytes: u64,
    /// At most this many files per container log, the live one included
    /// (`--container-log-max-files`, at least 2).
    pub container_log_max_files: usize,
    /// Image garbage collection (`--image-gc-high-threshold`, `--image-gc-low-threshold`,
    /// `--image-minimum-gc-age`, `--image-maximum-gc-age`).
    pub image_gc: crate::gc::ImageGcPolicy,
    /// The address reported as the node's InternalIP (default: the default-route interface's).
    pub node_ip: Option<String>,
    /// Hard eviction thresholds (`--eviction-hard`), which raise the pressure conditions.
    pub eviction_hard: crate::node::pressure::Thresholds,
    /// The eviction manager's thresholds (hard and soft), grace periods, transition period and
    /// housekeeping interval.
    pub eviction: crate::eviction::Settings,
    /// How pods reach other nodes' pods (`--pod-network`).
    pub pod_network: crate::network::peers::plan::PodNetworkMode,
    /// The cluster domain (`--cluster-domain`), lower case, without the final dot.
    pub cluster_domain: String,
    /// The cluster DNS address pods are given (`--cluster-dns`); `None`: this node's pod
    /// gateway. The agent serves cluster DNS on it when the node holds it.
    pub cluster_dns: Option<Ipv4Addr>,
    /// NodePorts answer on 127.0.0.0/8 (`--iptables-localhost-nodeports`, kube-proxy's flag);
    /// sets `net.ipv4.conf.all.route_localnet=1`.
    pub iptables_localhost_nodeports: bool,
    /// `RuntimeDefault` seccomp for containers that ask for no profile (`--seccomp-default`,
    /// the kubelet's flag; on in Berth).
    pub seccomp_default: bool,
    /// Sysctls pods may set beyond the safe set (`--allowed-unsafe-sysctls`: names, or
    /// prefixes ending in `*`).
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Resources held back for the OS (`--system-reserved`).
    pub system_reserved: crate::node::allocatable::Reserved,
    /// Resources held back for the agent and containerd (`--kube-reserved`).
    pub kube_reserved: crate::node::allocatable::Reserved,
    /// `pids.max` of each pod's cgroup (`--pod-max-pids`, the kubelet's `podPidsLimit`; -1:
    /// unlimited).
    pub pod_max_pids: i64,
    /// The built-in Ingress proxy's host ports (`--ingress-http-port`, `--ingress-https-port`).
    pub ingress: crate::ingress::IngressConfig,
}
