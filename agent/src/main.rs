//! `berth-agent`: parses flags and runs the node agent, or manages images for air-gapped hosts.

use anyhow::Context;
use berth_agent::config::{Config, HostSetup};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
// As the kubelet's flags: a flag given twice takes its last value (a wrapper may append).
#[command(
    name = "berth-agent",
    version,
    about = "Berth's node agent",
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
    /// Log verbosity, as the kubelet's `-v`: 0–1 info, 2–3 debug, 4 and up trace. `BERTH_LOG`
    /// or `RUST_LOG` (tracing filter directives) win over it.
    #[arg(long = "v", global = true, default_value_t = 0)]
    v: u8,
    /// Log lines as text, or as one JSON object each.
    #[arg(long, global = true, default_value = "text", value_parser = berth_api::logging::FORMATS)]
    log_format: String,
}

#[derive(Subcommand)]
enum Command {
    /// Manage images in containerd (for hosts without registry access).
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Remove from this host what the (stopped) agent made: pod containers, pod networks, the
    /// bridge, iptables rules, routes to other nodes, the VXLAN device. Give the flags the
    /// agent ran with (node name, root dir, bridge, containerd namespace …).
    Uninstall,
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Import an OCI layout (directory or tar) or a `docker save` tarball.
    Import { file: PathBuf },
    /// Pull an image through the registries file (mirrors, credentials), as a pod's
    /// `imagePullPolicy: Always` would: `crictl pull` for the agent's namespace.
    Pull { reference: String },
    /// List the images containerd holds for the agent.
    Ls,
}

