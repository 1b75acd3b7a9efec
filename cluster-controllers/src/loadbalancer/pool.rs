//! Load-balancer address pools, as `--service-lb-pool` gives them: a CIDR (`192.0.2.0/28`)
//! or an inclusive range (`192.0.2.10-192.0.2.20`). A CIDR of more than two addresses leaves
//! out its network and broadcast addresses (hosts on the segment would take them for the
//! subnet's own, as MetalLB's `avoidBuggyIPs` says); a range gives every address it names.
//! Worked example: `192.0.2.0/29` gives .1 to .6; `192.0.2.0/31` gives .0 and .1.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;

/// One pool: the addresses `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    first: u32,
    last: u32,
}

/// Why a pool does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid load-balancer pool {given:?}: {why} (want a CIDR like 192.0.2.0/28 or a range like 192.0.2.10-192.0.2.20)"
)]
pub struct PoolError {
    pub given: String,
    pub why: &'static str,
}

impl Pool {
    /// Parses `CIDR` or `A-B`.
    pub fn parse(s: &str) -> Result<Pool, PoolError> {
        let err = |why| PoolError {
            given: s.to_string(),
            why,
        };
        let s = s.trim();
        if let Some((a, b)) = s.split_once('-') {
            let a: Ipv4Addr = a.trim().parse().map_err(|_| err("not an IPv4 address"))?;
            let b: Ipv4Addr = b.trim().parse().map_err(|_| err("not an IPv4 address"))?;
            let (first, last) = (u32::from(a), u32::from(b));
            if first > last {
                return Err(err("the range ends before it starts"));
            }
            return Ok(Pool { first, last });
        }
        let (ip, prefix) = s
            .split_once('/')
            .ok_or_else(|| err("neither CIDR nor range"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| err("not an IPv4 address"))?;
        let prefix: u32 = prefix.parse().map_err(|_| err("bad prefix length"))?;
        if prefix > 32 {
            return Err(err("bad prefix length"));
        }
        let size: u64 = 1 << (32 - prefix);
        let base = u32::from(ip) & (u64::from(u32::MAX) << (32 - prefix)) as u32;
        let last = (u64::from(base) + size - 1) as u32;
        if size > 2 {
            Ok(Pool {
                first: base + 1,
                last: last - 1,
            })
        } else {
            Ok(Pool { first: base, last })
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(ip))
    }

    /// The pool's addresses in order.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        (self.first..=self.last).map(Ipv4Addr::from)
    }
}

impl std::fmt::Display for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{}",
            Ipv4Addr::from(self.first),
            Ipv4Addr::from(self.last)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(p: &Pool) -> Vec<String> {
        p.addresses().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_cidr_leaves_out_its_network_and_broadcast_addresses() {
        let p = Pool::parse("192.0.2.5/29").unwrap();
        assert_eq!(ips(&p).first().unwrap(), "192.0.2.1");
        assert_eq!(ips(&p).last().unwrap(), "192.0.2.6");
        assert_eq!(ips(&Pool::parse("192.0.2.0/31").unwrap()).len(), 2);
        assert_eq!(ips(&Pool::parse("192.0.2.9/32").unwrap()), ["192.0.2.9"]);
    }

    #[test]
    fn a_range_gives_every_address_it_names() {
        let p = Pool::parse("192.0.2.10-192.0.2.12").unwrap();
        assert_eq!(ips(&p), ["192.0.2.10", "192.0.2.11", "192.0.2.12"]);
        assert!(p.contains("192.0.2.11".parse().unwrap()));
        assert!(!p.contains("192.0.2.13".parse().unwrap()));
        assert_eq!(p.to_string(), "192.0.2.10-192.0.2.12");
    }

    #[test]
    fn malformed_pools_are_refused() {
        for bad in [
            "192.0.2.0",
            "192.0.2.0/33",
            "192.0.2.9-192.0.2.1",
            "x-192.0.2.1",
            "2001:db8::/64",
        ] {
            assert!(Pool::parse(bad).is_err(), "{bad}");
        }
    }
}
