//! The local IPv4 addresses of a network namespace, read from the kernel's `fib_trie` listing
//! (`/proc/<pid>/net/fib_trie` shows the namespace of process `pid`): a pure parser.
//!
//! Each address configured on an interface appears as a leaf `|-- <address>` followed by a line
//! `/32 host LOCAL`:
//!
//! ```text
//!      +-- 10.42.1.0/24 2 0 2
//!         |-- 10.42.1.0
//!            /24 link UNICAST
//!         |-- 10.42.1.5
//!            /32 host LOCAL
//! ```

use std::net::Ipv4Addr;

/// The addresses with a `/32 host LOCAL` entry, sorted, each once (the listing shows the
/// `Main:` and `Local:` tables, which repeat them).
pub(crate) fn local_ipv4(listing: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in listing.lines() {
        let line = line.trim();
        if let Some(addr) = line.strip_prefix("|-- ") {
            leaf = addr.trim().parse().ok();
        } else if line.starts_with('/') {
            let mut words = line.split_whitespace();
            let (prefix, scope, kind) = (words.next(), words.next(), words.next());
            if (prefix, scope, kind) == (Some("/32"), Some("host"), Some("LOCAL"))
                && let Some(ip) = leaf
            {
                out.push(ip);
            }
        } else {
            leaf = None;
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One table of a pod's namespace (`/proc/net/fib_trie` lists it as Main, then as Local):
    /// loopback and eth0 at 10.42.1.5/24.
    const TABLE: &str = "  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.42.1.0/24 2 0 2
        +-- 10.42.1.0/29 2 0 2
           |-- 10.42.1.0
              /24 link UNICAST
           |-- 10.42.1.5
              /32 host LOCAL
        |-- 10.42.1.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
";

    /// The whole file of that namespace.
    fn pod() -> String {
        format!("Main:\n{TABLE}Local:\n{TABLE}")
    }

    #[test]
    fn local_addresses_are_the_host_local_slash_32_leaves() {
        assert_eq!(
            local_ipv4(&pod()),
            vec![Ipv4Addr::new(10, 42, 1, 5), Ipv4Addr::LOCALHOST]
        );
    }

    #[test]
    fn a_namespace_that_lost_its_address_or_is_empty_has_only_what_is_left() {
        let without_eth0: String = pod().replace(
            "|-- 10.42.1.5\n              /32 host LOCAL",
            "|-- 10.42.1.4\n              /32 link UNICAST",
        );
        assert_eq!(local_ipv4(&without_eth0), vec![Ipv4Addr::LOCALHOST]);
        assert_eq!(local_ipv4(""), Vec::<Ipv4Addr>::new());
        // A fresh namespace whose loopback is down lists nothing at all.
        assert_eq!(local_ipv4("Main:\nLocal:\n"), Vec::<Ipv4Addr>::new());
    }
}
