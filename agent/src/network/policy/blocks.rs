//! `ipBlock` arithmetic: a CIDR less its `except` blocks, as the few disjoint CIDRs that cover
//! exactly what is left, so that each is one plain `-s`/`-d` match (no nested chain, no mark).
//!
//! Worked example: `10.0.0.0/16` except `10.0.1.0/24` walks from /16 down to /24, keeping at
//! each step the half that does not hold the hole: `10.0.128.0/17`, `10.0.64.0/18`, …,
//! `10.0.2.0/23`, `10.0.0.0/24`, eight blocks (at most 32 − 16 per hole).
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;

use crate::network::Ipv4Cidr;

/// Parses a policy's CIDR leniently (`10.0.0.1/24` is the subnet `10.0.0.0/24`, as the
/// kernel reads it); `None` for IPv6 or garbage (this agent enforces IPv4 only).
pub fn parse(s: &str) -> Option<Ipv4Cidr> {
    let (addr, prefix) = s.trim().split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some(Ipv4Cidr::containing(addr, prefix))
}

/// Whether `outer` holds every address of `inner`.
fn covers(outer: Ipv4Cidr, inner: Ipv4Cidr) -> bool {
    outer.prefix <= inner.prefix && outer.contains(inner.addr)
}

/// The two halves of a block one bit longer (`None` for a /32).
fn halves(b: Ipv4Cidr) -> Option<(Ipv4Cidr, Ipv4Cidr)> {
    if b.prefix >= 32 {
        return None;
    }
    let prefix = b.prefix + 1;
    let low = Ipv4Cidr {
        addr: b.addr,
        prefix,
    };
    let high = Ipv4Cidr {
        addr: Ipv4Addr::from(u32::from(b.addr) | (1u32 << (32 - u32::from(prefix)))),
        prefix,
    };
    Some((low, high))
}

/// `block` minus every `except`, as disjoint CIDRs (larger first along each split).
pub fn subtract(block: Ipv4Cidr, except: &[Ipv4Cidr]) -> Vec<Ipv4Cidr> {
    let mut left = vec![block];
    for &hole in except {
        let mut next = Vec::new();
        for b in left {
            if covers(hole, b) {
                continue;
            }
            if !covers(b, hole) {
                next.push(b);
                continue;
            }
            // Split down to the hole, keeping every half that does not hold it.
            let mut cur = b;
            while let Some((low, high)) = halves(cur) {
                if covers(low, hole) {
                    next.push(high);
                    cur = low;
                } else {
                    next.push(low);
                    cur = high;
                }
                if cur.prefix >= hole.prefix {
                    break;
                }
            }
        }
        left = next;
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    fn strings(v: &[Ipv4Cidr]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    /// How many addresses the blocks hold.
    fn size(v: &[Ipv4Cidr]) -> u64 {
        v.iter().map(|b| 1u64 << (32 - u32::from(b.prefix))).sum()
    }

    #[test]
    fn a_block_without_holes_is_itself() {
        assert_eq!(strings(&subtract(c("10.0.0.0/16"), &[])), ["10.0.0.0/16"]);
    }

    #[test]
    fn one_hole_leaves_one_block_per_bit_between_the_prefixes() {
        let left = subtract(c("10.0.0.0/16"), &[c("10.0.1.0/24")]);
        assert_eq!(left.len(), 8);
        assert_eq!(size(&left), 65536 - 256);
        assert!(left.iter().all(|b| !b.overlaps(&c("10.0.1.0/24"))));
        assert!(left.iter().any(|b| b.to_string() == "10.0.0.0/24"));
        assert!(left.iter().any(|b| b.to_string() == "10.0.128.0/17"));
    }

    #[test]
    fn holes_that_cover_or_miss_the_block_remove_all_or_nothing() {
        assert!(subtract(c("10.0.1.0/24"), &[c("10.0.0.0/16")]).is_empty());
        assert_eq!(
            strings(&subtract(c("10.0.1.0/24"), &[c("192.168.0.0/16")])),
            ["10.0.1.0/24"]
        );
    }

    #[test]
    fn two_holes_and_a_single_address_hole() {
        let left = subtract(c("10.0.0.0/24"), &[c("10.0.0.0/26"), c("10.0.0.200/32")]);
        assert_eq!(size(&left), 256 - 64 - 1);
        let ip: Ipv4Addr = "10.0.0.200".parse().unwrap();
        assert!(left.iter().all(|b| !b.contains(ip)));
        assert!(
            left.iter()
                .any(|b| b.contains("10.0.0.201".parse().unwrap()))
        );
    }

    #[test]
    fn cidrs_parse_leniently_and_ipv6_is_not_ours() {
        assert_eq!(parse("10.0.0.1/24").unwrap().to_string(), "10.0.0.0/24");
        assert_eq!(parse("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
        assert!(parse("fd00::/8").is_none());
        assert!(parse("10.0.0.0/33").is_none());
        assert!(parse("10.0.0.0").is_none());
    }
}
