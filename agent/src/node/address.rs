//! The node's default address, chosen as the kubelet's `ChooseHostInterface` chooses it: the
//! first global IPv4 address of the interface holding the default route (lowest metric first),
//! so that a bridge of ours, of Docker's or of another CNI never becomes the node's address just
//! because its name sorts first. Without a usable default route: the first global address of an
//! interface that is neither a bridge nor a veth, by interface name.
//!
//! Planner: pure, no I/O.

// `core::net`: the address type only, no sockets.
use core::net::Ipv4Addr;

/// One network interface of the host with its IPv4 addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostInterface {
    pub name: String,
    pub addrs: Vec<Ipv4Addr>,
    /// A Linux bridge (`/sys/class/net/<name>/bridge` exists).
    pub bridge: bool,
}

/// One IPv4 route, as `/proc/net/route` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub destination: Ipv4Addr,
    pub prefix: u32,
    pub metric: u32,
    /// `RTF_UP`.
    pub up: bool,
}

impl Route {
    fn is_default(&self) -> bool {
        self.up && self.destination.is_unspecified() && self.prefix == 0
    }
}

/// The routes of a `/proc/net/route` table. Addresses are printed as the hex of a
/// little-endian `u32` in network order: `0101A8C0` is 192.168.1.1. Lines that do not parse are
/// skipped.
pub fn parse_proc_net_route(text: &str) -> Vec<Route> {
    let addr = |hex: &str| {
        u32::from_str_radix(hex, 16)
            .ok()
            .map(|v| Ipv4Addr::from(v.to_le_bytes()))
    };
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [
                iface,
                destination,
                _gateway,
                flags,
                _refcnt,
                _use,
                metric,
                mask,
                ..,
            ] = f[..]
            else {
                return None;
            };
            Some(Route {
                iface: iface.to_string(),
                destination: addr(destination)?,
                prefix: addr(mask)?.to_bits().count_ones(),
                metric: metric.parse().ok()?,
                up: u32::from_str_radix(flags, 16).ok()? & 0x1 != 0,
            })
        })
        .collect()
}

/// An address another host could reach this one at: not loopback, link-local, unspecified,
/// broadcast or multicast.
fn is_global(ip: &Ipv4Addr) -> bool {
    !(ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast())
}

/// The node's default IPv4 address (see the module doc); `None` when the host has no global
/// IPv4 address at all.
pub fn choose_node_ip(interfaces: &[HostInterface], routes: &[Route]) -> Option<Ipv4Addr> {
    let mut defaults: Vec<&Route> = routes.iter().filter(|r| r.is_default()).collect();
    defaults.sort_by_key(|r| r.metric);
    let global = |i: &HostInterface| i.addrs.iter().copied().find(is_global);
    let via_default_route = defaults.iter().find_map(|r| {
        let i = interfaces.iter().find(|i| i.name == r.iface)?;
        global(i)
    });
    via_default_route.or_else(|| {
        let mut others: Vec<&HostInterface> = interfaces
            .iter()
            .filter(|i| !i.bridge && !i.name.starts_with("veth"))
            .collect();
        others.sort_by(|a, b| a.name.cmp(&b.name));
        others.into_iter().find_map(global)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, addrs: &[&str], bridge: bool) -> HostInterface {
        HostInterface {
            name: name.into(),
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            bridge,
        }
    }

    fn route(iface: &str, destination: &str, prefix: u32, metric: u32) -> Route {
        Route {
            iface: iface.into(),
            destination: destination.parse().unwrap(),
            prefix,
            metric,
            up: true,
        }
    }

    #[test]
    fn the_default_routes_interface_gives_the_node_ip_never_a_bridge_that_sorts_first() {
        let host = || {
            vec![
                iface("lo", &["127.0.0.1"], false),
                iface("cni0", &["10.42.0.1"], true),
                iface("berth-abc", &["10.42.1.1"], true),
                iface("docker0", &["172.17.0.1"], true),
                iface("eth0", &["192.168.1.20"], false),
                iface("wlan0", &["192.168.7.3"], false),
            ]
        };
        /// What, the host's interfaces and routes, the address chosen.
        type Case<'a> = (&'a str, Vec<HostInterface>, Vec<Route>, Option<&'a str>);
        let table: Vec<Case> = vec![
            (
                "the default route is on eth0; cni0's 10.42.0.1 sorts first but is a bridge",
                host(),
                vec![
                    route("cni0", "10.42.0.0", 24, 0),
                    route("eth0", "0.0.0.0", 0, 100),
                    route("eth0", "192.168.1.0", 24, 100),
                ],
                Some("192.168.1.20"),
            ),
            (
                "two default routes: the lower metric wins",
                host(),
                vec![
                    route("eth0", "0.0.0.0", 0, 600),
                    route("wlan0", "0.0.0.0", 0, 100),
                ],
                Some("192.168.7.3"),
            ),
            (
                "a host bridge holding the default route is the host's address",
                vec![
                    iface("br0", &["10.1.2.3"], true),
                    iface("cni0", &["10.42.0.1"], true),
                ],
                vec![route("br0", "0.0.0.0", 0, 0)],
                Some("10.1.2.3"),
            ),
            (
                "the default route's interface has only a link-local address: the next one",
                vec![
                    iface("eth0", &["169.254.3.4"], false),
                    iface("eth1", &["10.0.0.5"], false),
                ],
                vec![
                    route("eth0", "0.0.0.0", 0, 0),
                    route("eth1", "0.0.0.0", 0, 10),
                ],
                Some("10.0.0.5"),
            ),
            (
                "no default route: the first global address of a non-bridge, non-veth",
                vec![
                    iface("cni0", &["10.42.0.1"], true),
                    iface("eth0", &["192.168.1.20"], false),
                    iface("lo", &["127.0.0.1"], false),
                    iface("veth1234", &["10.99.0.1"], false),
                ],
                vec![route("cni0", "10.42.0.0", 24, 0)],
                Some("192.168.1.20"),
            ),
            (
                "a default route that is down does not count",
                host(),
                vec![Route {
                    up: false,
                    ..route("wlan0", "0.0.0.0", 0, 0)
                }],
                Some("192.168.1.20"),
            ),
            (
                "nothing global at all",
                vec![iface("lo", &["127.0.0.1"], false)],
                vec![],
                None,
            ),
        ];
        for (what, interfaces, routes, want) in table {
            let want = want.map(|w| w.parse::<Ipv4Addr>().unwrap());
            assert_eq!(choose_node_ip(&interfaces, &routes), want, "{what}");
        }
    }

    #[test]
    fn proc_net_route_is_parsed_with_its_little_endian_hex() {
        let text = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                    eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                    eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n\
                    cni0\t00002A0A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                    garbage\n";
        assert_eq!(
            parse_proc_net_route(text),
            vec![
                route("eth0", "0.0.0.0", 0, 100),
                route("eth0", "192.168.1.0", 24, 100),
                Route {
                    up: false,
                    ..route("cni0", "10.42.0.0", 24, 0)
                },
            ]
        );
    }
}
