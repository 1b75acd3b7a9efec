//! L2 announcement of load-balancer addresses: the node elected for an address ([`plan`])
//! adds it as a /32 to its interface facing the segment (the one holding the node address),
//! so the kernel answers ARP for it and the proxy's rules take the traffic, and sends a
//! gratuitous ARP so the segment's neighbours forget the previous holder at once; a node no
//! longer elected removes it. Our addresses carry the address protocol [`ADDRESS_PROTOCOL`]
//! (`IFA_PROTO`, kernel 6.1+; iproute2 newer than Debian 12's shows it with `ip -4 addr show
//! proto 98`), so a restarted agent, `berth-agent uninstall` and the network teardown find
//! exactly them, with nothing kept on disk.
//!
//! Passes run on every change of the Nodes' readiness or addresses and of the Services and
//! EndpointSlices, and every [`RESYNC`] (an address someone removed comes back).

pub mod plan;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use berth_api::client::{Client, ListParams, ResumingWatch, WatchEvent};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use rtnetlink::Handle;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage, AddressProtocol};
use rtnetlink::packet_route::link::LinkAttribute;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::command;
use super::peers::netlink::{self, NetlinkError};
use super::service_state::ServiceState;
use plan::{Held, NodeView};

/// The address protocol number marking the addresses this agent adds (the route protocol
/// its peer routes carry, too).
pub const ADDRESS_PROTOCOL: u8 = 98;
/// How often the kernel is re-read without a change.
const RESYNC: Duration = Duration::from_secs(3);

/// What the announcer is told at start.
#[derive(Debug, Clone)]
pub struct AnnounceConfig {
    pub node: String,
    /// The node address: its interface faces the segment.
    pub node_ip: Ipv4Addr,
}

fn request(what: &'static str) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
    move |source| NetlinkError::Request {
        what: what.to_string(),
        source,
    }
}

fn is_ours(msg: &AddressMessage) -> bool {
    msg.attributes
        .contains(&AddressAttribute::Protocol(AddressProtocol::Other(
            ADDRESS_PROTOCOL,
        )))
}

fn ipv4_of(msg: &AddressMessage) -> Option<Ipv4Addr> {
    msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Address(IpAddr::V4(ip)) => Some(*ip),
        _ => None,
    })
}

/// The host as the plan sees it: the node link's index and our addresses.
struct Observed {
    node_link: Option<u32>,
    ours: Vec<(Held, AddressMessage)>,
}

async fn observe(handle: &Handle, node_ip: Ipv4Addr) -> Result<Observed, NetlinkError> {
    let mut all = Vec::new();
    let mut dump = handle.address().get().execute();
    while let Some(msg) = dump.try_next().await.map_err(request("address dump"))? {
        all.push(msg);
    }
    let node_link = all
        .iter()
        .find(|m| ipv4_of(m) == Some(node_ip))
        .map(|m| m.header.index);
    let ours = all
        .into_iter()
        .filter(is_ours)
        .filter_map(|m| {
            let ip = ipv4_of(&m)?;
            let held = Held {
                ip,
                on_node_link: Some(m.header.index) == node_link,
            };
            Some((held, m))
        })
        .collect();
    Ok(Observed { node_link, ours })
}

async fn link_name(handle: &Handle, index: u32) -> Result<String, NetlinkError> {
    let mut links = handle.link().get().match_index(index).execute();
    while let Some(msg) = links.try_next().await.map_err(request("link get"))? {
        for attr in msg.attributes {
            if let LinkAttribute::IfName(n) = attr {
                return Ok(n);
            }
        }
    }
    Ok(String::new())
}

async fn add(handle: &Handle, index: u32, ip: Ipv4Addr) -> Result<(), NetlinkError> {
    let mut req = handle.address().add(index, IpAddr::V4(ip), 32);
    req.message_mut()
        .attributes
        .push(AddressAttribute::Protocol(AddressProtocol::Other(
            ADDRESS_PROTOCOL,
        )));
    match req.execute().await {
        Ok(()) => Ok(()),
        // Already there (another agent of this host holds it): ours to announce all the same.
        Err(rtnetlink::Error::NetlinkError(e))
            if e.to_io().kind() == std::io::ErrorKind::AlreadyExists =>
        {
            Ok(())
        }
        Err(e) => Err(request("address add")(e)),
    }
}

/// Tells the segment that `ip` is now at this interface's MAC (unsolicited ARP, with
/// iputils' `arping`; without it the neighbours learn at their next ARP request).
async fn gratuitous_arp(link: &str, ip: Ipv4Addr) {
    let ip = ip.to_string();
    match command::tool("arping", &["-U", "-c", "1", "-I", link, &ip]).await {
        Ok(_) => tracing::debug!(%ip, link, "gratuitous ARP sent"),
        Err(e) => {
            tracing::warn!(%ip, link, error = %e, "no gratuitous ARP (is iputils-arping installed?)")
        }
    }
}

