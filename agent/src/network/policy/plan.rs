//! NetworkPolicy's filter table, computed whole from the cluster's NetworkPolicies, Pods and
//! Namespaces for the pods of one node. Chains (`h`: eight hex digits of the network name's
//! SHA-256, so two agents in one network namespace never share a chain):
//!
//! * `BERTH-NP-<h>` (from FORWARD, first): replies (conntrack `ESTABLISHED` in the reply
//!   direction) and related packets (ICMP errors) of connections already let through return
//!   at once; so does every packet of a connection judged under this very ruleset (its
//!   connmark holds the ruleset's [`Generation`]); then, per local pod that some policy
//!   isolates, a jump on its address as source (egress) and as destination (ingress) into the
//!   pod's chain; last, what passed is marked as judged under this generation.
//! * `BERTH-NPE-<h><p>` / `BERTH-NPI-<h><p>` (`p` from the pod's uid): one `RETURN` per allowed
//!   (peers, port) of every rule of every policy that selects the pod for that direction (the
//!   union of the policies, as upstream adds them up), then a jump to the deny chain. The peer
//!   pods of all those rules are one ipset ([`sets`]) per port match, matched with
//!   `-m set --match-set`, so a new connection takes one lookup per port match however many
//!   policies and pods there are; `ipBlock` peers stay `-s`/`-d` rules (a few disjoint blocks
//!   each).
//! * `BERTH-NPDE-<h>` / `BERTH-NPDI-<h>`: one `REJECT` each, whose packet counter is the
//!   metric of what policy refused.
//!
//! Why the generation: when a policy tightens, connections it now refuses must stop (as with
//! Calico and Cilium, which judge every packet), not live on because conntrack says
//! `ESTABLISHED` (as with the iptables plugins that accept established packets first). Every
//! write bumps the generation, so the next packet of each established connection in its
//! original direction is judged again by the new chains, refused (and the flow stops) or
//! re-marked; later packets take the one connmark rule, so an established flow costs three
//! rule matches per packet however many policies there are. Replies never need judging: the
//! packet that opened the connection was allowed, and refusing the flow's original direction
//! stops it.
//!
//! The chains only ever `RETURN`, `REJECT` or mark: what passes goes on through FORWARD (the host
//! rules' accepts, anyone else's filters) as if policy were not there. Traffic of the node
//! itself to its pods never passes FORWARD, so it is never judged (the node's probes reach its
//! pods, as with most CNI plugins); host-network pods are neither judged nor peers (their
//! address is the node's). Service traffic reaches FORWARD after the nat table's DNAT, so it
//! is judged on the real pod address and port, as upstream's semantics require.
//!
//! Planner: pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;

use core::net::Ipv4Addr;

use super::select::{self, Peer, PodView, PortMatch};
use super::sets::{self, PeerSets};
use crate::network::chain_names::hash;

/// Where the ruleset is for.
#[derive(Debug, Clone, Copy)]
pub struct PolicyScope<'a> {
    /// The agent's network name (`berth-<node>`): it names and tags the chains.
    pub network: &'a str,
    pub node: &'a str,
}

/// The chains every ruleset has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chains {
    pub top: String,
    pub deny_ingress: String,
    pub deny_egress: String,
    tag: String,
}

const POD_INGRESS: &str = "BERTH-NPI-";
const POD_EGRESS: &str = "BERTH-NPE-";

impl Chains {
    pub fn of(network: &str) -> Chains {
        let tag = hash(&[network], 8);
        Chains {
            top: format!("BERTH-NP-{tag}"),
            deny_ingress: format!("BERTH-NPDI-{tag}"),
            deny_egress: format!("BERTH-NPDE-{tag}"),
            tag,
        }
    }

    fn pod(&self, prefix: &str, pod_key: &str) -> String {
        format!("{prefix}{}{}", self.tag, hash(&[pod_key], 8))
    }
}

/// The connmark bits that hold the [`Generation`] a connection was last judged under (the
/// service proxy uses packet marks 0x4000 and 0x8000, not connmarks; nothing else of ours
/// uses connmarks).
pub const JUDGED_MASK: u32 = 0xffff_0000;

