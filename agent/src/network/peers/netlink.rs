//! The kernel's side of peer routing, over rtnetlink: reads this host's interfaces, addresses,
//! the routes this agent owns (route protocol [`ROUTE_PROTOCOL`]) and the VXLAN device's
//! neighbour and FDB entries; applies the planner's actions. The only file that speaks netlink.

use std::net::{IpAddr, Ipv4Addr};

use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::LinkAttribute;
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteProtocol};
use rtnetlink::{Handle, LinkVxlan, RouteMessageBuilder};

use super::plan::{Action, Mac, Observed, PeerRoute, Via};
use crate::network::Ipv4Cidr;

/// The route protocol number marking the routes this agent programs (`ip route show proto 98`),
/// so it finds (and removes) exactly its own.
pub const ROUTE_PROTOCOL: u8 = 98;
/// flannel's VXLAN id and UDP port.
pub const VNI: u32 = 1;
pub const VXLAN_PORT: u16 = 8472;
/// VXLAN over IPv4 costs 50 bytes of each packet.
const VXLAN_OVERHEAD: u32 = 50;
const MAIN_TABLE: u32 = 254;

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink: {0}")]
    Connect(std::io::Error),
    #[error("netlink {what}: {source}")]
    Request {
        what: String,
        source: rtnetlink::Error,
    },
    #[error("no interface holds the node address {0}")]
    NoNodeInterface(Ipv4Addr),
    #[error("the VXLAN device {0} does not exist")]
    NoVxlan(String),
}

fn request(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
    let what = what.into();
    move |source| NetlinkError::Request { what, source }
}

/// A netlink connection in the calling task's network namespace.
pub fn connect() -> Result<Handle, NetlinkError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Connect)?;
    tokio::spawn(connection);
    Ok(handle)
}

/// One interface.
#[derive(Debug, Clone)]
struct Link {
    index: u32,
    name: String,
    mac: Option<Mac>,
    mtu: u32,
}

/// This host as the peer plan sees it.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// Subnets of every IPv4 address, the VXLAN device's excepted.
    pub segments: Vec<Ipv4Cidr>,
    pub addresses: Vec<Ipv4Addr>,
    pub observed: Observed,
    vxlan_index: Option<u32>,
    /// The interface holding the node address, and its MTU.
    node_link: Option<(u32, u32)>,
}

fn mac_of(bytes: &[u8]) -> Option<Mac> {
    <[u8; 6]>::try_from(bytes).ok().map(Mac)
}

async fn links(handle: &Handle) -> Result<Vec<Link>, NetlinkError> {
    let mut out = Vec::new();
    let mut stream = handle.link().get().execute();
    while let Some(msg) = stream.try_next().await.map_err(request("link dump"))? {
        let mut link = Link {
            index: msg.header.index,
            name: String::new(),
            mac: None,
            mtu: 1500,
        };
        for attr in msg.attributes {
            match attr {
                LinkAttribute::IfName(n) => link.name = n,
                LinkAttribute::Address(a) => link.mac = mac_of(&a),
                LinkAttribute::Mtu(m) => link.mtu = m,
                _ => {}
            }
        }
        out.push(link);
    }
    Ok(out)
}

