//! Routes to the other nodes' pods: watches the Nodes and keeps a route to every other node's
//! podCIDR (host-gw on a shared segment, VXLAN across routers, see [`plan`]), re-checking the
//! kernel every few seconds so routes a link flap removed come back. Publishes this node's
//! VXLAN MAC in its Node's annotations for the peers.

pub mod netlink;
pub mod plan;

use std::net::Ipv4Addr;
use std::time::Duration;

use berth_api::client::{Client, ListParams, ResumingWatch, WatchEvent};
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::network::Ipv4Cidr;
use plan::{Local, PodNetworkMode, VTEP_MAC_ANNOTATION};

/// How often the kernel is re-read without a Node change (a link that went down and up loses
/// its routes).
const RESYNC: Duration = Duration::from_secs(3);
/// Passes are at least this far apart, however often Nodes change (every node's status posts
/// are Node changes).
const MIN_INTERVAL: Duration = Duration::from_millis(200);

/// What peer routing is told at start.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    pub node: String,
    pub node_ip: Ipv4Addr,
    pub pod_cidr: Ipv4Cidr,
    pub mode: PodNetworkMode,
    /// The VXLAN device's name (`berth.1`).
    pub vxlan_device: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error(transparent)]
    Netlink(#[from] netlink::NetlinkError),
    #[error(transparent)]
    Client(#[from] berth_api::client::ClientError),
}

fn nodes() -> &'static berth_api::resource::ResourceType {
    crate::node::rt("nodes", "", "v1")
}

/// Runs until `shutdown`.
pub async fn run(client: Client, cfg: PeerConfig, shutdown: CancellationToken) {
    let handle = match netlink::connect() {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "peer routing disabled");
            return;
        }
    };
    let mut last_waiting = Vec::new();
    loop {
        let started = tokio::time::Instant::now();
        let rv = match pass(&client, &handle, &cfg, &mut last_waiting).await {
            Ok(rv) => rv,
            Err(e) => {
                tracing::warn!(error = %e, "peer routing pass failed; retrying");
                String::new()
            }
        };
        let wait = wait_for_change(&client, &rv);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::timeout(RESYNC, wait) => {}
        }
        let next = started + MIN_INTERVAL;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
    }
}

/// Returns at the first Node event after `rv`. A watch that breaks resumes from its last
/// resourceVersion (on another server if its own died); one that cannot resume (410) waits
/// for the resync.
async fn wait_for_change(client: &Client, rv: &str) {
    if rv.is_empty() {
        return;
    }
    let mut watch =
        ResumingWatch::<Node>::new(client.clone(), nodes(), None, ListParams::default(), rv);
    loop {
        match watch.next().await {
            Ok(WatchEvent::Bookmark(_)) => continue,
            Ok(_) => return,
            Err(_) => return std::future::pending().await,
        }
    }
}

/// One observe → plan → apply; returns the Node list's resourceVersion.
async fn pass(
    client: &Client,
    handle: &rtnetlink::Handle,
    cfg: &PeerConfig,
    last_waiting: &mut Vec<(String, &'static str)>,
) -> Result<String, PeerError> {
    let list = client
        .list::<Node>(nodes(), None, &ListParams::default())
        .await?;
    let peers: Vec<plan::Peer> = list.items.iter().map(plan::peer_of).collect();
    let mut host = netlink::observe(handle, &cfg.vxlan_device, cfg.node_ip).await?;
    let local = Local {
        node: cfg.node.clone(),
        node_ip: cfg.node_ip,
        pod_cidr: cfg.pod_cidr,
        mode: cfg.mode,
        segments: host.segments.clone(),
        addresses: host.addresses.clone(),
    };
    let planned = plan::plan(&local, &peers, &host.observed);
    let target = netlink::Target {
        vxlan_device: &cfg.vxlan_device,
        node_ip: cfg.node_ip,
        pod_cidr: cfg.pod_cidr,
    };
    let mut first_error = None;
    for action in &planned.actions {
        match netlink::apply(handle, &mut host, &target, action).await {
            Ok(()) => tracing::info!(?action, "peer routing"),
            Err(e) => {
                tracing::warn!(?action, error = %e, "peer routing action failed");
                first_error.get_or_insert(e);
            }
        }
    }
    if planned.waiting != *last_waiting {
        for (peer, why) in &planned.waiting {
            tracing::info!(%peer, reason = why, "no route to this node's pods yet");
        }
        *last_waiting = planned.waiting.clone();
    }
    if let Some(mac) = host.observed.vxlan {
        publish_mac(client, &cfg.node, &list.items, mac).await?;
    }
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(list.resource_version),
    }
}

/// Sets this node's VTEP MAC annotation unless it already says `mac`.
async fn publish_mac(
    client: &Client,
    node: &str,
    nodes_now: &[Node],
    mac: plan::Mac,
) -> Result<(), PeerError> {
    let wanted = mac.to_string();
    let current = nodes_now
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(VTEP_MAC_ANNOTATION));
    if current == Some(&wanted) {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {VTEP_MAC_ANNOTATION: wanted}}});
    client
        .merge_patch::<Node>(nodes(), None, node, &patch, false)
        .await?;
    tracing::info!(mac = %wanted, "published the VXLAN MAC");
    Ok(())
}
