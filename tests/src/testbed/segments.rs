//! The test bed's two segments: `/24`s of `172.31.0.0/16` that overlap no route on this
//! machine, chosen from a per-run starting point so that a leftover bed (or one built beside
//! this one without the host lock) is stepped over rather than joined.

use std::fmt;
use std::net::Ipv4Addr;

/// A `/24`, e.g. `172.31.7.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    network: Ipv4Addr,
}

impl Subnet {
    /// The `/24` holding `address`.
    pub fn containing(address: Ipv4Addr) -> Subnet {
        let [a, b, c, _] = address.octets();
        Subnet {
            network: Ipv4Addr::new(a, b, c, 0),
        }
    }

    /// The address `.host` in this subnet (`host(1)` is `172.31.7.1`).
    pub fn host(&self, host: u8) -> Ipv4Addr {
        let [a, b, c, _] = self.network.octets();
        Ipv4Addr::new(a, b, c, host)
    }

    /// Whether this `/24` and `network/prefix` share any address.
    fn overlaps(&self, network: Ipv4Addr, prefix: u8) -> bool {
        // Two prefixes overlap exactly when they agree on the shorter prefix's bits.
        let shorter = u32::from(prefix.min(24));
        let mask = u32::MAX.checked_shl(32 - shorter).unwrap_or(0);
        u32::from(self.network) & mask == u32::from(network) & mask
    }
}

impl fmt::Display for Subnet {
    /// `172.31.7.0/24`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/24", self.network)
    }
}

/// Route types `ip route` prints before the destination (`local 127.0.0.0/8 dev lo …`).
const ROUTE_TYPES: [&str; 10] = [
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "anycast",
    "unreachable",
    "blackhole",
    "prohibit",
    "throw",
    "nat",
];

/// The destinations of `ip -4 route show table all` output, as (network, prefix length).
/// Default routes are left out: they overlap everything and route nothing in particular.
fn destinations(routes: &str) -> Vec<(Ipv4Addr, u8)> {
    routes
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().peekable();
            if words.peek().is_some_and(|w| ROUTE_TYPES.contains(w)) {
                words.next();
            }
            let dest = words.next()?;
            let (ip, prefix) = dest.split_once('/').unwrap_or((dest, "32"));
            Some((ip.parse().ok()?, prefix.parse().ok().filter(|p| *p <= 32)?))
        })
        .collect()
}

/// Two distinct `/24`s of `172.31.0.0/16` (segment A, then segment B) that overlap none of
/// `routes` (the output of `ip -4 route show table all`), searching from `172.31.<start>.0`
/// upwards and wrapping. `None` when fewer than two are free.
pub fn pick_segments(routes: &str, start: u8) -> Option<(Subnet, Subnet)> {
    let taken = destinations(routes);
    let mut free = (0..=255u8)
        .map(|i| Subnet::containing(Ipv4Addr::new(172, 31, start.wrapping_add(i), 0)))
        .filter(|s| !taken.iter().any(|(net, prefix)| s.overlaps(*net, *prefix)));
    Some((free.next()?, free.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(s: &str) -> Subnet {
        Subnet::containing(s.parse().unwrap())
    }

    #[test]
    fn on_a_machine_with_only_its_own_network_the_first_two_from_the_start_are_taken() {
        let routes = "default via 192.0.2.1 dev eth0\n\
                      192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2\n\
                      local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1\n\
                      broadcast 192.0.2.255 dev eth0 table local proto kernel scope link";
        assert_eq!(
            pick_segments(routes, 7),
            Some((subnet("172.31.7.0"), subnet("172.31.8.0")))
        );
    }

    #[test]
    fn a_routed_segment_is_stepped_over_whatever_way_the_route_is_written() {
        let routes = "172.31.7.0/24 dev tbabc123 proto kernel scope link src 172.31.7.1\n\
                      172.31.8.0/24 via 172.31.7.254 dev tbabc123\n\
                      local 172.31.9.1 dev tbother table local proto kernel scope host\n\
                      unreachable 172.31.10.0/23";
        assert_eq!(
            pick_segments(routes, 7),
            Some((subnet("172.31.12.0"), subnet("172.31.13.0")))
        );
    }

    #[test]
    fn the_search_wraps_past_the_top_of_the_range() {
        assert_eq!(
            pick_segments("172.31.255.0/24 dev x", 254),
            Some((subnet("172.31.254.0"), subnet("172.31.0.0")))
        );
    }

    #[test]
    fn a_wider_route_covering_the_range_leaves_nothing() {
        assert_eq!(
            pick_segments("172.16.0.0/12 via 192.0.2.9 dev eth0", 0),
            None
        );
    }

    #[test]
    fn a_subnet_prints_as_a_cidr_and_numbers_its_hosts() {
        let s = subnet("172.31.7.99");
        assert_eq!(s.to_string(), "172.31.7.0/24");
        assert_eq!(s.host(254), Ipv4Addr::new(172, 31, 7, 254));
    }
}