/// Reads what the plan needs: addresses and segments, and the routes, neighbours and FDB
/// entries of ours.
pub async fn observe(
    handle: &Handle,
    vxlan_device: &str,
    node_ip: Ipv4Addr,
) -> Result<Host, NetlinkError> {
    let links = links(handle).await?;
    let vxlan = links.iter().find(|l| l.name == vxlan_device);
    let mut host = Host {
        vxlan_index: vxlan.map(|l| l.index),
        ..Host::default()
    };
    host.observed.vxlan = vxlan.and_then(|l| l.mac);

    let mut addrs = handle.address().get().execute();
    while let Some(msg) = addrs.try_next().await.map_err(request("address dump"))? {
        if Some(msg.header.index) == host.vxlan_index {
            continue;
        }
        for attr in &msg.attributes {
            if let AddressAttribute::Address(IpAddr::V4(ip)) = attr {
                host.addresses.push(*ip);
                host.segments
                    .push(Ipv4Cidr::containing(*ip, msg.header.prefix_len));
                if *ip == node_ip {
                    let mtu = links
                        .iter()
                        .find(|l| l.index == msg.header.index)
                        .map_or(1500, |l| l.mtu);
                    host.node_link = Some((msg.header.index, mtu));
                }
            }
        }
    }
    host.segments.sort();
    host.segments.dedup();

    let mut routes = handle
        .route()
        .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
        .execute();
    while let Some(msg) = routes.try_next().await.map_err(request("route dump"))? {
        if msg.header.protocol != RouteProtocol::Other(ROUTE_PROTOCOL) {
            continue;
        }
        let mut dst = None;
        let mut gateway = None;
        let mut oif = None;
        let mut table = u32::from(msg.header.table);
        for attr in &msg.attributes {
            match attr {
                RouteAttribute::Destination(RouteAddress::Inet(a)) => dst = Some(*a),
                RouteAttribute::Gateway(RouteAddress::Inet(a)) => gateway = Some(*a),
                RouteAttribute::Oif(i) => oif = Some(*i),
                RouteAttribute::Table(t) => table = *t,
                _ => {}
            }
        }
        let (Some(dst), Some(gw)) = (dst, gateway) else {
            continue;
        };
        if table != MAIN_TABLE {
            continue;
        }
        let dst = Ipv4Cidr::containing(dst, msg.header.destination_prefix_length);
        let via = if oif.is_some() && oif == host.vxlan_index {
            Via::Vxlan(gw)
        } else {
            Via::Gateway(gw)
        };
        host.observed.routes.push(PeerRoute { dst, via });
    }

    if let Some(index) = host.vxlan_index {
        host.observed.neighbours = entries(handle, index, AddressFamily::Inet).await?;
        host.observed.fdb = entries(handle, index, AddressFamily::Bridge)
            .await?
            .into_iter()
            .filter(|(_, mac)| mac.0 != [0; 6])
            .map(|(ip, mac)| (mac, ip))
            .collect();
    }
    Ok(host)
}

/// Permanent (address, MAC) entries of one device: neighbours (`Inet`) or FDB (`Bridge`).
async fn entries(
    handle: &Handle,
    index: u32,
    family: AddressFamily,
) -> Result<Vec<(Ipv4Addr, Mac)>, NetlinkError> {
    let mut out = Vec::new();
    let mut stream = handle
        .neighbours()
        .get()
        .set_address_family(family)
        .execute();
    while let Some(msg) = stream.try_next().await.map_err(request("neighbour dump"))? {
        if msg.header.ifindex != index || msg.header.state != NeighbourState::Permanent {
            continue;
        }
        let mut ip = None;
        let mut mac = None;
        for attr in &msg.attributes {
            match attr {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => ip = Some(*a),
                // FDB entries (family AF_BRIDGE) carry their IPv4 destination undecoded.
                NeighbourAttribute::Destination(NeighbourAddress::Other(bytes)) => {
                    ip = <[u8; 4]>::try_from(bytes.as_slice())
                        .ok()
                        .map(Ipv4Addr::from);
                }
                NeighbourAttribute::LinkLayerAddress(l) => mac = mac_of(l),
                _ => {}
            }
        }
        if let (Some(ip), Some(mac)) = (ip, mac) {
            out.push((ip, mac));
        }
    }
    Ok(out)
}

/// The MTU pods must use so their packets still fit when tunnelled: the MTU of the interface
/// holding `node_ip` less the VXLAN overhead (`None` when no interface holds it).
pub async fn tunnelled_pod_mtu(handle: &Handle, node_ip: Ipv4Addr) -> Option<u32> {
    let host = observe(handle, "", node_ip).await.ok()?;
    host.node_link
        .map(|(_, mtu)| mtu.saturating_sub(VXLAN_OVERHEAD))
}

/// What an action needs beyond itself.
pub struct Target<'a> {
    pub vxlan_device: &'a str,
    pub node_ip: Ipv4Addr,
    pub pod_cidr: Ipv4Cidr,
}

fn route_message(
    route: &PeerRoute,
    vxlan_index: Option<u32>,
) -> Result<rtnetlink::packet_route::route::RouteMessage, NetlinkError> {
    let b = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.dst.addr, route.dst.prefix)
        .protocol(RouteProtocol::Other(ROUTE_PROTOCOL));
    Ok(match route.via {
        Via::Gateway(gw) => b.gateway(gw).build(),
        Via::Vxlan(gw) => b
            .gateway(gw)
            .output_interface(vxlan_index.ok_or_else(|| NetlinkError::NoVxlan(String::new()))?)
            .onlink()
            .build(),
    })
}

fn fdb_message(index: u32, mac: Mac, ip: Ipv4Addr) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.0.to_vec()));
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
    msg
}

fn neighbour_message(index: u32, ip: Ipv4Addr, mac: Mac) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Inet;
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.0.to_vec()));
    msg
}