#[derive(Args)]
struct RunArgs {
    /// The controller's URL; repeat the flag (or give a comma-separated list) for several
    /// controllers of one cluster: the agent uses the first that answers and fails over to
    /// the next when it stops answering.
    #[arg(long, global = true, value_delimiter = ',')]
    server: Vec<String>,
    /// The join token (see `berth-controller token`).
    #[arg(long)]
    token: Option<String>,
    /// A file holding the join token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The node's name (default: the hostname).
    #[arg(long, global = true)]
    node_name: Option<String>,
    #[arg(long, global = true, default_value = "/var/lib/berth/agent")]
    root_dir: PathBuf,
    /// Where the local-path provisioner's volumes of this node live (default:
    /// `<root-dir>/storage`); published on the Node as `storage.berth.io/local-path-dir`.
    #[arg(long)]
    local_path_dir: Option<PathBuf>,
    #[arg(long, global = true, default_value = "/run/containerd/containerd.sock")]
    containerd_socket: PathBuf,
    #[arg(long, global = true, default_value = "berth")]
    containerd_namespace: String,
    #[arg(long, global = true, default_value = "berth0")]
    cni_bridge: String,
    #[arg(long, global = true, default_value = "/usr/lib/cni")]
    cni_bin_dir: PathBuf,
    /// The cluster's pod range (traffic inside it is not masqueraded).
    #[arg(long, global = true, default_value = "10.42.0.0/16")]
    cluster_cidr: String,
    /// Where the logs and exec server listens.
    #[arg(long, default_value = "0.0.0.0:10250")]
    listen: SocketAddr,
    /// Extra node labels, `k=v,...`.
    #[arg(long, default_value = "")]
    node_labels: String,
    /// Taints to register with, `k=v:Effect,...`.
    #[arg(long, default_value = "")]
    register_with_taints: String,
    #[arg(long, global = true, default_value = "/etc/berth/registries.yaml")]
    registries_config: PathBuf,
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    #[arg(long, default_value = "/var/log/pods")]
    log_dir: PathBuf,
    /// The cap of the crash-loop back-off between restarts of a failing container (a Go
    /// duration, 1s–300s; the kubelet's `crashLoopBackOff.maxContainerRestartPeriod`): delays
    /// start at 10s (or at the cap, when it is lower) and double up to it.
    #[arg(long, default_value = "300s", value_parser = parse_max_restart_period)]
    max_container_restart_period: berth_agent::pod::CrashLoopBackOff,
    /// A container's log file is rotated past this size (a quantity, as the kubelet's
    /// `containerLogMaxSize`).
    #[arg(long, default_value = "10Mi", value_parser = parse_size)]
    container_log_max_size: u64,
    /// At most this many log files per container, the live one included (the kubelet's
    /// `containerLogMaxFiles`; at least 2): older rotated files are gzipped, the oldest deleted.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..))]
    container_log_max_files: u64,
    /// Image GC starts when the image filesystem's usage reaches this percentage (100: never).
    #[arg(long, default_value_t = 85, value_parser = clap::value_parser!(u8).range(0..=100))]
    image_gc_high_threshold: u8,
    /// Image GC frees space down to this percentage of the image filesystem.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u8).range(0..=100))]
    image_gc_low_threshold: u8,
    /// An unused image younger than this is not garbage-collected (a Go duration).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    image_minimum_gc_age: std::time::Duration,
    /// Unused images not used for this long are garbage-collected whatever the disk usage
    /// (a Go duration; 0: never).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    image_maximum_gc_age: std::time::Duration,
    /// The node's InternalIP (default: the address of the interface holding the default
    /// route, as the kubelet picks it).
    #[arg(long)]
    node_ip: Option<String>,
    /// Hard eviction thresholds, the kubelet's flag and syntax (`signal<quantity` or
    /// `signal<percent`, comma-separated); given, it replaces the defaults entirely.
    #[arg(long, default_value = berth_agent::node::pressure::DEFAULT_EVICTION_HARD,
          value_parser = berth_agent::node::pressure::Thresholds::parse)]
    eviction_hard: berth_agent::node::pressure::Thresholds,
    /// Soft eviction thresholds, the kubelet's syntax; each needs a grace period in
    /// `--eviction-soft-grace-period`.
    #[arg(long, default_value = "", value_parser = berth_agent::node::pressure::Thresholds::parse)]
    eviction_soft: berth_agent::node::pressure::Thresholds,
    /// How long a soft threshold must be crossed before pods are evicted for it
    /// (`memory.available=1m30s,…`).
    #[arg(long, default_value = "")]
    eviction_soft_grace_period: String,
    /// What an eviction must free beyond its threshold (`memory.available=0Mi,nodefs.available=500Mi,…`).
    #[arg(long, default_value = "")]
    eviction_minimum_reclaim: String,
    /// The longest grace period, in seconds, a pod evicted for a soft threshold gets.
    #[arg(long, default_value_t = 0)]
    eviction_max_pod_grace_period: i64,
    /// How long a pressure condition stays after its thresholds stop being met.
    #[arg(long, default_value = berth_agent::eviction::config::DEFAULT_TRANSITION_PERIOD,
          value_parser = berth_agent::eviction::config::parse_duration)]
    eviction_pressure_transition_period: jiff::SignedDuration,
    /// How often the eviction manager observes the node (its monitoring interval).
    #[arg(long, default_value = berth_agent::eviction::config::DEFAULT_HOUSEKEEPING_INTERVAL,
          value_parser = berth_agent::eviction::config::parse_duration)]
    housekeeping_interval: jiff::SignedDuration,
    /// How pods reach pods on other nodes: `host-gw` (a route via the peer's address; peers
    /// must share a segment), `vxlan` (a VXLAN tunnel to every peer), or `auto` (host-gw to
    /// peers on a shared segment, VXLAN to the others).
    #[arg(long, default_value = "auto")]
    pod_network: berth_agent::network::peers::plan::PodNetworkMode,
    /// The VXLAN device (VNI 1, UDP port 8472) made when a peer needs it.
    #[arg(long, global = true, default_value = "berth.1")]
    vxlan_device: String,
    /// The cluster's DNS domain: pods search `<ns>.svc.<domain>`, and the agent's DNS server
    /// answers for it.
    #[arg(long, default_value = "cluster.local", value_parser = parse_domain)]
    cluster_domain: String,
    /// The DNS server address pods are given. Default: this node's pod gateway (the first
    /// address of its pod CIDR, on the CNI bridge), where the agent serves cluster DNS. Given
    /// an address the node holds, the agent serves there instead; any other address is only
    /// handed to pods (a DNS server elsewhere answers on it).
    #[arg(long)]
    cluster_dns: Option<std::net::Ipv4Addr>,
    /// NodePorts answer on 127.0.0.0/8 as on the node's addresses (kube-proxy's flag; sets
    /// `net.ipv4.conf.all.route_localnet=1`). `--iptables-localhost-nodeports=false` turns it
    /// off and writes back the value the agent changed.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    iptables_localhost_nodeports: bool,
    /// Containers that set no `seccompProfile` run under `RuntimeDefault` (the kubelet's flag;
    /// on by default in Berth). `--seccomp-default=false` leaves them unconfined.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    seccomp_default: bool,
    /// Sysctls pods may set besides the safe set, comma-separated: names, or prefixes ending in
    /// `*` (`kernel.msg*,net.core.somaxconn`); each must be namespaced (the kubelet's flag).
    #[arg(long, value_delimiter = ',')]
    allowed_unsafe_sysctls: Vec<String>,
    /// Resources reserved for the OS's daemons, the kubelet's flag and syntax
    /// (`cpu=500m,memory=1Gi,ephemeral-storage=1Gi,pid=1000`): left out of the Node's
    /// allocatable and of the `kubepods` cgroup.
    #[arg(long, default_value = "", value_parser = berth_agent::node::allocatable::Reserved::parse)]
    system_reserved: berth_agent::node::allocatable::Reserved,
    /// Resources reserved for the agent and containerd, as `--system-reserved`.
    #[arg(long, default_value = "", value_parser = berth_agent::node::allocatable::Reserved::parse)]
    kube_reserved: berth_agent::node::allocatable::Reserved,
    /// The most processes one pod may run (`pids.max` of its cgroup; the kubelet's
    /// `podPidsLimit`); -1: unlimited.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pod_max_pids: i64,
    /// The host port the built-in Ingress proxy serves plain HTTP on, on every address of the
    /// node (0: off). A port the agent cannot bind is a warning, not a failure.
    #[arg(long, default_value_t = 80)]
    ingress_http_port: u16,
    /// The host port the built-in Ingress proxy serves HTTPS on, terminating TLS with the
    /// Ingresses' `kubernetes.io/tls` Secrets (0: off).
    #[arg(long, default_value_t = 443)]
    ingress_https_port: u16,
    /// Serve ingress only if the Node carries this label (`KEY`, any value, or `KEY=VALUE`)
    /// when the agent starts: the Node's labels then, and `--node-labels`.
    #[arg(long)]
    ingress_node_label: Option<String>,
}

