//! Which routes, VXLAN neighbours and forwarding entries this node needs to reach every other
//! node's pod subnet, from the Nodes and what the kernel holds: a gateway route through the
//! peer's address when the peer shares a segment with this node (host-gw), else a route through
//! the VXLAN device with a static neighbour and FDB entry for the peer's VTEP (flannel's
//! scheme: the peer's pod subnet via the subnet's network address, `onlink`, whose neighbour is
//! the peer's VTEP MAC, whose FDB entry sends to the peer's node address).
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::core::v1::Node;

use crate::network::Ipv4Cidr;

/// The Node annotation that publishes a node's VXLAN device MAC (flannel publishes the same
/// fact as `flannel.alpha.coreos.com/backend-data`).
pub const VTEP_MAC_ANNOTATION: &str = "network.berth.io/vtep-mac";

/// A link-layer address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl FromStr for Mac {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or("expected six colon-separated bytes")?;
            if part.len() != 2 {
                return Err("expected two hex digits per byte");
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| "not a hex byte")?;
        }
        if parts.next().is_some() {
            return Err("expected six colon-separated bytes");
        }
        Ok(Mac(out))
    }
}

/// How pod traffic reaches other nodes (`--pod-network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodNetworkMode {
    /// host-gw to peers on a shared segment, VXLAN to the others.
    #[default]
    Auto,
    /// Only host-gw: peers on another segment are unreachable (and said so in the log).
    HostGw,
    /// VXLAN to every peer.
    Vxlan,
}

impl FromStr for PodNetworkMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(PodNetworkMode::Auto),
            "host-gw" => Ok(PodNetworkMode::HostGw),
            "vxlan" => Ok(PodNetworkMode::Vxlan),
            other => Err(format!(
                "unknown pod network mode {other:?} (auto, host-gw or vxlan)"
            )),
        }
    }
}

/// This node, as the plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    pub node: String,
    pub node_ip: Ipv4Addr,
    pub pod_cidr: Ipv4Cidr,
    pub mode: PodNetworkMode,
    /// Subnets this host's interfaces are on (address and prefix), VXLAN device excepted.
    pub segments: Vec<Ipv4Cidr>,
    /// Every IPv4 address of this host.
    pub addresses: Vec<Ipv4Addr>,
}

/// Another Node, as the plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub node_ip: Option<Ipv4Addr>,
    pub pod_cidr: Option<Ipv4Cidr>,
    pub vtep_mac: Option<Mac>,
}

/// A Node's routing facts: its InternalIP, `spec.podCIDR` and published VTEP MAC (each `None`
/// when missing or malformed).
pub fn peer_of(node: &Node) -> Peer {
    let node_ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .and_then(|a| a.address.parse().ok());
    let pod_cidr = node
        .spec
        .as_ref()
        .and_then(|s| s.pod_cidr.as_deref())
        .and_then(|c| c.parse().ok());
    let vtep_mac = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VTEP_MAC_ANNOTATION))
        .and_then(|m| m.parse().ok());
    Peer {
        name: node.metadata.name.clone().unwrap_or_default(),
        node_ip,
        pod_cidr,
        vtep_mac,
    }
}

/// Where a route to a peer's pod subnet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    /// The peer's node address, on a shared segment.
    Gateway(Ipv4Addr),
    /// The VXLAN device, to this (the peer subnet's network) address, `onlink`.
    Vxlan(Ipv4Addr),
}

/// A route this agent owns (its route protocol marks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PeerRoute {
    pub dst: Ipv4Cidr,
    pub via: Via,
}

/// What the kernel holds of ours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The VXLAN device's MAC, when the device exists.
    pub vxlan: Option<Mac>,
    /// Routes with this agent's route protocol in the main table.
    pub routes: Vec<PeerRoute>,
    /// Permanent neighbour entries on the VXLAN device.
    pub neighbours: Vec<(Ipv4Addr, Mac)>,
    /// Permanent FDB entries on the VXLAN device (MAC → remote node address).
    pub fdb: Vec<(Mac, Ipv4Addr)>,
}

/// One change to the kernel's state, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The VXLAN device (VNI 1, UDP 8472, on the node address's interface, no learning) with
    /// the pod subnet's network address as `/32`, up.
    CreateVxlan,
    DelRoute(PeerRoute),
    DelNeighbour(Ipv4Addr, Mac),
    DelFdb(Mac, Ipv4Addr),
    AddFdb(Mac, Ipv4Addr),
    AddNeighbour(Ipv4Addr, Mac),
    AddRoute(PeerRoute),
}

