//! Cluster DNS served by the agent on a node-local address (by default the node's pod gateway,
//! the CNI bridge's address, which every pod on the node reaches): cluster names from the
//! watched Services and EndpointSlices ([`records`]), everything else forwarded to the host's
//! resolvers ([`server`]).
//!
//! The record table is rebuilt whole from each snapshot that `service_state` publishes (at most
//! 50 ms after a burst of changes) and swapped atomically for the server through a watch
//! channel, so answers follow the API within well under a second.
//!
//! The bridge is made by the CNI bridge plugin when the first pod's network is set up, so its
//! address may not exist yet when the agent starts: the agent then makes the bridge itself,
//! with the gateway address the plugin would give it (`<first address>/<prefix>`, which the
//! plugin accepts on an existing bridge), and sets it up. Binding a real address (rather than
//! `IP_FREEBIND` to an absent one) keeps the ordinary failure modes visible: a bind that fails
//! is retried, and an explicit `--cluster-dns` the node does not hold is simply announced to
//! pods without being served here (a DNS server elsewhere answers on it).

mod answers;
pub mod records;
#[cfg(test)]
mod records_tests;
pub mod server;
#[cfg(test)]
mod server_tests;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::service_state::ServiceState;
use super::{Ipv4Cidr, NetworkError, command, link_exists};
use records::{Records, Zone, plan_records};
use server::{Forwarder, Handler, Listeners};

/// Where and how the agent serves cluster DNS.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// The address pods are told to use and the server binds.
    pub address: Ipv4Addr,
    /// 53, except in tests.
    pub port: u16,
    /// The cluster domain (`--cluster-domain`), lower case, without the final dot.
    pub domain: String,
    /// The CNI bridge to create with `address` when it is missing: set when `address` is the
    /// pod gateway.
    pub bridge: Option<GatewayBridge>,
    /// The host's resolver configuration, read once at start (`/etc/resolv.conf`).
    pub resolv_conf: PathBuf,
}

/// The CNI bridge and the pod subnet whose gateway address it carries.
#[derive(Debug, Clone)]
pub struct GatewayBridge {
    pub name: String,
    pub pod_cidr: Ipv4Cidr,
}

/// The pod gateway of a pod subnet: its first address (host-local's default gateway, which
/// the bridge plugin puts on the bridge).
pub fn pod_gateway(pod_cidr: &Ipv4Cidr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(pod_cidr.addr).wrapping_add(1))
}

/// `--cluster-domain` as the records use it: lower case, no final dot (empty stays empty).
pub fn normalize_domain(domain: &str) -> String {
    domain.trim_end_matches('.').to_ascii_lowercase()
}

/// Makes sure the bridge exists, is up and carries the gateway address. Idempotent.
pub async fn ensure_gateway(bridge: &GatewayBridge) -> Result<(), NetworkError> {
    let gw = format!(
        "{}/{}",
        pod_gateway(&bridge.pod_cidr),
        bridge.pod_cidr.prefix
    );
    if !link_exists(&bridge.name).await {
        let added = command::tool(
            "ip",
            &["link", "add", "name", &bridge.name, "type", "bridge"],
        )
        .await;
        // The CNI plugin may have made it meanwhile.
        if let Err(e) = added
            && !link_exists(&bridge.name).await
        {
            return Err(e);
        }
        tracing::info!(bridge = %bridge.name, "made the pod bridge for cluster DNS");
    }
    command::tool("ip", &["addr", "replace", &gw, "dev", &bridge.name]).await?;
    command::tool("ip", &["link", "set", &bridge.name, "up"]).await?;
    Ok(())
}

/// Rebuilds the records from every published snapshot until `shutdown`.
async fn follow(
    mut services: watch::Receiver<Arc<ServiceState>>,
    records: watch::Sender<Arc<Records>>,
    zone: Zone,
    shutdown: CancellationToken,
) {
    loop {
        let snapshot = services.borrow_and_update().clone();
        let serial = jiff::Timestamp::now().as_second();
        let table = plan_records(
            &snapshot,
            Zone {
                serial: u32::try_from(serial).unwrap_or(u32::MAX),
                ..zone.clone()
            },
        );
        records.send_replace(Arc::new(table));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = services.changed() => if changed.is_err() { return },
        }
    }
}

/// Binds, retrying with backoff; `None` when the address is not this node's and there is no
/// bridge of ours to give it (someone else serves it) or on shutdown.
async fn bind(cfg: &DnsConfig, shutdown: &CancellationToken) -> Option<Listeners> {
    let addr = SocketAddr::new(IpAddr::V4(cfg.address), cfg.port);
    let mut backoff = Duration::from_millis(500);
    loop {
        if let Some(bridge) = &cfg.bridge
            && let Err(e) = ensure_gateway(bridge).await
        {
            tracing::warn!(error = %e, bridge = %bridge.name, "cluster DNS: cannot put the gateway address on the bridge");
        }
        match Listeners::bind(addr).await {
            Ok(l) => return Some(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable && cfg.bridge.is_none() => {
                tracing::info!(%addr, "cluster DNS: the address is not this node's; pods are pointed at it, another server answers there");
                return None;
            }
            Err(e) => {
                tracing::warn!(%addr, error = %e, retry_in = ?backoff, "cluster DNS: cannot bind");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// Serves cluster DNS on `cfg.address` until `shutdown`. Make the bridge first (before pods
/// are set up, so the CNI plugin finds it rather than racing with us): [`ensure_gateway`].
pub async fn run(
    cfg: DnsConfig,
    services: watch::Receiver<Arc<ServiceState>>,
    shutdown: CancellationToken,
) {
    let Some(listeners) = bind(&cfg, &shutdown).await else {
        return;
    };
    let resolv = match tokio::fs::read_to_string(&cfg.resolv_conf).await {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(path = %cfg.resolv_conf.display(), error = %e, "cluster DNS: no upstream servers; only cluster names resolve");
            String::new()
        }
    };
    let upstreams = server::upstreams(&resolv, IpAddr::V4(cfg.address));
    let zone = Zone {
        domain: cfg.domain.clone(),
        serial: 0,
        nameserver: Some(cfg.address),
    };
    let (tx, rx) = watch::channel(Arc::new(plan_records(
        &ServiceState::default(),
        zone.clone(),
    )));
    tokio::spawn(follow(services, tx, zone, shutdown.clone()));
    tracing::info!(
        address = ?listeners.local_addr().ok(),
        domain = %cfg.domain,
        upstreams = ?upstreams,
        "cluster DNS serving"
    );
    server::serve(
        listeners,
        Handler::new(rx, Forwarder::new(&upstreams)),
        shutdown,
    )
    .await;
}