/// Applies one action; `host` is what [`observe`] returned this pass (a created VXLAN device
/// is recorded in it for the actions after).
pub async fn apply(
    handle: &Handle,
    host: &mut Host,
    target: &Target<'_>,
    action: &Action,
) -> Result<(), NetlinkError> {
    let vx = |host: &Host| {
        host.vxlan_index
            .ok_or_else(|| NetlinkError::NoVxlan(target.vxlan_device.to_string()))
    };
    // Every other action is one request: built here, sent below with what it was for.
    let (sent, what): (BoxFuture<'_, Result<(), rtnetlink::Error>>, String) = match *action {
        Action::CreateVxlan => return create_vxlan(handle, host, target).await,
        Action::AddRoute(route) => {
            let msg = route_message(&route, host.vxlan_index)?;
            let add = handle.route().add(msg).replace();
            (add.execute().boxed(), format!("add route {}", route.dst))
        }
        Action::DelRoute(route) => {
            let msg = route_message(&route, host.vxlan_index)?;
            let del = handle.route().del(msg);
            (del.execute().boxed(), format!("delete route {}", route.dst))
        }
        Action::AddNeighbour(ip, mac) => {
            let add = handle
                .neighbours()
                .add(vx(host)?, IpAddr::V4(ip))
                .link_layer_address(&mac.0)
                .state(NeighbourState::Permanent)
                .replace();
            (add.execute().boxed(), format!("add neighbour {ip}"))
        }
        Action::DelNeighbour(ip, mac) => {
            let del = handle
                .neighbours()
                .del(neighbour_message(vx(host)?, ip, mac));
            (del.execute().boxed(), format!("delete neighbour {ip}"))
        }
        Action::AddFdb(mac, ip) => {
            let add = handle
                .neighbours()
                .add_bridge(vx(host)?, &mac.0)
                .destination(IpAddr::V4(ip))
                .flags(NeighbourFlags::Own)
                .state(NeighbourState::Permanent)
                .replace();
            (add.execute().boxed(), format!("add fdb {mac} → {ip}"))
        }
        Action::DelFdb(mac, ip) => {
            let del = handle.neighbours().del(fdb_message(vx(host)?, mac, ip));
            (del.execute().boxed(), format!("delete fdb {mac} → {ip}"))
        }
    };
    sent.await.map_err(request(what))
}

/// Creates the VXLAN device on the node's interface, records it in `host`, and gives it this
/// node's pod subnet address (the neighbour entries of other nodes point at theirs).
async fn create_vxlan(
    handle: &Handle,
    host: &mut Host,
    target: &Target<'_>,
) -> Result<(), NetlinkError> {
    let (dev, mtu) = host
        .node_link
        .ok_or(NetlinkError::NoNodeInterface(target.node_ip))?;
    let msg = LinkVxlan::new(target.vxlan_device, VNI)
        .dev(dev)
        .port(VXLAN_PORT)
        .local(target.node_ip)
        .learning(false)
        .mtu(mtu.saturating_sub(VXLAN_OVERHEAD))
        .up()
        .build();
    let create = handle.link().add(msg).execute();
    let what = format!("create {}", target.vxlan_device);
    create.await.map_err(request(what))?;
    let created = links(handle)
        .await?
        .into_iter()
        .find(|l| l.name == target.vxlan_device)
        .ok_or_else(|| NetlinkError::NoVxlan(target.vxlan_device.to_string()))?;
    host.vxlan_index = Some(created.index);
    host.observed.vxlan = created.mac;
    handle
        .address()
        .add(created.index, IpAddr::V4(target.pod_cidr.addr), 32)
        .execute()
        .await
        .map_err(request(format!("address on {}", target.vxlan_device)))
}

/// Removes every route of ours and the VXLAN device (its neighbours and FDB entries go with
/// it), for uninstall. Returns how many things went.
pub async fn remove_all(
    handle: &Handle,
    vxlan_device: &str,
    node_ip: Ipv4Addr,
) -> Result<usize, NetlinkError> {
    let host = observe(handle, vxlan_device, node_ip).await?;
    let mut removed = 0;
    for route in &host.observed.routes {
        let msg = route_message(route, host.vxlan_index)?;
        let delete = handle.route().del(msg).execute();
        let what = format!("delete route {}", route.dst);
        delete.await.map_err(request(what))?;
        removed += 1;
    }
    if let Some(index) = host.vxlan_index {
        handle
            .link()
            .del(index)
            .execute()
            .await
            .map_err(request(format!("delete {vxlan_device}")))?;
        removed += 1;
    }
    Ok(removed)
}
