//! Starting and stopping the control plane: PKI and kubeconfig, the store, the built-in
//! namespaces, the HTTPS listener and the controllers; graceful shutdown on cancellation.

use berth_apiserver::api::{self, ApiState, authn::Tokens, metrics::Metrics};
use berth_apiserver::pki;
use berth_cluster_controllers as cluster_controllers;
use berth_controllers as controllers;
use berth_registry::{Registry, WriteOptions};
use berth_runtime::informer::Informers;
use berth_runtime::{Clock, Context, ControllerMetrics};
use berth_shared::admission::service_allocation::ServiceRanges;
use berth_store::{RedbBackend, Store};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Heartbeats committed together at most, however many are waiting.
const HEARTBEAT_BATCH: usize = 256;

/// Node Lease renewals wait up to `wait` for other writes to share their commit.
fn heartbeat_linger(wait: std::time::Duration) -> berth_store::Linger {
    berth_store::Linger {
        prefixes: vec![berth_registry::prefix(
            berth_shared::resource::LEASES,
            Some(berth_controllers::nodelifecycle::LEASE_NAMESPACE),
        )],
        wait,
        max_batch: HEARTBEAT_BATCH,
    }
}

/// The controller's configuration (from flags).
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub kubeconfig: Option<PathBuf>,
    pub tls_sans: Vec<String>,
    pub watch_history: usize,
    pub token_auth_file: Option<PathBuf>,
    /// Pod addresses; each node gets a /24 of it.
    pub cluster_cidr: String,
    /// Service cluster IPs.
    pub service_cidr: String,
    /// Load-balancer address pools (`CIDR` or `A-B`); none: LoadBalancers get node addresses.
    pub service_lb_pools: Vec<String>,
    /// Addresses any node may have in its certificate besides the one it joins from.
    pub node_address_ranges: Vec<berth_apiserver::join::addresses::IpRange>,
    /// The connection cap and timeouts.
    pub connections: api::listener::ConnectionLimits,
    /// Read-only requests in flight at most (0: no limit); long-running ones are not counted.
    pub max_requests_inflight: usize,
    /// Mutating requests in flight at most (0: no limit).
    pub max_mutating_requests_inflight: usize,
    /// How long a node may post no heartbeat before it is marked Unknown.
    pub node_monitor_grace_period: std::time::Duration,
    /// How long a node Lease renewal may wait for company before its commit (0: none).
    pub heartbeat_batch_interval: std::time::Duration,
    /// How often the agents' resource metrics are scraped for the metrics API.
    pub metric_resolution: std::time::Duration,
    /// How often each HorizontalPodAutoscaler is reconciled.
    pub hpa_sync_period: std::time::Duration,
    /// Finished pods kept at most before the oldest are deleted (0: no limit).
    pub terminated_pod_gc_threshold: usize,
    /// How long the certificates this controller issues are valid: its serving and admin
    /// certificates, nodes' at join, and at most those its signers issue (`--certificate-validity`).
    pub certificate_validity: std::time::Duration,
    /// etcd to keep the state in (`None`: the embedded store in the data dir).
    pub datastore: Option<berth_store::EtcdConfig>,
    /// This controller's leader-election identity (default: hostname and port).
    pub leader_election_id: Option<String>,
    /// The leader election's durations.
    pub leader_election: berth_runtime::leader_election::Timings,
    /// Pod Security admission's defaults and exemptions.
    pub pod_security: berth_shared::admission::pod_security::Config,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(transparent)]
    Store(#[from] berth_store::StoreError),
    #[error(transparent)]
    Tls(#[from] api::tls::TlsError),
    #[error(transparent)]
    Serving(#[from] berth_apiserver::certificates::serving::ServingError),
    #[error(transparent)]
    Sign(#[from] berth_apiserver::certificates::signer::SignError),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Join(#[from] berth_apiserver::join::JoinError),
    #[error(transparent)]
    Token(#[from] berth_apiserver::serviceaccount::token::TokenError),
    #[error("bootstrapping namespace {0}: {1}")]
    Bootstrap(String, String),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A duration flag: `90s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (like 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    std::time::Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// The version this server reports; the API level decides which kubectl the dispatcher runs.
pub fn git_version() -> String {
    format!("v1.34.0+berth.{}", env!("CARGO_PKG_VERSION"))
}

pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

fn bootstrap(registry: &Registry) -> Result<(), ServerError> {
    let Some(rt) = berth_shared::resource::by_plural("", "v1", "namespaces") else {
        return Ok(());
    };
    for ns in SYSTEM_NAMESPACES {
        if registry.get(rt, None, ns).is_ok() {
            continue;
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        registry
            .create(rt, None, obj, &WriteOptions::default())
            .map_err(|e| ServerError::Bootstrap(ns.to_string(), e.to_string()))?;
    }
    Ok(())
}

/// Checks (and tightens, with a warning) the modes of what the data dir holds: the PKI, the
/// store, the join token, the admin kubeconfig, the per-node join tokens and the node password
/// records.
fn check_private_files(data_dir: &std::path::Path) -> Result<(), ServerError> {
    use berth_shared::private_files::{FILE_MODE, check, check_tree};
    let err = |path: PathBuf| move |source| ServerError::Io { path, source };
    for dir in [
        "pki",
        berth_apiserver::join::passwords::DIR,
        berth_apiserver::join::tokens::DIR,
    ] {
        let dir = data_dir.join(dir);
        check_tree(&dir).map_err(err(dir))?;
    }
    for file in ["store.redb", "token", "admin.kubeconfig"] {
        let path = data_dir.join(file);
        check(&path, FILE_MODE).map_err(err(path))?;
    }
    Ok(())
}

/// The address other hosts reach this controller at: the listen address, or (listening on
/// all addresses) the host's source address towards other networks (a UDP socket is
/// "connected", which sends nothing), or the loopback address on a host with no route out.
fn advertise_address(listen: std::net::IpAddr) -> std::net::IpAddr {
    if !listen.is_unspecified() {
        return listen;
    }
    let probe = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|_| s))
        .and_then(|s| s.local_addr());
    match probe {
        Ok(a) if !a.ip().is_unspecified() => a.ip(),
        _ => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    }
}

/// This machine's name, for the default leader-election identity.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), ServerError> {
    let io = |path: &PathBuf| {
        let path = path.clone();
        move |source| ServerError::Io { path, source }
    };
    berth_shared::private_files::ensure_dir(&config.data_dir).map_err(io(&config.data_dir))?;
    let mut sans = pki::host_addresses();
    sans.extend(config.tls_sans.iter().cloned());
    let pki = pki::load_or_create_valid(
        &config.data_dir.join("pki"),
        &sans,
        config.certificate_validity,
    )?;
    let store = match &config.datastore {
        Some(etcd) => {
            let (etcd, history) = (etcd.clone(), config.watch_history);
            tokio::task::spawn_blocking(move || Store::open_etcd(etcd, history))
                .await
                .map_err(|e| ServerError::Bootstrap("store".into(), e.to_string()))??
        }
        None => {
            let backend = RedbBackend::open(&config.data_dir.join("store.redb"))?;
            let store = Store::open(Box::new(backend), config.watch_history)?;
            store.set_linger(Some(heartbeat_linger(config.heartbeat_batch_interval)));
            store
        }
    };
    store.keep_previous_data_for(|key| !berth_registry::names_builtin_kind(key));
    check_private_files(&config.data_dir)?;
    let service_ranges = ServiceRanges::parse(&config.service_cidr).ok_or_else(|| {
        ServerError::Config(format!(
            "invalid --service-cidr {:?} (an IPv4 CIDR of at least 4 addresses)",
            config.service_cidr
        ))
    })?;
    let registry = Registry::new(store.clone())
        .with_service_ranges(service_ranges)
        .with_pod_security(config.pod_security.clone());
    {
        let r = registry.clone();
        tokio::task::spawn_blocking(move || {
            bootstrap(&r)?;
            berth_registry::priority::ensure_system_classes(&r)
                .map_err(|e| ServerError::Bootstrap("priorityclasses".into(), e.to_string()))?;
            berth_registry::local_path_class::ensure(&r)
                .map_err(|e| ServerError::Bootstrap("storageclasses".into(), e.to_string()))?;
            berth_registry::ingress_class::ensure(&r)
                .map_err(|e| ServerError::Bootstrap("ingressclasses".into(), e.to_string()))?;
            berth_apiserver::rbac::bootstrap::ensure(&r)
                .map_err(|e| ServerError::Bootstrap("rbac".into(), e.to_string()))
        })
        .await
        .map_err(|e| ServerError::Bootstrap("*".into(), e.to_string()))??;
    }
    let tokens = Arc::new(
        berth_apiserver::serviceaccount::token::TokenSigner::load_or_create(
            &config.data_dir.join("pki"),
            berth_apiserver::serviceaccount::token::DEFAULT_ISSUER,
        )?,
    );
    let static_tokens = match &config.token_auth_file {
        Some(p) => Tokens::parse(&std::fs::read_to_string(p).map_err(io(p))?),
        None => Tokens::default(),
    };

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Listen {
            addr: config.listen,
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServerError::Listen {
            addr: config.listen,
            source,
        })?;
    let url = if bound.ip().is_unspecified() {
        format!("https://127.0.0.1:{}", bound.port())
    } else {
        format!("https://{bound}")
    };
    let kubeconfig = config
        .kubeconfig
        .clone()
        .unwrap_or_else(|| config.data_dir.join("admin.kubeconfig"));
    pki::write_kubeconfig(
        &kubeconfig,
        &url,
        &pki.ca_cert,
        &pki.admin_cert,
        &pki.admin_key,
        "admin",
    )?;
    {
        let (r, port) = (registry.clone(), bound.port());
        let address = advertise_address(bound.ip());
        tokio::task::spawn_blocking(move || {
            berth_apiserver::kubernetes_service::ensure(&r, address, port)
        })
        .await
        .map_err(|e| ServerError::Bootstrap("*".into(), e.to_string()))?
        .map_err(|e| ServerError::Bootstrap("kubernetes service".into(), e.to_string()))?;
        let (r, client_ca, front_ca) = (
            registry.clone(),
            pki.ca_cert.clone(),
            pki.front_proxy_ca_cert.clone(),
        );
        tokio::task::spawn_blocking(move || {
            berth_apiserver::aggregation::bootstrap::ensure(&r, &client_ca, &front_ca)
        })
        .await
        .map_err(|e| ServerError::Bootstrap("*".into(), e.to_string()))?
        .map_err(|e| ServerError::Bootstrap("api aggregation".into(), e.to_string()))?;
    }
    let addr_file = config.data_dir.join("listen-address");
    std::fs::write(&addr_file, &url).map_err(io(&addr_file))?;

    let join_tokens = berth_apiserver::join::tokens::JoinTokens::new(&config.data_dir);
    join_tokens
        .load_or_create_cluster(&pki.ca_cert)
        .map_err(berth_apiserver::join::JoinError::from)?;
    let mut signer = berth_apiserver::join::NodeSigner::new(&pki)?;
    signer.validity = config.certificate_validity;
    let serving = berth_apiserver::certificates::serving::ServingCertificate::new(
        &pki.server_cert,
        &pki.server_key,
    )?;
    let csr_signing = berth_apiserver::certificates::controller::Config {
        signer: Arc::new(berth_apiserver::certificates::signer::CaSigner::new(
            &pki.ca_cert,
            &std::fs::read_to_string(pki.dir.join("ca.key"))
                .map_err(io(&pki.dir.join("ca.key")))?,
        )?),
        max_validity: config.certificate_validity,
    };
    let node_addresses = berth_apiserver::join::addresses::AddressRule {
        host_addresses: pki::host_addresses()
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect(),
        ranges: config.node_address_ranges.clone(),
    };
    let dialer = api::proxy::AgentDialer::new(&pki)?;
    let ctx = Context {
        registry: registry.clone(),
        informers: Informers::new(Arc::new(store), shutdown.clone()),
        metrics: ControllerMetrics::default(),
        clock: Clock::system(),
    };
    // Custom resource types are served by every API server, leader or not.
    berth_apiserver::custom_resources::serve(&ctx.informers);
    berth_apiserver::admission_policies::enforce(&ctx.informers, &registry);
    berth_apiserver::admission_webhooks::enforce(&ctx.informers, &registry);
    let aggregator = Arc::new(berth_apiserver::aggregation::Aggregator::default());
    aggregator.follow(&ctx.informers);
    let front_proxy = Arc::new(berth_apiserver::aggregation::front_proxy::FrontProxy::new(
        &pki.front_proxy_client_cert,
        &pki.front_proxy_client_key,
    )?);
    let connections = Arc::new(api::listener::ConnectionStats::default());
    let leader = Arc::new(berth_runtime::leader_election::LeaderStatus::default());
    let store_shared = registry.store().is_shared();
    let resource_metrics = Arc::new(api::resource_metrics::ResourceMetrics::default());
    let state = Arc::new(ApiState {
        dialer,
        resource_metrics: resource_metrics.clone(),
        signer,
        join_tokens,
        node_passwords: if store_shared {
            berth_apiserver::join::passwords::NodePasswords::in_store(
                &config.data_dir,
                registry.store().clone(),
            )
        } else {
            berth_apiserver::join::passwords::NodePasswords::new(&config.data_dir)
        },
        node_addresses,
        join_failures: Default::default(),
        controller_metrics: ctx.metrics.clone(),
        registry: registry.clone(),
        metrics: Metrics::default(),
        git_version: git_version(),
        shutdown: shutdown.clone(),
        inflight: Arc::new(api::inflight::InFlight::new(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
        )),
        connections: connections.clone(),
        leader: leader.clone(),
        authorizer: berth_apiserver::rbac::Authorizer::new(&ctx.informers),
        tokens,
        serving: serving.clone(),
        aggregator: aggregator.clone(),
        front_proxy: front_proxy.clone(),
        clean_shapes: Default::default(),
    });
    let availability = tokio::spawn(berth_apiserver::aggregation::availability::run(
        aggregator,
        registry.clone(),
        front_proxy,
        shutdown.clone(),
    ));
    let tls = api::tls::server_config(&pki, serving.clone())?;
    let serving_renewal = tokio::spawn(berth_apiserver::certificates::serving::run(
        pki.dir.clone(),
        serving,
        config.certificate_validity,
        berth_apiserver::certificates::serving::AdminKubeconfig {
            data_dir: config.data_dir.clone(),
            path: kubeconfig.clone(),
            server: url.clone(),
        },
        shutdown.clone(),
    ));
    let ca_expiry = tokio::spawn(berth_apiserver::certificates::expiry::run(
        registry.clone(),
        pki.ca_cert.clone(),
        shutdown.clone(),
    ));
    let scraper = tokio::spawn(api::resource_metrics::run(
        state.clone(),
        config.metric_resolution,
        shutdown.clone(),
    ));
    let router = api::router(state);
    let cluster_cidr = cluster_controllers::nodeipam::plan::Cidr::parse(&config.cluster_cidr)
        .ok_or_else(|| {
            ServerError::Config(format!("invalid --cluster-cidr {:?}", config.cluster_cidr))
        })?;
    let lifecycle = controllers::nodelifecycle::Config {
        grace: controllers::nodelifecycle::plan::Grace {
            monitor: config.node_monitor_grace_period,
            ..Default::default()
        },
    };
    let hpa = cluster_controllers::podautoscaler::Config {
        sync_period: config.hpa_sync_period,
    };
    let lb_pools = cluster_controllers::loadbalancer::parse_pools(&config.service_lb_pools)
        .map_err(|e| ServerError::Config(e.to_string()))?;
    let root_ca = pki.ca_cert.clone();
    let terminated_threshold = config.terminated_pod_gc_threshold;
    let lead = {
        let ctx = ctx.clone();
        move |acting: CancellationToken| {
            let ctx = ctx.clone();
            let resource_metrics = resource_metrics.clone();
            let root_ca = root_ca.clone();
            let lb_pools = lb_pools.clone();
            let csr_signing = csr_signing.clone();
            async move {
                // Informers already running (for the API's own use) first reflect everything the
                // store holds now, which after a leader change includes the old leader's writes.
                ctx.informers
                    .catch_up(&ctx.informers.started(), std::time::Duration::from_secs(10))
                    .await;
                let mut handles = controllers::start(&ctx, lifecycle, acting.clone());
                handles.extend(cluster_controllers::start(
                    &ctx,
                    cluster_cidr,
                    root_ca.clone(),
                    cluster_controllers::podgc::Config {
                        terminated_threshold,
                        ..Default::default()
                    },
                    acting.clone(),
                ));
                handles.push(tokio::spawn(cluster_controllers::loadbalancer::run(
                    ctx.clone(),
                    lb_pools,
                    acting.clone(),
                )));
                handles.push(tokio::spawn(cluster_controllers::podautoscaler::run(
                    ctx.clone(),
                    resource_metrics.clone(),
                    hpa,
                    acting.clone(),
                )));
                // RBAC's own controller (beside the authorizer, which shares its aggregation).
                handles.push(tokio::spawn(berth_apiserver::rbac::aggregation::run(
                    ctx.clone(),
                    acting.clone(),
                )));
                handles.push(tokio::spawn(
                    berth_apiserver::certificates::controller::run(
                        ctx.clone(),
                        berth_apiserver::rbac::Authorizer::new(&ctx.informers),
                        csr_signing,
                        acting.clone(),
                    ),
                ));
                handles.push(berth_scheduler::start_with(
                    &ctx,
                    berth_scheduler::Config::for_store(store_shared),
                    acting,
                ));
                handles
            }
        }
    };
    let controllers = if store_shared {
        // Several controllers share the store: only the Lease's holder acts.
        let identity = config
            .leader_election_id
            .clone()
            .unwrap_or_else(|| format!("{}_{}", hostname(), bound.port()));
        vec![tokio::spawn(berth_runtime::leader_election::run(
            registry.clone(),
            identity,
            config.leader_election,
            leader.clone(),
            shutdown.clone(),
            lead,
        ))]
    } else {
        lead(shutdown.clone()).await
    };
    // As upstream refuses writes until its admission informers have synced: the definitions,
    // policies, webhooks and APIServices stored now are in force for the first request served
    // (with one controller, leading has already waited for every informer; not so in HA).
    let in_force: Vec<_> = [
        berth_shared::resource::CUSTOM_RESOURCE_DEFINITIONS,
        berth_shared::resource::VALIDATING_ADMISSION_POLICIES,
        berth_shared::resource::VALIDATING_ADMISSION_POLICY_BINDINGS,
        berth_shared::resource::VALIDATING_WEBHOOK_CONFIGURATIONS,
        berth_shared::resource::MUTATING_WEBHOOK_CONFIGURATIONS,
        berth_shared::resource::API_SERVICES,
    ]
    .into_iter()
    .map(|rt| ctx.informers.get(rt))
    .collect();
    ctx.informers
        .catch_up(&in_force, std::time::Duration::from_secs(10))
        .await;
    println!("listening on {url}");
    tracing::info!(%url, data_dir = %config.data_dir.display(), "serving");
    api::listener::serve(
        listener,
        tls,
        router,
        static_tokens,
        config.connections,
        connections,
        shutdown.clone(),
    )
    .await;
    for c in controllers {
        let _ = c.await;
    }
    let _ = scraper.await;
    let _ = serving_renewal.await;
    let _ = ca_expiry.await;
    let _ = availability.await;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_heartbeat_linger_covers_node_leases_and_nothing_else() {
        let linger = super::heartbeat_linger(std::time::Duration::from_millis(100));
        let lingers = |key: &str| linger.prefixes.iter().any(|p| key.starts_with(p.as_str()));
        let key = |rt, ns: Option<&str>, name: &str| berth_registry::object_key(rt, ns, name);
        use berth_shared::resource::{LEASES, NODES};
        assert!(lingers(&key(LEASES, Some("kube-node-lease"), "node-1")));
        assert!(!lingers(&key(
            LEASES,
            Some("kube-system"),
            "berth-controller"
        )));
        assert!(!lingers(&key(NODES, None, "node-1")));
    }
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_take_go_style_units_or_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());
    }
}
