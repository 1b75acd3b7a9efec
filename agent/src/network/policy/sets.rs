//! The kernel ipsets (`hash:ip`) that hold the peer pods of a pod chain (all its policies'
//! rules, one set per port match), so a new connection takes one set lookup per port match
//! instead of one rule per peer address and port.
//!
//! A set is named after its members: `BERTH-NP-<h>-<m>` (`h`: the chains' eight hex digits of
//! the network name, so two agents in one network namespace never touch each other's sets;
//! `m`: twelve hex digits of the SHA-256 of the sorted addresses), 30 characters, under
//! ipset's 31. Chains naming the same addresses share one set, and a set never changes once
//! made: new members are a new set, which the rewritten chains name in the same
//! `iptables-restore` that stops naming the old one. So the order of a write is: make the new
//! sets (`ipset restore -exist`), write the chains, destroy the sets no rule names any more;
//! no rule ever names a set that is missing or half filled.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::network::chain_names::hash;

/// Every set of a ruleset: name → members.
pub type PeerSets = BTreeMap<String, BTreeSet<Ipv4Addr>>;

const PREFIX: &str = "BERTH-NP-";

/// Digits of the members' hash in a set's name.
const MEMBERS_HASH: usize = 12;

/// The name of the set holding `members` for `network`'s agent.
pub fn name(network: &str, members: &BTreeSet<Ipv4Addr>) -> String {
    let addrs: Vec<String> = members.iter().map(Ipv4Addr::to_string).collect();
    let parts: Vec<&str> = addrs.iter().map(String::as_str).collect();
    format!(
        "{PREFIX}{}-{}",
        hash(&[network], 8),
        hash(&parts, MEMBERS_HASH)
    )
}

/// Whether an ipset is one of `network`'s agent's peer sets.
pub fn is_policy_set(network: &str, set: &str) -> bool {
    set.strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_prefix(&hash(&[network], 8)))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|m| m.len() == MEMBERS_HASH && m.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `ipset restore -exist` input making the sets of `wanted` that `present` does not name
/// (all of them with no `present`). `-exist` makes a set that is there already (same name,
/// so same members) a no-op rather than an error. `None` when there is nothing to make.
pub fn create_input(wanted: &PeerSets, present: Option<&PeerSets>) -> Option<String> {
    let mut out = String::new();
    for (set, members) in wanted {
        if present.is_some_and(|p| p.contains_key(set)) {
            continue;
        }
        let _ = writeln!(
            out,
            "create {set} hash:ip family inet maxelem {}",
            members.len().max(1).next_power_of_two().max(65_536)
        );
        for ip in members {
            let _ = writeln!(out, "add {set} {ip}");
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The sets of ours among `existing` that `wanted` no longer names.
pub fn stale<'a>(
    network: &str,
    wanted: &PeerSets,
    existing: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    existing
        .into_iter()
        .filter(|s| is_policy_set(network, s) && !wanted.contains_key(*s))
        .cloned()
        .collect()
}

/// The `ipset restore` input destroying `sets` (none of which a rule may still name).
pub fn destroy_input(sets: &[String]) -> Option<String> {
    let mut out = String::new();
    for s in sets {
        let _ = writeln!(out, "destroy {s}");
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ips: &[&str]) -> BTreeSet<Ipv4Addr> {
        ips.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[test]
    fn a_name_fits_ipset_and_depends_on_the_members_and_the_network() {
        let a = name("berth-n1", &members(&["10.42.1.2", "10.42.1.3"]));
        assert!(a.len() <= 31, "{a}");
        assert!(is_policy_set("berth-n1", &a));
        assert!(!is_policy_set("berth-n2", &a));
        assert_eq!(a, name("berth-n1", &members(&["10.42.1.3", "10.42.1.2"])));
        assert_ne!(a, name("berth-n1", &members(&["10.42.1.2"])));
        assert_ne!(a, name("berth-n2", &members(&["10.42.1.2", "10.42.1.3"])));
    }

    #[test]
    fn only_sets_not_present_are_made_and_only_ours_unnamed_are_stale() {
        let one = members(&["10.42.1.2"]);
        let two = members(&["10.42.1.2", "10.42.1.3"]);
        let (n1, n2) = (name("berth-n1", &one), name("berth-n1", &two));
        let wanted: PeerSets = [(n1.clone(), one.clone()), (n2.clone(), two)].into();
        let present: PeerSets = [(n1.clone(), one)].into();
        let input = create_input(&wanted, Some(&present)).unwrap();
        assert!(!input.contains(&n1), "{input}");
        assert!(input.starts_with(&format!("create {n2} hash:ip family inet ")));
        assert!(input.contains(&format!("add {n2} 10.42.1.3\n")), "{input}");
        assert!(create_input(&present, Some(&present)).is_none());
        assert!(create_input(&wanted, None).unwrap().contains(&n1));

        let gone = name("berth-n1", &members(&["10.42.9.9"]));
        let theirs = name("berth-n2", &members(&["10.42.9.9"]));
        let existing = [n1.clone(), gone.clone(), theirs, "other".to_string()];
        assert_eq!(
            stale("berth-n1", &wanted, &existing),
            std::slice::from_ref(&gone)
        );
        assert_eq!(
            destroy_input(std::slice::from_ref(&gone)).unwrap(),
            format!("destroy {gone}\n")
        );
        assert!(destroy_input(&[]).is_none());
    }
}