/// Which ruleset a connection was last judged under: never 0 (a new connection's connmark),
/// bumped at every write, 65,535 values before it comes round again. A connection idle for
/// exactly that many writes would skip one judgement; an agent restarting picks a fresh start
/// from the clock, so it does not take the marks of its previous run for its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(u16);

impl Generation {
    /// A starting generation from any number (the agent passes the clock's nanoseconds).
    pub fn first(seed: u64) -> Generation {
        Generation(u16::try_from(seed % 65_535).unwrap_or(0) + 1)
    }

    /// The next generation, skipping 0: 65535 → 1.
    pub fn next(self) -> Generation {
        Generation(self.0 % 65_535 + 1)
    }

    /// `0xVALUE/0xMASK` for `connmark --mark` and `CONNMARK --set-xmark`.
    fn mark(self) -> String {
        format!("0x{:x}/0x{JUDGED_MASK:x}", u32::from(self.0) << 16)
    }
}

/// The top chain's rule that lets through a connection already judged under `g`.
fn judged_rule(chains: &Chains, network: &str, g: Generation) -> String {
    format!(
        "-A {} -m connmark --mark {} {} -j RETURN",
        chains.top,
        g.mark(),
        comment(&format!("berth:{network} judged under these rules"))
    )
}

/// The top chain's last rule: what got this far passed, and is marked judged under `g`.
fn remember_rule(chains: &Chains, network: &str, g: Generation) -> String {
    format!(
        "-A {} {} -j CONNMARK --set-xmark {}",
        chains.top,
        comment(&format!("berth:{network} passed: judged")),
        g.mark()
    )
}

/// Where the generation rules sit in the top chain: after the related and reply rules, and
/// last.
const JUDGED_AT: usize = 2;

/// Whether a filter-table chain is one of this agent's policy chains.
pub fn is_policy_chain(network: &str, chain: &str) -> bool {
    let c = Chains::of(network);
    chain == c.top
        || chain == c.deny_ingress
        || chain == c.deny_egress
        || [POD_INGRESS, POD_EGRESS].iter().any(|p| {
            chain
                .strip_prefix(p)
                .is_some_and(|rest| rest.len() == 16 && rest.starts_with(&c.tag))
        })
}

/// The filter ruleset: chain name → its rules (`-A CHAIN …` lines), and the peer sets the
/// rules name (set name → members).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<String, Vec<String>>,
    pub sets: PeerSets,
}

impl Ruleset {
    /// The same rules under generation `g` (the top chain's two generation rules rewritten).
    pub fn with_generation(mut self, network: &str, g: Generation) -> Ruleset {
        let chains = Chains::of(network);
        if let Some(top) = self.chains.get_mut(&chains.top)
            && top.len() > JUDGED_AT
        {
            top[JUDGED_AT] = judged_rule(&chains, network, g);
            if let Some(last) = top.last_mut() {
                *last = remember_rule(&chains, network, g);
            }
        }
        self
    }

    /// The `iptables-restore --noflush` input writing every chain of the set whole and
    /// deleting the chains of ours in `existing` that the set no longer has.
    pub fn restore_input(&self, existing: &[String], network: &str) -> String {
        let stale: Vec<&String> = existing
            .iter()
            .filter(|c| is_policy_chain(network, c) && !self.chains.contains_key(*c))
            .collect();
        let all: Vec<(&String, &Vec<String>)> = self.chains.iter().collect();
        restore_text(&all, &stale)
    }

    /// The input that turns `applied` into this set: changed chains rewritten, new ones made,
    /// dropped ones flushed and deleted; `None` when nothing changed.
    pub fn changes_from(&self, applied: &Ruleset) -> Option<String> {
        let changed: Vec<(&String, &Vec<String>)> = self
            .chains
            .iter()
            .filter(|(c, rules)| applied.chains.get(*c) != Some(*rules))
            .collect();
        let dropped: Vec<&String> = applied
            .chains
            .keys()
            .filter(|c| !self.chains.contains_key(*c))
            .collect();
        if changed.is_empty() && dropped.is_empty() {
            return None;
        }
        Some(restore_text(&changed, &dropped))
    }

    pub fn rule_count(&self) -> usize {
        self.chains.values().map(Vec::len).sum()
    }
}

