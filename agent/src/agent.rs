//! Running the agent: join, connect to containerd, register the Node, keep its Lease, clean up
//! deleted local-path volumes, get a pod CIDR, serve logs/exec, and run the pods bound to this
//! node.

use crate::config::Config;
use crate::image::ImageService;
use crate::network::cluster_dns::{DnsConfig, GatewayBridge};
use crate::network::dns::ClusterDns;
use crate::network::peers::plan::PodNetworkMode;
use crate::network::{Ipv4Cidr, Network, NetworkConfig};
use crate::node;
use crate::pod::manager::PodManager;
use crate::runtime::{Runtime, RuntimeOptions};
use berth_api::client::{Client, Credentials};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Join(#[from] crate::join::JoinError),
    #[error(transparent)]
    Client(#[from] berth_api::client::ClientError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    #[error(transparent)]
    Network(#[from] crate::network::NetworkError),
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    #[error("pod cgroups: {0}")]
    Cgroup(#[from] crate::node::cgroups::CgroupError),
    #[error("registries file: {0}")]
    Registries(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// The root dir (0700) and its `pki` directory (0700, files 0600) are private: made so, or
/// tightened with a warning if someone loosened them.
fn secure_root_dir(root: &std::path::Path) -> Result<(), AgentError> {
    let err = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| AgentError::Io { path, source }
    };
    berth_api::private_files::ensure_dir(root).map_err(err(root))?;
    let pki = root.join("pki");
    berth_api::private_files::check_tree(&pki).map_err(err(&pki))
}

/// Runs until `shutdown`. Stopping the agent never stops the pods: containers keep running and
/// a restarted agent adopts them.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), AgentError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let labels = node::status::parse_labels(&config.node_labels).map_err(AgentError::Config)?;
    let taints =
        node::status::parse_taints(&config.register_with_taints).map_err(AgentError::Config)?;
    secure_root_dir(&config.host.root_dir)?;
    let storage_dir = crate::storage::ensure_storage_dir(&config.local_path_dir)?;
    let node_ip = node::host::internal_ip(config.node_ip.as_deref());
    // The certificate's addresses are the ones the controller dials (the InternalIP); the
    // controller signs only addresses the node demonstrably has (see README, joining agents).
    let addresses: Vec<String> = node_ip.iter().cloned().collect();
    let creds = crate::join::credentials(
        &config.servers,
        config.token.as_deref(),
        &config.node_name,
        &addresses,
        &config.host.root_dir.join("pki"),
    )
    .await?;
    let client = Client::with_servers(
        &config.servers,
        &creds.ca_pem,
        Credentials::Certificate {
            cert_pem: creds.cert_pem.clone(),
            key_pem: creds.key_pem.clone(),
        },
    )?;
    let mut runtime_options = RuntimeOptions::new(
        &config.host.containerd_socket,
        &config.host.containerd_namespace,
    );
    runtime_options.log_max_bytes = config.container_log_max_bytes;
    let runtime = Runtime::connect_with(runtime_options).await?;
    let version = runtime.version().await?;

    let joined = crate::certificates::identity::Identity::parse(&creds.cert_pem, &creds.key_pem)
        .map_err(|e| AgentError::Config(format!("the node certificate: {e}")))?;
    let ips: Vec<std::net::IpAddr> = addresses.iter().filter_map(|a| a.parse().ok()).collect();
    let mut certificates = crate::certificates::Certificates::load(
        &config.node_name,
        &ips,
        config.host.root_dir.join("pki"),
        joined,
    );
    let backend = PodManager::new_backend();
    let policy_counters = crate::network::policy::metrics::PolicyCounters::new(
        &crate::network::network_name(&config.node_name),
    );
    let bound = crate::server::serve(
        config.listen,
        &creds.ca_pem,
        certificates.serving.clone(),
        Arc::new(crate::server::WithSections {
            inner: backend.clone(),
            sections: vec![
                certificates.metrics.clone(),
                policy_counters.clone(),
                Arc::new(crate::ingress::access::IngressMetrics),
            ],
        }),
        shutdown.clone(),
    )
    .await?;
    let mut facts = node::host::facts(
        &config.node_name,
        &config.host.root_dir,
        config.max_pods,
        &version,
        i32::from(bound.port()),
    );
    facts.internal_ip = node_ip;
    facts.reservation = node::allocatable::Reservation::new(
        config.system_reserved,
        config.kube_reserved,
        &config.eviction_hard,
        facts.memory_bytes,
        facts.ephemeral_storage_bytes,
    );
    let cgroups = Arc::new(node::qos_cgroups::QosCgroups::new(
        node::cgroups::CgroupFs::host(),
        &config.host.containerd_namespace,
        config.pod_max_pids,
    ));
    let (pods_share, pods_pids) = node::allocatable::pods_cgroup_share(
        node::status::capacity(&facts),
        node::cgroups::pid_capacity(),
        &facts.reservation,
    );
    cgroups.start(&node::cgroup_layout::kubepods_limits(pods_share, pods_pids))?;
    let image_dir = match runtime.snapshotter_root().await {
        Ok(dir) => dir.map(std::path::PathBuf::from),
        Err(e) => {
            tracing::warn!(error = %e, "the snapshotter's root is unknown: imagefs is nodefs");
            None
        }
    };
    // The eviction manager judges the node's pressure from the start; it evicts once the pod
    // manager is attached to `evictable`.
    let evictable: crate::eviction::manager::PodsSlot = Default::default();
    let reclaimer = Arc::new(crate::eviction::pods::Reclaimer::default());
    let (mut eviction, pressure_rx) = crate::eviction::Manager::new(
        config.eviction.clone(),
        Arc::new(crate::eviction::observe::HostObserver {
            root_dir: config.host.root_dir.clone(),
            image_dir,
            log_dir: config.log_dir.clone(),
            runtime: runtime.clone(),
            pods_cgroup: Some(crate::eviction::observe::PodsCgroup {
                path: format!(
                    "/{}/{}",
                    config.host.containerd_namespace.trim_matches('/'),
                    node::cgroup_layout::KUBEPODS
                ),
                memory: pods_share.memory,
            }),
        }),
        reclaimer.clone(),
        evictable.clone(),
    );
    eviction.observe_pressures().await;
    let mut monitor = node::PressureMonitor::new(pressure_rx);
    let pressures = monitor.sample().await;
    let mut annotations = node::status::annotations(&storage_dir);
    let ingress = match &config.ingress.node_label {
        None => config.ingress.clone(),
        Some(_) => {
            // The labels the Node will have: what it has now (an operator's) and ours.
            let mut node_labels = client
                .get::<k8s_openapi::api::core::v1::Node>(
                    node::rt("nodes", "", "v1"),
                    None,
                    &config.node_name,
                )
                .await?
                .and_then(|n| n.metadata.labels)
                .unwrap_or_default();
            node_labels.extend(labels.clone());
            config.ingress.for_labels(&node_labels)
        }
    };
    if !ingress.enabled() {
        tracing::info!("ingress: not served on this node");
    }
    annotations.insert(
        berth_api::ingress_class::PORTS_ANNOTATION.to_string(),
        ingress.ports_annotation(),
    );
    let registered = node::register(&client, &facts, &labels, &annotations, &taints).await?;
    let registered = node::post_status(&client, &facts, true, pressures, Some(&registered))
        .await
        .ok()
        .or(Some(registered));
    tracing::info!(node = %config.node_name, server = %client.server(), "registered");
    // After registering: the serving signer's approver checks the names asked for against
    // the Node's addresses.
    certificates.spawn(&client, &shutdown);
    let heartbeat = tokio::spawn(node::heartbeat(
        client.clone(),
        facts.clone(),
        registered,
        monitor,
        runtime.clone(),
        shutdown.clone(),
    ));

    tokio::spawn(eviction.run(shutdown.clone()));

    tokio::spawn(crate::storage::run(
        client.clone(),
        config.node_name.clone(),
        storage_dir,
        shutdown.clone(),
    ));

    let Some(pod_cidr) = node::wait_for_pod_cidr(&client, &config.node_name, &shutdown).await
    else {
        return Ok(());
    };
    tracing::info!(%pod_cidr, "pod CIDR assigned");
    let peers = peer_config(&config, facts.internal_ip.as_deref(), &pod_cidr);
    let peer_routing = peers.map(|cfg| {
        tokio::spawn(crate::network::peers::run(
            client.clone(),
            cfg,
            shutdown.clone(),
        ))
    });
    let (service_tx, service_rx) = crate::network::service_state::channel();
    tokio::spawn(crate::network::service_state::run(
        client.clone(),
        service_tx,
        shutdown.clone(),
    ));
    tokio::spawn(crate::ingress::run(
        client.clone(),
        service_rx.clone(),
        ingress,
        shutdown.clone(),
    ));
    let (policy_tx, policy_rx) = crate::network::policy::state::channel();
    tokio::spawn(crate::network::policy::state::run(
        client.clone(),
        policy_tx,
        shutdown.clone(),
    ));
    tokio::spawn(crate::network::policy::run(
        policy_rx,
        crate::network::policy::PolicyConfig {
            network: crate::network::network_name(&config.node_name),
            node: config.node_name.clone(),
        },
        policy_counters,
        shutdown.clone(),
    ));
    let dns = cluster_dns(&config, &pod_cidr);
    if let Some(cfg) = &dns {
        // Before any pod network is set up, so the CNI plugin finds the bridge made.
        if let Some(bridge) = &cfg.bridge
            && let Err(e) = crate::network::cluster_dns::ensure_gateway(bridge).await
        {
            tracing::warn!(error = %e, "cluster DNS: cannot make the pod bridge yet; retrying in the background");
        }
        tokio::spawn(crate::network::cluster_dns::run(
            cfg.clone(),
            service_rx.clone(),
            shutdown.clone(),
        ));
    }
    match config.host.cluster_cidr.parse() {
        Ok(cluster_cidr) => {
            tokio::spawn(crate::network::proxy::run(
                service_rx.clone(),
                crate::network::proxy::ProxyConfig {
                    network: crate::network::network_name(&config.node_name),
                    node: config.node_name.clone(),
                    cluster_cidr,
                    localhost_node_ports: config.iptables_localhost_nodeports,
                    state_dir: crate::network::state_dir(&config.host.root_dir),
                },
                shutdown.clone(),
            ));
        }
        Err(e) => {
            tracing::warn!(cidr = %config.host.cluster_cidr, error = e, "no service proxy: the cluster CIDR is not an IPv4 subnet")
        }
    }
    match facts.internal_ip.as_deref().map(str::parse) {
        Some(Ok(node_ip)) => {
            tokio::spawn(crate::network::announce::run(
                client.clone(),
                service_rx.clone(),
                crate::network::announce::AnnounceConfig {
                    node: config.node_name.clone(),
                    node_ip,
                },
                shutdown.clone(),
            ));
        }
        _ => tracing::warn!("no IPv4 node address: load-balancer addresses are not announced"),
    }
    // Kept for `berth-agent uninstall`, which runs without the API.
    let cidr_file = crate::uninstall::pod_cidr_file(&config.host.root_dir);
    if let Some(dir) = cidr_file.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|source| AgentError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    tokio::fs::write(&cidr_file, &pod_cidr)
        .await
        .map_err(|source| AgentError::Io {
            path: cidr_file.clone(),
            source,
        })?;
    let network = Network::new(NetworkConfig {
        mtu: pod_mtu(config.pod_network, facts.internal_ip.as_deref()).await,
        ..NetworkConfig::for_node(&config.host, &config.node_name, pod_cidr).await?
    });
    let registries = ImageService::load_registries(&config.registries_config)
        .map_err(|e| AgentError::Registries(e.to_string()))?;
    let images = ImageService::new(runtime.clone(), registries);
    let (gc_runtime, gc_images, gc_client) = (runtime.clone(), images.clone(), client.clone());
    let manager = Arc::new(PodManager::new(
        config.clone(),
        client,
        runtime,
        images,
        network,
        crate::pod::manager::NodeResources {
            host_ip: facts.internal_ip.clone().unwrap_or_default(),
            dns: ClusterDns {
                servers: dns.iter().map(|d| d.address.to_string()).collect(),
                domain: config.cluster_domain.clone(),
            },
            cpus: facts.cpus,
            memory_bytes: facts.memory_bytes as i64,
            cgroups,
        },
    ));
    backend.attach(manager.clone());
    let _ = evictable.set(manager.clone());
    let gc = crate::gc::GarbageCollector::new(
        gc_runtime.clone(),
        gc_images,
        crate::gc::GcConfig {
            images: config.image_gc,
            log_dir: config.log_dir.clone(),
            container_log_max_files: config.container_log_max_files,
            image_fs: match gc_runtime.snapshotter_root().await {
                Ok(dir) => dir.map(std::path::PathBuf::from),
                Err(_) => None,
            },
        },
        manager.clone(),
        Some(crate::gc::NodeEvents::new(
            gc_client.clone(),
            config.node_name.clone(),
        )),
    );
    reclaimer.attach(gc.clone());
    tokio::spawn({
        let (gc, shutdown) = (gc.clone(), shutdown.clone());
        async move { gc.run(shutdown).await }
    });
    manager.run(shutdown.clone()).await;
    let _ = heartbeat.await;
    if let Some(task) = peer_routing {
        let _ = task.await;
    }
    Ok(())
}

/// The pods' MTU: the node interface's less the VXLAN overhead when pod traffic may be
/// tunnelled (a pod's full-size packet must fit the tunnel), else the default.
async fn pod_mtu(mode: PodNetworkMode, node_ip: Option<&str>) -> Option<u32> {
    if mode == PodNetworkMode::HostGw {
        return None;
    }
    let node_ip: std::net::Ipv4Addr = node_ip?.parse().ok()?;
    if node_ip.is_loopback() {
        // A single-host setup: nothing is tunnelled, and loopback's MTU is no pod's.
        return None;
    }
    let handle = crate::network::peers::netlink::connect().ok()?;
    let mtu = crate::network::peers::netlink::tunnelled_pod_mtu(&handle, node_ip).await;
    if let Some(mtu) = mtu {
        tracing::info!(mtu, "pod MTU leaves room for VXLAN");
    }
    mtu
}

/// Peer routing's settings, or `None` (logged) when the node address or pod CIDR is not IPv4.
fn peer_config(
    config: &Config,
    node_ip: Option<&str>,
    pod_cidr: &str,
) -> Option<crate::network::peers::PeerConfig> {
    let node_ip = node_ip.and_then(|ip| ip.parse().ok());
    let pod_cidr = pod_cidr.parse().ok();
    let (Some(node_ip), Some(pod_cidr)) = (node_ip, pod_cidr) else {
        tracing::warn!("no IPv4 node address or pod CIDR: no routes to other nodes' pods");
        return None;
    };
    Some(crate::network::peers::PeerConfig {
        node: config.node_name.clone(),
        node_ip,
        pod_cidr,
        mode: config.pod_network,
        vxlan_device: config.host.vxlan_device.clone(),
    })
}

/// Where cluster DNS is served: `--cluster-dns`, or the pod gateway (on the CNI bridge, made
/// if missing). `None` (logged) without either: pods then use the host's resolvers.
fn cluster_dns(config: &Config, pod_cidr: &str) -> Option<DnsConfig> {
    let pod_cidr: Option<Ipv4Cidr> = pod_cidr.parse().ok();
    let gateway = pod_cidr
        .as_ref()
        .map(crate::network::cluster_dns::pod_gateway);
    let Some(address) = config.cluster_dns.or(gateway) else {
        tracing::warn!("no cluster DNS: the pod CIDR is not IPv4 and --cluster-dns is not set");
        return None;
    };
    Some(DnsConfig {
        address,
        port: 53,
        domain: config.cluster_domain.clone(),
        bridge: pod_cidr
            .filter(|_| Some(address) == gateway)
            .map(|pod_cidr| GatewayBridge {
                name: config.host.cni_bridge.clone(),
                pod_cidr,
            }),
        resolv_conf: "/etc/resolv.conf".into(),
    })
}