/// The actions, and the peers left out for now (with why, for the log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub waiting: Vec<(String, &'static str)>,
}

/// How one peer is reached, or why it is not (yet).
enum Reach {
    HostGw(PeerRoute),
    Vxlan(PeerRoute, Mac, Ipv4Addr),
    /// Reached without a route of ours (same host, or its subnet is on a local interface).
    Local,
    Waiting(&'static str),
}

fn reach(local: &Local, peer: &Peer) -> Reach {
    let (Some(node_ip), Some(pod_cidr)) = (peer.node_ip, peer.pod_cidr) else {
        return Reach::Waiting("no InternalIP or podCIDR yet");
    };
    if pod_cidr.overlaps(&local.pod_cidr) {
        return Reach::Waiting("its podCIDR overlaps this node's");
    }
    if local.addresses.contains(&node_ip) || local.segments.iter().any(|s| s.overlaps(&pod_cidr)) {
        return Reach::Local;
    }
    let adjacent = local.segments.iter().any(|s| s.contains(node_ip));
    let vxlan = match local.mode {
        PodNetworkMode::Vxlan => true,
        PodNetworkMode::Auto => !adjacent,
        PodNetworkMode::HostGw if adjacent => false,
        PodNetworkMode::HostGw => {
            return Reach::Waiting(
                "not on a segment this node is on (host-gw needs one; --pod-network auto or vxlan)",
            );
        }
    };
    if !vxlan {
        return Reach::HostGw(PeerRoute {
            dst: pod_cidr,
            via: Via::Gateway(node_ip),
        });
    }
    let Some(mac) = peer.vtep_mac else {
        return Reach::Waiting("needs VXLAN and has not published its VTEP MAC yet");
    };
    Reach::Vxlan(
        PeerRoute {
            dst: pod_cidr,
            via: Via::Vxlan(pod_cidr.addr),
        },
        mac,
        node_ip,
    )
}

/// Plans the routes (and VXLAN entries) to every peer but this node, and the removal of those
/// of nodes that are gone or now reached otherwise.
pub fn plan(local: &Local, peers: &[Peer], observed: &Observed) -> Plan {
    let mut out = Plan::default();
    let mut routes = Vec::new();
    let mut neighbours = Vec::new();
    let mut fdb = Vec::new();
    let mut wants_vxlan = local.mode == PodNetworkMode::Vxlan;
    for peer in peers.iter().filter(|p| p.name != local.node) {
        match reach(local, peer) {
            Reach::HostGw(route) => routes.push(route),
            Reach::Vxlan(route, mac, node_ip) => {
                wants_vxlan = true;
                routes.push(route);
                neighbours.push((route.dst.addr, mac));
                fdb.push((mac, node_ip));
            }
            Reach::Local => {}
            Reach::Waiting(why) => {
                if peer.node_ip.is_some()
                    && local.mode == PodNetworkMode::Auto
                    && !local
                        .segments
                        .iter()
                        .any(|s| peer.node_ip.is_some_and(|ip| s.contains(ip)))
                {
                    // A peer beyond this segment needs our VTEP too, to answer.
                    wants_vxlan = true;
                }
                out.waiting.push((peer.name.clone(), why));
            }
        }
    }
    if wants_vxlan && observed.vxlan.is_none() {
        out.actions.push(Action::CreateVxlan);
    }
    for r in &observed.routes {
        if !routes.contains(r) {
            out.actions.push(Action::DelRoute(*r));
        }
    }
    for &(ip, mac) in &observed.neighbours {
        if !neighbours.contains(&(ip, mac)) {
            out.actions.push(Action::DelNeighbour(ip, mac));
        }
    }
    for &(mac, ip) in &observed.fdb {
        if !fdb.contains(&(mac, ip)) {
            out.actions.push(Action::DelFdb(mac, ip));
        }
    }
    for &(mac, ip) in &fdb {
        if !observed.fdb.contains(&(mac, ip)) {
            out.actions.push(Action::AddFdb(mac, ip));
        }
    }
    for &(ip, mac) in &neighbours {
        if !observed.neighbours.contains(&(ip, mac)) {
            out.actions.push(Action::AddNeighbour(ip, mac));
        }
    }
    for r in &routes {
        if !observed.routes.contains(r) {
            out.actions.push(Action::AddRoute(*r));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    const MAC_C: Mac = Mac([0x0a, 0, 0, 0, 0, 0x0c]);
    const MAC_D: Mac = Mac([0x0a, 0, 0, 0, 0, 0x0d]);

    /// Node a at 172.31.1.10 on segment 172.31.1.0/24 with pods on 10.42.1.0/24.
    fn local(mode: PodNetworkMode) -> Local {
        Local {
            node: "a".into(),
            node_ip: ip("172.31.1.10"),
            pod_cidr: cidr("10.42.1.0/24"),
            mode,
            segments: vec![
                cidr("172.31.1.0/24"),
                cidr("10.42.1.0/24"),
                cidr("127.0.0.0/8"),
            ],
            addresses: vec![ip("172.31.1.10"), ip("10.42.1.1"), ip("127.0.0.1")],
        }
    }

    fn peer(name: &str, node_ip: &str, pod_cidr: &str, mac: Option<Mac>) -> Peer {
        Peer {
            name: name.into(),
            node_ip: Some(ip(node_ip)),
            pod_cidr: Some(cidr(pod_cidr)),
            vtep_mac: mac,
        }
    }

    /// b on the same segment, c behind a router (VTEP published), d behind it (not yet).
    fn peers() -> Vec<Peer> {
        vec![
            peer("a", "172.31.1.10", "10.42.1.0/24", None),
            peer("b", "172.31.1.11", "10.42.2.0/24", None),
            peer("c", "172.31.2.10", "10.42.3.0/24", Some(MAC_C)),
            peer("d", "172.31.2.11", "10.42.4.0/24", None),
        ]
    }

    fn gw(dst: &str, via: &str) -> PeerRoute {
        PeerRoute {
            dst: cidr(dst),
            via: Via::Gateway(ip(via)),
        }
    }
    fn vx(dst: &str) -> PeerRoute {
        PeerRoute {
            dst: cidr(dst),
            via: Via::Vxlan(cidr(dst).addr),
        }
    }

    /// The host as the plan for `peers()` leaves it, but with b's route via `b_via` and c's
    /// entries for VTEP `c_mac`.
    fn observed(b_via: &str, c_mac: Mac) -> Observed {
        Observed {
            vxlan: Some(Mac([2; 6])),
            routes: vec![gw("10.42.2.0/24", b_via), vx("10.42.3.0/24")],
            neighbours: vec![(ip("10.42.3.0"), c_mac)],
            fdb: vec![(c_mac, ip("172.31.2.10"))],
        }
    }

    #[test]
    fn auto_routes_the_segment_directly_and_the_rest_through_vxlan() {
        let p = plan(&local(PodNetworkMode::Auto), &peers(), &Observed::default());
        assert_eq!(
            p.actions,
            vec![
                Action::CreateVxlan,
                Action::AddFdb(MAC_C, ip("172.31.2.10")),
                Action::AddNeighbour(ip("10.42.3.0"), MAC_C),
                Action::AddRoute(gw("10.42.2.0/24", "172.31.1.11")),
                Action::AddRoute(vx("10.42.3.0/24")),
            ]
        );
        assert_eq!(
            p.waiting,
            vec![(
                "d".into(),
                "needs VXLAN and has not published its VTEP MAC yet"
            )]
        );
    }

    #[test]
    fn a_converged_node_plans_nothing() {
        let observed = observed("172.31.1.11", MAC_C);
        let p = plan(&local(PodNetworkMode::Auto), &peers(), &observed);
        assert_eq!(p.actions, vec![]);
    }

    #[test]
    fn a_node_gone_takes_its_route_neighbour_and_fdb_entry_with_it() {
        let observed = observed("172.31.1.11", MAC_C);
        let only_a_and_b = &peers()[..2];
        let p = plan(&local(PodNetworkMode::Auto), only_a_and_b, &observed);
        assert_eq!(
            p.actions,
            vec![
                Action::DelRoute(vx("10.42.3.0/24")),
                Action::DelNeighbour(ip("10.42.3.0"), MAC_C),
                Action::DelFdb(MAC_C, ip("172.31.2.10")),
            ]
        );
    }

    #[test]
    fn a_moved_peer_gets_its_route_replaced_and_a_new_vtep_mac_its_entries() {
        let observed = observed("172.31.1.99", MAC_D);
        let p = plan(&local(PodNetworkMode::Auto), &peers()[..3], &observed);
        assert_eq!(
            p.actions,
            vec![
                Action::DelRoute(gw("10.42.2.0/24", "172.31.1.99")),
                Action::DelNeighbour(ip("10.42.3.0"), MAC_D),
                Action::DelFdb(MAC_D, ip("172.31.2.10")),
                Action::AddFdb(MAC_C, ip("172.31.2.10")),
                Action::AddNeighbour(ip("10.42.3.0"), MAC_C),
                Action::AddRoute(gw("10.42.2.0/24", "172.31.1.11")),
            ]
        );
    }

    #[test]
    fn vxlan_mode_tunnels_even_to_the_segment_and_host_gw_mode_never() {
        let mut ps = peers();
        ps[1].vtep_mac = Some(MAC_D);
        let tunnelled = vec![
            Action::CreateVxlan,
            Action::AddFdb(MAC_D, ip("172.31.1.11")),
            Action::AddNeighbour(ip("10.42.2.0"), MAC_D),
            Action::AddRoute(vx("10.42.2.0/24")),
        ];
        let p = plan(
            &local(PodNetworkMode::Vxlan),
            &ps[..2],
            &Observed::default(),
        );
        assert_eq!(p.actions, tunnelled);
        let p = plan(
            &local(PodNetworkMode::HostGw),
            &peers(),
            &Observed::default(),
        );
        assert_eq!(
            p.actions,
            vec![Action::AddRoute(gw("10.42.2.0/24", "172.31.1.11"))]
        );
        assert_eq!(
            p.waiting
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            vec!["c", "d"]
        );
    }

    #[test]
    fn the_vxlan_device_is_made_for_a_far_peer_before_it_publishes_its_mac() {
        // d must learn our MAC to answer; we make our device even though d's is unknown.
        let ps = vec![peer("d", "172.31.2.11", "10.42.4.0/24", None)];
        let p = plan(&local(PodNetworkMode::Auto), &ps, &Observed::default());
        assert_eq!(p.actions, vec![Action::CreateVxlan]);
        // Only segment peers: no device.
        let p = plan(
            &local(PodNetworkMode::Auto),
            &peers()[..2],
            &Observed::default(),
        );
        assert!(!p.actions.contains(&Action::CreateVxlan));
    }

    #[test]
    fn peers_on_this_host_or_with_a_local_subnet_get_no_route() {
        // Several agents in one network namespace (the single-host test harness): their
        // bridges' subnets are local, their node address is this host's.
        let mut l = local(PodNetworkMode::Auto);
        l.segments.push(cidr("10.42.2.0/24"));
        let ps = vec![
            peer("b", "172.31.1.11", "10.42.2.0/24", None),
            peer("c", "127.0.0.1", "10.42.3.0/24", None),
            peer("e", "172.31.1.12", "10.42.1.0/25", None),
            Peer {
                name: "f".into(),
                node_ip: None,
                pod_cidr: None,
                vtep_mac: None,
            },
        ];
        let p = plan(&l, &ps, &Observed::default());
        assert_eq!(p.actions, vec![]);
        assert_eq!(
            p.waiting,
            vec![
                ("e".into(), "its podCIDR overlaps this node's"),
                ("f".into(), "no InternalIP or podCIDR yet")
            ]
        );
    }

    #[test]
    fn peers_come_from_nodes_and_macs_round_trip() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "c", "annotations": {VTEP_MAC_ANNOTATION: "0a:00:00:00:00:0c"}},
            "spec": {"podCIDR": "10.42.3.0/24"},
            "status": {"addresses": [
                {"type": "Hostname", "address": "c"},
                {"type": "InternalIP", "address": "172.31.2.10"}
            ]}
        }))
        .unwrap();
        assert_eq!(
            peer_of(&node),
            peer("c", "172.31.2.10", "10.42.3.0/24", Some(MAC_C))
        );
        assert_eq!(MAC_C.to_string(), "0a:00:00:00:00:0c");
        for bad in [
            "0a:00:00:00:00",
            "0a:00:00:00:00:0c:01",
            "0a:0:00:00:00:0c",
            "zz:00:00:00:00:0c",
        ] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(
            peer_of(&bare),
            Peer {
                name: "x".into(),
                node_ip: None,
                pod_cidr: None,
                vtep_mac: None
            }
        );
        assert_eq!("host-gw".parse(), Ok(PodNetworkMode::HostGw));
        assert!("flannel".parse::<PodNetworkMode>().is_err());
    }
}
