//! An IP prefix (`10.0.0.0/8`, `2001:db8::/32`) as written: its address and length, parsed
//! as Go's `net.ParseCIDR` takes them, masked, and asked what it contains. Shared by the CEL
//! `cidr` library and the NetworkPolicy `ipBlock` rules.
//!
//! Planner: pure, no I/O.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

/// An address's bits, left-aligned in a `u128` only for IPv6; and the family's width.
fn bits(addr: IpAddr) -> (u128, u32) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

impl Cidr {
    /// `ADDR/LEN` with a length within the family's width (no sign, as Go reads it).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, len) = s.split_once('/')?;
        let addr: IpAddr = addr.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= max && !len.starts_with('+'))?;
        Some(Cidr { addr, len })
    }

    /// The network address: the host bits cleared.
    pub fn masked(&self) -> Cidr {
        let (value, width) = bits(self.addr);
        let host_bits = width - u32::from(self.len);
        let mask = if host_bits >= 128 {
            0
        } else {
            !0u128 << host_bits
        };
        let masked = value & mask;
        let addr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(masked).unwrap_or(0))),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(masked)),
        };
        Cidr {
            addr,
            len: self.len,
        }
    }

    /// Whether `addr` (of the same family) lies in this prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4()
            && Cidr {
                addr,
                len: self.len,
            }
            .masked()
            .addr
                == self.masked().addr
    }

    /// Whether `inner` is this prefix or one inside it.
    pub fn contains_cidr(&self, inner: Cidr) -> bool {
        inner.len >= self.len && self.contains(inner.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_mask_and_contain_as_go_reads_them() {
        let c = Cidr::parse("10.1.2.3/16").unwrap();
        assert_eq!(c.masked(), Cidr::parse("10.1.0.0/16").unwrap());
        assert!(c.contains("10.1.255.1".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(!c.contains("::1".parse().unwrap()));
        assert!(c.contains_cidr(Cidr::parse("10.1.4.0/24").unwrap()));
        assert!(!c.contains_cidr(Cidr::parse("10.0.0.0/8").unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        for bad in ["10.0.0.0", "10.0.0.0/33", "10.0.0.0/+8", "::/129", "x/8"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }
}