/// A DNS domain such as `cluster.local` (lower-cased, without the final dot).
fn parse_domain(s: &str) -> Result<String, String> {
    let d = berth_agent::network::cluster_dns::normalize_domain(s);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if d.len() <= 253 && d.split('.').all(label_ok) {
        Ok(d)
    } else {
        Err(format!("{s}: not a DNS domain"))
    }
}

/// A Go duration such as `2m`, `1h30m` or `0`, not negative.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    berth_agent::gc::parse_go_duration(s).ok_or_else(|| format!("{s}: not a duration"))
}

/// `--max-container-restart-period`: a Go duration within 1s and 300s.
fn parse_max_restart_period(s: &str) -> Result<berth_agent::pod::CrashLoopBackOff, String> {
    berth_agent::pod::CrashLoopBackOff::with_max_restart_period(parse_duration(s)?)
}

/// A positive byte size such as `10Mi` or `4096`.
fn parse_size(s: &str) -> Result<u64, String> {
    let q = berth_api::quantity::Quantity::parse(s)?;
    u64::try_from(q.value())
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{s}: must be a positive size"))
}

impl RunArgs {
    /// `--node-name`, else the host name; lower case either way.
    fn node_name(&self) -> String {
        self.node_name
            .clone()
            .unwrap_or_else(berth_agent::node::host::hostname)
            .to_lowercase()
    }