/// Declaring a chain flushes it; the deny chains' counters then restart from zero, which the
/// metric accounts for (see `policy::metrics`).
fn restore_text(write: &[(&String, &Vec<String>)], delete: &[&String]) -> String {
    let mut out = String::from("*filter\n");
    for chain in write.iter().map(|(c, _)| *c).chain(delete.iter().copied()) {
        let _ = writeln!(out, ":{chain} - [0:0]");
    }
    for (_, rules) in write {
        for r in *rules {
            out.push_str(r);
            out.push('\n');
        }
    }
    for chain in delete {
        let _ = writeln!(out, "-X {chain}");
    }
    out.push_str("COMMIT\n");
    out
}

fn comment(text: &str) -> String {
    format!("-m comment --comment \"{}\"", text.replace(['"', '\\'], ""))
}

/// Which way a pod chain judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

/// The whole filter ruleset for the pods of `scope.node`, judging under generation `g`.
pub fn ruleset<'a>(
    scope: &PolicyScope<'_>,
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    policies: impl IntoIterator<Item = &'a NetworkPolicy>,
    g: Generation,
) -> Ruleset {
    let chains = Chains::of(scope.network);
    let tagged = |what: &str| comment(&format!("berth:{} {what}", scope.network));
    let views = select::pod_views(pods);
    let ns_labels = select::namespace_labels(namespaces);
    let mut sorted: Vec<&NetworkPolicy> = policies.into_iter().collect();
    sorted.sort_by_key(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()));

    let mut rs = Ruleset::default();
    let mut top = vec![
        format!(
            "-A {} -m conntrack --ctstate RELATED {} -j RETURN",
            chains.top,
            tagged("related")
        ),
        format!(
            "-A {} -m conntrack --ctstate ESTABLISHED --ctdir REPLY {} -j RETURN",
            chains.top,
            tagged("replies")
        ),
        judged_rule(&chains, scope.network, g),
    ];
    let mut local: Vec<&PodView<'_>> = views.iter().filter(|v| v.node == scope.node).collect();
    local.sort_by_key(|v| (v.namespace, v.name));
    for pod in local {
        for dir in [Direction::Egress, Direction::Ingress] {
            let selecting: Vec<&NetworkPolicy> = sorted
                .iter()
                .copied()
                .filter(|np| {
                    let (ingress, egress) = select::policy_types(np);
                    (if dir == Direction::Ingress {
                        ingress
                    } else {
                        egress
                    }) && select::selects(np, pod)
                })
                .collect();
            if selecting.is_empty() {
                continue;
            }
            let (prefix, flag, deny, word) = match dir {
                Direction::Ingress => (POD_INGRESS, "-d", &chains.deny_ingress, "ingress"),
                Direction::Egress => (POD_EGRESS, "-s", &chains.deny_egress, "egress"),
            };
            let chain = chains.pod(prefix, &pod.key);
            let who = format!("{}/{}", pod.namespace, pod.name);
            top.push(format!(
                "-A {} {flag} {}/32 {} -j {chain}",
                chains.top,
                pod.ip,
                tagged(&format!("{word} {who}"))
            ));
            let mut rules = Vec::new();
            let mut seen = BTreeSet::new();
            // Peer pods of every selecting policy, by port match: one set each for the chain.
            let mut peer_pods: BTreeMap<String, BTreeSet<Ipv4Addr>> = BTreeMap::new();
            let count = selecting.len();
            for np in selecting {
                for m in allowed(np, dir, pod, &views, &ns_labels, &mut peer_pods) {
                    if seen.insert(m.clone()) {
                        rules.push(format!("-A {chain} {m} -j RETURN"));
                    }
                }
            }
            let set_dir = if dir == Direction::Ingress {
                "src"
            } else {
                "dst"
            };
            for (port_text, members) in peer_pods {
                let set = sets::name(scope.network, &members);
                rules.push(format!(
                    "-A {chain} -m set --match-set {set} {set_dir} {port_text}{} -j RETURN",
                    tagged(&format!("peer pods of {count} policies"))
                ));
                rs.sets.insert(set, members);
            }
            rules.push(format!(
                "-A {chain} {} -j {deny}",
                tagged(&format!("{word} {who} not allowed"))
            ));
            rs.chains.insert(chain, rules);
        }
    }
    top.push(remember_rule(&chains, scope.network, g));
    rs.chains.insert(chains.top.clone(), top);
    for (chain, word) in [
        (&chains.deny_ingress, "ingress"),
        (&chains.deny_egress, "egress"),
    ] {
        rs.chains.insert(
            chain.clone(),
            vec![format!(
                "-A {chain} {} -j REJECT --reject-with icmp-port-unreachable",
                tagged(&format!("{word} refused by network policy"))
            )],
        );
    }
    rs
}

