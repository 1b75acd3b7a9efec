//! Pod CIDR allocation: each node gets the first /24 of the cluster CIDR that no other node
//! holds. Worked example: cluster 10.42.0.0/16 with 10.42.0.0/24 and 10.42.2.0/24 taken gives
//! 10.42.1.0/24 to the next node; a /16 has room for 256 nodes.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;

/// An IPv4 CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cidr {
    pub base: Ipv4Addr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Cidr> {
        let (ip, prefix) = s.split_once('/')?;
        let base: Ipv4Addr = ip.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        if prefix > 32 {
            return None;
        }
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        };
        Some(Cidr {
            base: Ipv4Addr::from(u32::from(base) & mask),
            prefix,
        })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// The prefix length of each node's range.
pub const NODE_PREFIX: u8 = 24;

/// The first free node range in `cluster`, or `None` when all are taken (or the cluster CIDR
/// is smaller than one node range).
pub fn allocate(cluster: Cidr, used: &[Cidr]) -> Option<Cidr> {
    if cluster.prefix > NODE_PREFIX {
        return None;
    }
    let count = 1u32 << (NODE_PREFIX - cluster.prefix);
    let start = u32::from(cluster.base);
    (0..count)
        .map(|i| Cidr {
            base: Ipv4Addr::from(start + (i << (32 - NODE_PREFIX))),
            prefix: NODE_PREFIX,
        })
        .find(|c| !used.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn the_first_free_range_is_given_out() {
        assert_eq!(allocate(c("10.42.0.0/16"), &[]), Some(c("10.42.0.0/24")));
        assert_eq!(
            allocate(c("10.42.0.0/16"), &[c("10.42.0.0/24"), c("10.42.2.0/24")]),
            Some(c("10.42.1.0/24"))
        );
    }

    #[test]
    fn a_full_cluster_range_gives_nothing() {
        assert_eq!(allocate(c("10.42.0.0/24"), &[c("10.42.0.0/24")]), None);
        assert_eq!(allocate(c("10.42.0.0/25"), &[]), None);
    }

    #[test]
    fn parsing_masks_host_bits() {
        assert_eq!(c("10.42.7.9/16").to_string(), "10.42.0.0/16");
        assert!(Cidr::parse("10.42.0.0/33").is_none());
    }
}
