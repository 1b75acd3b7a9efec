//! The SAN rule of the join endpoint: which IP addresses a node's certificate may carry. The
//! certificate also serves the agent's HTTPS endpoint (logs, exec), so an address in it lets its
//! holder pose as whatever the controller reaches at that address; a node may therefore claim
//! only addresses it demonstrably has:
//!
//! 1. the address its join request came from;
//! 2. when the request came from loopback (the agent runs on the controller's host): loopback
//!    addresses and the controller host's own interface addresses;
//! 3. addresses inside a range the administrator vouches for (`--node-address-range`, for nodes
//!    behind NAT or with several interfaces).
//!
//! Everything else is refused (403), and so is a request for more than [`MAX_ADDRESSES`].
//! The only DNS SAN is the node's own name.

use std::net::IpAddr;
use std::str::FromStr;

/// At most this many addresses in one certificate.
pub const MAX_ADDRESSES: usize = 16;

/// An address range (`10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    base: IpAddr,
    prefix: u8,
}

impl IpRange {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.base, ip.to_canonical()) {
            (IpAddr::V4(base), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(base) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(base), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(base) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpRange {
    type Err = String;

    fn from_str(s: &str) -> Result<IpRange, String> {
        let bad = || format!("invalid address range {s:?} (want ADDRESS/PREFIX)");
        let (ip, prefix) = s.split_once('/').ok_or_else(bad)?;
        let base: IpAddr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if base.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        Ok(IpRange {
            base: base.to_canonical(),
            prefix,
        })
    }
}

/// The rule, with the facts it needs.
#[derive(Debug, Clone, Default)]
pub struct AddressRule {
    /// The controller host's interface addresses.
    pub host_addresses: Vec<IpAddr>,
    /// Ranges any node may claim addresses in.
    pub ranges: Vec<IpRange>,
}

impl AddressRule {
    fn allowed(&self, source: IpAddr, ip: IpAddr) -> bool {
        let (source, ip) = (source.to_canonical(), ip.to_canonical());
        ip == source
            || (source.is_loopback() && (ip.is_loopback() || self.host_addresses.contains(&ip)))
            || self.ranges.iter().any(|r| r.contains(ip))
    }

    /// The requested addresses the rule refuses for a request from `source` (empty: all are
    /// allowed), or every one of them when there are too many.
    pub fn refused(&self, source: IpAddr, requested: &[IpAddr]) -> Vec<IpAddr> {
        if requested.len() > MAX_ADDRESSES {
            return requested.to_vec();
        }
        requested
            .iter()
            .copied()
            .filter(|ip| !self.allowed(source, *ip))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn rule() -> AddressRule {
        AddressRule {
            host_addresses: vec![ip("10.0.0.1"), ip("fd00::1")],
            ranges: vec!["192.168.50.0/24".parse().unwrap()],
        }
    }

    /// What the test rule refuses of `asked` to a node joining from `source`.
    fn refused(source: &str, asked: &[&str]) -> Vec<IpAddr> {
        let asked: Vec<IpAddr> = asked.iter().map(|a| ip(a)).collect();
        rule().refused(ip(source), &asked)
    }

    #[test]
    fn a_node_may_claim_the_address_it_joins_from() {
        assert!(refused("10.0.0.7", &["10.0.0.7"]).is_empty());
        assert!(refused("::ffff:10.0.0.7", &["10.0.0.7"]).is_empty());
        assert!(refused("10.0.0.7", &[]).is_empty());
    }

    #[test]
    fn a_remote_node_may_not_claim_other_addresses() {
        assert_eq!(
            refused("10.0.0.7", &["10.0.0.7", "10.0.0.8"]),
            [ip("10.0.0.8")]
        );
        // Not loopback, nor the controller's own addresses, from afar.
        assert_eq!(
            refused("10.0.0.7", &["127.0.0.1", "10.0.0.1"]),
            [ip("127.0.0.1"), ip("10.0.0.1")]
        );
    }

    #[test]
    fn a_node_on_the_controllers_host_may_claim_the_hosts_addresses() {
        let asked = ["127.0.0.1", "::1", "10.0.0.1", "fd00::1"];
        assert!(refused("127.0.0.1", &asked).is_empty());
        assert_eq!(refused("127.0.0.1", &["192.0.2.1"]), [ip("192.0.2.1")]);
    }

    #[test]
    fn vouched_ranges_are_open_to_every_node() {
        assert!(refused("10.9.9.9", &["192.168.50.12"]).is_empty());
        assert_eq!(
            refused("10.9.9.9", &["192.168.51.12"]),
            [ip("192.168.51.12")]
        );
    }

    #[test]
    fn too_many_addresses_are_all_refused() {
        let many = ["10.0.0.7"; MAX_ADDRESSES + 1];
        assert_eq!(refused("10.0.0.7", &many).len(), MAX_ADDRESSES + 1);
    }

    #[test]
    fn ranges_parse_and_match_by_prefix() {
        let v4: IpRange = "10.1.0.0/16".parse().unwrap();
        assert!(v4.contains(ip("10.1.200.3")));
        assert!(!v4.contains(ip("10.2.0.1")));
        assert!(!v4.contains(ip("fd00::1")));
        let all: IpRange = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        let v6: IpRange = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")));
        assert!(!v6.contains(ip("fe80::1")));
        for bad in ["10.0.0.0", "10.0.0.0/33", "x/8", "::/129"] {
            assert!(bad.parse::<IpRange>().is_err(), "{bad}");
        }
    }
}