/// Removes every address of ours on this host (uninstall, network teardown); returns how many.
pub async fn remove_all(handle: &Handle) -> Result<usize, NetlinkError> {
    let observed = observe(handle, Ipv4Addr::UNSPECIFIED).await?;
    let n = observed.ours.len();
    for (_, msg) in observed.ours {
        handle
            .address()
            .del(msg)
            .execute()
            .await
            .map_err(request("address del"))?;
    }
    Ok(n)
}

/// One observe → plan → apply.
async fn pass(
    handle: &Handle,
    cfg: &AnnounceConfig,
    nodes: &[NodeView],
    state: &ServiceState,
) -> Result<(), NetlinkError> {
    let services: Vec<Service> = state.services.values().cloned().collect();
    let slices: Vec<EndpointSlice> = state.slices.values().cloned().collect();
    let elected = plan::announcements(nodes, &services, &slices);
    let observed = observe(handle, cfg.node_ip).await?;
    let held: Vec<Held> = observed.ours.iter().map(|(h, _)| *h).collect();
    let planned = plan::plan(&cfg.node, &elected, &held);
    for h in &planned.remove {
        if let Some((_, msg)) = observed.ours.iter().find(|(o, _)| o == h) {
            handle
                .address()
                .del(msg.clone())
                .execute()
                .await
                .map_err(request("address del"))?;
            tracing::info!(ip = %h.ip, "load-balancer address no longer announced here");
        }
    }
    if planned.add.is_empty() {
        return Ok(());
    }
    let index = observed
        .node_link
        .ok_or(NetlinkError::NoNodeInterface(cfg.node_ip))?;
    let link = link_name(handle, index).await?;
    for ip in planned.add {
        add(handle, index, ip).await?;
        tracing::info!(%ip, %link, "announcing load-balancer address");
        gratuitous_arp(&link, ip).await;
    }
    Ok(())
}

fn nodes_rt() -> &'static berth_api::resource::ResourceType {
    crate::node::rt("nodes", "", "v1")
}

/// Keeps `tx` at the Nodes' views: a list, then a watch until the first event (or the resync),
/// then a list again; the views are only sent when they changed (heartbeats do not count).
async fn watch_nodes(client: Client, tx: watch::Sender<Option<Vec<NodeView>>>) {
    loop {
        let rv = match client
            .list::<Node>(nodes_rt(), None, &ListParams::default())
            .await
        {
            Ok(list) => {
                let mut views: Vec<NodeView> = list.items.iter().map(plan::node_view).collect();
                views.sort_by(|a, b| a.name.cmp(&b.name));
                tx.send_if_modified(|v| {
                    let changed = v.as_ref() != Some(&views);
                    *v = Some(views);
                    changed
                });
                list.resource_version
            }
            Err(e) => {
                tracing::debug!(error = %e, "announcer: listing nodes failed");
                String::new()
            }
        };
        let wait = async {
            if rv.is_empty() {
                return std::future::pending().await;
            }
            let mut w = ResumingWatch::<Node>::new(
                client.clone(),
                nodes_rt(),
                None,
                ListParams::default(),
                &rv,
            );
            loop {
                match w.next().await {
                    Ok(WatchEvent::Bookmark(_)) => continue,
                    Ok(_) => return,
                    Err(_) => return std::future::pending().await,
                }
            }
        };
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::timeout(RESYNC, wait) => {}
        }
    }
}

/// Runs until `shutdown`. Addresses stay on the interface when the agent stops (a restarted
/// agent keeps announcing without a gap); uninstall and the network teardown remove them.
pub async fn run(
    client: Client,
    mut services: watch::Receiver<Arc<ServiceState>>,
    cfg: AnnounceConfig,
    shutdown: CancellationToken,
) {
    let handle = match netlink::connect() {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "load-balancer announcement disabled");
            return;
        }
    };
    let (tx, mut nodes) = watch::channel(None);
    let watcher = tokio::spawn(watch_nodes(client, tx));
    let mut last_error = String::new();
    loop {
        let state = services.borrow_and_update().clone();
        let views = nodes.borrow_and_update().clone();
        if let (true, Some(views)) = (state.synced, views) {
            match pass(&handle, &cfg, &views, &state).await {
                Ok(()) => last_error.clear(),
                Err(e) => {
                    let text = e.to_string();
                    if text != last_error {
                        tracing::warn!(error = %text, "announcing load-balancer addresses failed");
                    }
                    last_error = text;
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = services.changed() => if changed.is_err() { break },
            changed = nodes.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(RESYNC) => {}
        }
    }
    watcher.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_with_our_protocol_are_ours() {
        let mut msg = AddressMessage::default();
        msg.attributes
            .push(AddressAttribute::Address(IpAddr::V4(Ipv4Addr::new(
                192, 0, 2, 1,
            ))));
        assert!(!is_ours(&msg));
        assert_eq!(ipv4_of(&msg), Some(Ipv4Addr::new(192, 0, 2, 1)));
        msg.attributes
            .push(AddressAttribute::Protocol(AddressProtocol::Other(
                ADDRESS_PROTOCOL,
            )));
        assert!(is_ours(&msg));
    }
}