    /// The flags that say where the agent keeps state and what it makes on the host: the
    /// agent runs with them and `uninstall` finds what it made by them.
    fn host(&self) -> HostSetup {
        HostSetup {
            root_dir: self.root_dir.clone(),
            containerd_socket: self.containerd_socket.clone(),
            containerd_namespace: self.containerd_namespace.clone(),
            cni_bridge: self.cni_bridge.clone(),
            cni_bin_dir: self.cni_bin_dir.clone(),
            cluster_cidr: self.cluster_cidr.clone(),
            vxlan_device: self.vxlan_device.clone(),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    berth_api::logging::init(cli.v, &cli.log_format);
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    let a = cli.run;
    match cli.command {
        Some(Command::Image { command }) => runtime.block_on(async move {
            let rt = berth_agent::runtime::Runtime::connect(
                &a.containerd_socket,
                &a.containerd_namespace,
            )
            .await
            .context("connecting to containerd")?;
            let registries =
                berth_agent::image::ImageService::load_registries(&a.registries_config)
                    .context("reading the registries file")?;
            let images = berth_agent::image::ImageService::new(rt, registries);
            match command {
                ImageCommand::Import { file } => {
                    for img in images.import(&file).await.context("importing")? {
                        println!("imported {} ({})", img.name, img.digest);
                    }
                }
                ImageCommand::Pull { reference } => {
                    let img = images
                        .pull(&reference, berth_agent::image::PullPolicy::Always)
                        .await
                        .with_context(|| format!("pulling {reference}"))?;
                    println!("pulled {} ({})", img.name, img.digest);
                }
                ImageCommand::Ls => {
                    println!("{:<60} {:<20} {:>12}", "IMAGE", "DIGEST", "SIZE");
                    for img in images.list().await.context("listing")? {
                        let short = img
                            .digest
                            .trim_start_matches("sha256:")
                            .chars()
                            .take(12)
                            .collect::<String>();
                        println!(
                            "{:<60} sha256:{:<13} {:>12}",
                            img.name, short, img.size_bytes
                        );
                    }
                }
            }
            Ok(())
        }),
        Some(Command::Uninstall) => runtime.block_on(async move {
            let done = berth_agent::uninstall::run(&berth_agent::uninstall::Uninstall {
                node_name: a.node_name(),
                host: a.host(),
            })
            .await
            .context("uninstalling")?;
            for line in done {
                println!("{line}");
            }
            Ok(())
        }),
        None => {
            let (node_name, host) = (a.node_name(), a.host());
            let servers: Vec<String> = a
                .server
                .iter()
                .map(|s| s.trim().trim_end_matches('/').to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if servers.is_empty() {
                anyhow::bail!("--server is required");
            }
            let token = match (a.token, a.token_file) {
                (Some(t), _) => Some(t),
                (None, Some(f)) => Some(
                    std::fs::read_to_string(&f)
                        .with_context(|| format!("reading {}", f.display()))?
                        .trim()
                        .to_string(),
                ),
                (None, None) => None,
            };
            berth_agent::pod::host_security::check_sysctl_patterns(&a.allowed_unsafe_sysctls)
                .map_err(|e| anyhow::anyhow!("--allowed-unsafe-sysctls: {e}"))?;
            let eviction = {
                use berth_agent::eviction::config as ev;
                let grace = ev::parse_grace_periods(&a.eviction_soft_grace_period)
                    .map_err(|e| anyhow::anyhow!("--eviction-soft-grace-period: {e}"))?;
                let reclaim = ev::parse_minimum_reclaims(&a.eviction_minimum_reclaim)
                    .map_err(|e| anyhow::anyhow!("--eviction-minimum-reclaim: {e}"))?;
                if !a.housekeeping_interval.is_positive() {
                    anyhow::bail!("--housekeeping-interval must be positive");
                }
                berth_agent::eviction::Settings {
                    // Pods are always held to allocatable by the kubepods cgroup (the
                    // kubelet's default --enforce-node-allocatable=pods).
                    thresholds: ev::add_allocatable_thresholds(
                        ev::join(&a.eviction_hard, &a.eviction_soft, &grace, &reclaim)
                            .map_err(|e| anyhow::anyhow!("--eviction-soft: {e}"))?,
                    ),
                    max_pod_grace_seconds: a.eviction_max_pod_grace_period,
                    transition_period: a.eviction_pressure_transition_period,
                    interval: a.housekeeping_interval.unsigned_abs(),
                }
            };
            let config = Config {
                servers,
                token,
                node_name,
                local_path_dir: a
                    .local_path_dir
                    .unwrap_or_else(|| host.root_dir.join("storage")),
                host,
                listen: a.listen,
                node_labels: a.node_labels,
                register_with_taints: a.register_with_taints,
                registries_config: a.registries_config,
                max_pods: a.max_pods,
                log_dir: a.log_dir,
                crash_loop_backoff: a.max_container_restart_period,
                container_log_max_bytes: a.container_log_max_size,
                container_log_max_files: usize::try_from(a.container_log_max_files)
                    .unwrap_or(usize::MAX),
                image_gc: {
                    let policy = berth_agent::gc::ImageGcPolicy {
                        high_threshold_percent: a.image_gc_high_threshold,
                        low_threshold_percent: a.image_gc_low_threshold,
                        minimum_age: a.image_minimum_gc_age,
                        maximum_age: Some(a.image_maximum_gc_age).filter(|d| !d.is_zero()),
                    };
                    policy
                        .validate()
                        .map_err(|e| anyhow::anyhow!("image GC: {e}"))?;
                    policy
                },
                node_ip: a.node_ip,
                eviction_hard: a.eviction_hard,
                eviction,
                pod_network: a.pod_network,
                cluster_domain: a.cluster_domain,
                cluster_dns: a.cluster_dns,
                iptables_localhost_nodeports: a.iptables_localhost_nodeports,
                seccomp_default: a.seccomp_default,
                allowed_unsafe_sysctls: a.allowed_unsafe_sysctls,
                system_reserved: a.system_reserved,
                kube_reserved: a.kube_reserved,
                pod_max_pids: a.pod_max_pids,
                ingress: berth_agent::ingress::IngressConfig {
                    http_port: a.ingress_http_port,
                    https_port: a.ingress_https_port,
                    node_label: a.ingress_node_label,
                },
            };
            runtime.block_on(async move {
                let shutdown = CancellationToken::new();
                let signals = shutdown.clone();
                tokio::spawn(async move {
                    use tokio::signal::unix::{SignalKind, signal};
                    let (Ok(mut term), Ok(mut int)) = (
                        signal(SignalKind::terminate()),
                        signal(SignalKind::interrupt()),
                    ) else {
                        return;
                    };
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    signals.cancel();
                });
                berth_agent::agent::run(config, shutdown)
                    .await
                    .context("agent failed")
            })
        }
    }
}