/// The matches (`-s`/`-d` block or none, protocol, port) that `np`'s rules of direction `dir`
/// allow for `pod`, each with the policy's name as comment; the peer pods they allow go into
/// `peer_pods` by port match instead (the chain matches them as one set per port match).
fn allowed(
    np: &NetworkPolicy,
    dir: Direction,
    pod: &PodView<'_>,
    views: &[PodView<'_>],
    ns_labels: &BTreeMap<String, BTreeMap<String, String>>,
    peer_pods: &mut BTreeMap<String, BTreeSet<Ipv4Addr>>,
) -> Vec<String> {
    let Some(spec) = np.spec.as_ref() else {
        return Vec::new();
    };
    let policy_ns = np.metadata.namespace.as_deref().unwrap_or("");
    let note = comment(&format!(
        "{policy_ns}/{}",
        np.metadata.name.as_deref().unwrap_or("")
    ));
    // (peers, ports) of each rule.
    let rules: Vec<(Vec<Peer<'_, '_>>, Vec<PortMatch>)> = match dir {
        Direction::Ingress => spec
            .ingress
            .iter()
            .flatten()
            .map(|r| {
                (
                    select::peers(policy_ns, r.from.as_deref(), views, ns_labels),
                    select::ports(r.ports.as_deref()),
                )
            })
            .collect(),
        Direction::Egress => spec
            .egress
            .iter()
            .flatten()
            .map(|r| {
                (
                    select::peers(policy_ns, r.to.as_deref(), views, ns_labels),
                    select::ports(r.ports.as_deref()),
                )
            })
            .collect(),
    };
    let peer_flag = match dir {
        Direction::Ingress => "-s",
        Direction::Egress => "-d",
    };
    let mut out = Vec::new();
    for (peers, ports) in &rules {
        for port in ports {
            // The rule's peer pods by the port match they get (a named port may resolve to a
            // different number in each destination pod), joining the chain's set for it.
            let pods = &mut *peer_pods;
            for peer in peers {
                if let (Direction::Egress, Peer::Any, PortMatch::Named(proto, name)) =
                    (dir, peer, port)
                {
                    // Any destination with that named port: every pod that has it.
                    for p in views {
                        if let Some(n) = select::named_port(p.pod, proto, name) {
                            pods.entry(format!("-p {proto} -m {proto} --dport {n} "))
                                .or_default()
                                .insert(p.ip);
                        }
                    }
                    continue;
                }
                // The pod whose container ports a named port is looked up in: the destination.
                let dest: Option<&PodView<'_>> = match (dir, peer) {
                    (Direction::Ingress, _) => Some(pod),
                    (Direction::Egress, Peer::Pod(p)) => Some(p),
                    (Direction::Egress, _) => None,
                };
                let Some(port_text) = port_match(port, dest) else {
                    continue;
                };
                match peer {
                    Peer::Any => out.push(format!("{port_text}{note}")),
                    Peer::Pod(p) => {
                        pods.entry(port_text).or_default().insert(p.ip);
                    }
                    Peer::Block(b) => out.push(format!("{peer_flag} {b} {port_text}{note}")),
                }
            }
        }
    }
    out
}

/// The protocol/port match text (ending in a space when not empty); `None` when a named
/// port has no pod to resolve in or the pod has no such port (the entry allows nothing).
fn port_match(port: &PortMatch, dest: Option<&PodView<'_>>) -> Option<String> {
    Some(match port {
        PortMatch::Any => String::new(),
        PortMatch::Protocol(p) => format!("-p {p} "),
        PortMatch::Range(p, from, to) if from == to => format!("-p {p} -m {p} --dport {from} "),
        PortMatch::Range(p, from, to) => format!("-p {p} -m {p} --dport {from}:{to} "),
        PortMatch::Named(p, name) => {
            let n = select::named_port(dest?.pod, p, name)?;
            format!("-p {p} -m {p} --dport {n} ")
        }
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
