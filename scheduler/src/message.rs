//! Why nodes were refused, in upstream's words, and the `0/N nodes are available: …` message
//! an unschedulable pod gets: reasons counted per node, `count reason` strings sorted as strings
//! (upstream sorts them so), then the preemption verdict (PostFilter's message) when
//! preemption did not find room (ending in `..`, as upstream's does).
//!
//! Planner: pure, no I/O.

use berth_shared::scheduling::Taint;
use std::collections::HashMap;

/// The message when there is no node at all (upstream `ErrNoNodesAvailable`).
pub const NO_NODES: &str = "no nodes available to schedule pods";

/// One reason a node was refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reason<'a> {
    Unschedulable,
    Taint(&'a Taint),
    NodeAffinity,
    Ports,
    /// `Insufficient <resource>`.
    Insufficient(&'a str),
    TooManyPods,
    PodAffinity,
    PodAntiAffinity,
    ExistingAntiAffinity,
    Spread,
    SpreadMissingLabel,
    /// Excluded by the pod's `metadata.name` field affinity before filtering.
    PrefilterResult,
    /// A bound volume's node affinity excludes the node.
    VolumeNodeAffinity,
}

impl Reason<'_> {
    pub fn text(&self) -> String {
        match self {
            Reason::Unschedulable => "node(s) were unschedulable".into(),
            Reason::Taint(t) => format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value),
            Reason::NodeAffinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Reason::Ports => "node(s) didn't have free ports for the requested pod ports".into(),
            Reason::Insufficient(r) => format!("Insufficient {r}"),
            Reason::TooManyPods => "Too many pods".into(),
            Reason::PodAffinity => "node(s) didn't match pod affinity rules".into(),
            Reason::PodAntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
            Reason::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules".into()
            }
            Reason::Spread => "node(s) didn't match pod topology spread constraints".into(),
            Reason::SpreadMissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into()
            }
            Reason::PrefilterResult => "node is filtered out by the prefilter result".into(),
            Reason::VolumeNodeAffinity => "node(s) had volume node affinity conflict".into(),
        }
    }
}

/// Why one node was refused: the reasons of the first filter that refused it, and whether
/// evicting lower-priority pods could change that (upstream `Unschedulable` versus
/// `UnschedulableAndUnresolvable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection<'a> {
    pub reasons: Vec<Reason<'a>>,
    pub resolvable: bool,
}

impl<'a> Rejection<'a> {
    pub fn unresolvable(r: Reason<'a>) -> Rejection<'a> {
        Rejection {
            reasons: vec![r],
            resolvable: false,
        }
    }

    pub fn resolvable(r: Reason<'a>) -> Rejection<'a> {
        Rejection {
            reasons: vec![r],
            resolvable: true,
        }
    }
}

/// The tally of refusals of one scheduling attempt.
#[derive(Debug, Default)]
pub struct Diagnosis<'a> {
    counts: HashMap<Reason<'a>, usize>,
    resolvable: usize,
    unresolvable: usize,
    /// A refusal of the pod before any node was looked at.
    prefilter: Option<String>,
}

impl<'a> Diagnosis<'a> {
    pub fn prefilter(msg: impl Into<String>) -> Diagnosis<'a> {
        Diagnosis {
            prefilter: Some(msg.into()),
            ..Diagnosis::default()
        }
    }

    pub fn record(&mut self, r: Rejection<'a>) {
        self.record_many(r, 1);
    }

    /// Records the same refusal for `nodes` nodes.
    pub fn record_many(&mut self, r: Rejection<'a>, nodes: usize) {
        if nodes == 0 {
            return;
        }
        if r.resolvable {
            self.resolvable += nodes;
        } else {
            self.unresolvable += nodes;
        }
        for reason in r.reasons {
            *self.counts.entry(reason).or_insert(0) += nodes;
        }
    }
}

/// `count text` entries sorted as strings and joined, like upstream's histogram.
fn histogram(entries: impl IntoIterator<Item = (String, usize)>) -> String {
    let mut lines: Vec<String> = entries
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(text, n)| format!("{n} {text}"))
        .collect();
    lines.sort();
    lines.join(", ")
}

/// The message of an unschedulable pod with `total` nodes in the cluster, when no node had
/// preemption victims (the verdict a failed preemption gives).
pub fn fit_error(total: usize, d: &Diagnosis<'_>) -> String {
    let (resolvable, unresolvable) = match &d.prefilter {
        Some(_) => (0, total),
        None => (d.resolvable, d.unresolvable),
    };
    let verdict = preemption_failed(
        total,
        [
            (NOT_HELPFUL.to_string(), unresolvable),
            (NO_VICTIMS.to_string(), resolvable),
        ],
    );
    fit_error_with(total, d, &verdict)
}

/// A node where preemption cannot help (upstream `UnschedulableAndUnresolvable`).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// A node with no lower-priority pod to remove.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// The preemption verdict when no node has victims: `preemption: 0/N nodes are available: …`,
/// counting why each node could not help. Upstream nests this `0/N …` message, period
/// included, in the pod's message and ends it with another period: hence the `..` its users
/// see.
pub fn preemption_failed(
    total: usize,
    per_node: impl IntoIterator<Item = (String, usize)>,
) -> String {
    format!(
        "preemption: 0/{total} nodes are available: {}.",
        histogram(per_node)
    )
}

/// The pod's message: why each node refused it, then (unless empty) the preemption verdict
/// (`post_filter`, upstream's PostFilter message), each ending with a period.
pub fn fit_error_with(total: usize, d: &Diagnosis<'_>, post_filter: &str) -> String {
    let mut msg = format!("0/{total} nodes are available:");
    match &d.prefilter {
        Some(pre) => msg.push_str(&format!(" {pre}.")),
        None => {
            let reasons = histogram(d.counts.iter().map(|(r, n)| (r.text(), *n)));
            if !reasons.is_empty() {
                msg.push_str(&format!(" {reasons}."));
            }
        }
    }
    if !post_filter.is_empty() {
        msg.push_str(&format!(" {post_filter}."));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::scheduling::TaintEffect;

    #[test]
    fn the_message_counts_reasons_sorted_as_strings_then_the_preemption_verdict() {
        let cp = Taint::new(
            "node-role.kubernetes.io/control-plane",
            "",
            TaintEffect::NoSchedule,
        );
        let mut d = Diagnosis::default();
        d.record(Rejection::unresolvable(Reason::Taint(&cp)));
        d.record(Rejection::resolvable(Reason::Insufficient("cpu")));
        d.record(Rejection::resolvable(Reason::Insufficient("cpu")));
        assert_eq!(
            fit_error(3, &d),
            "0/3 nodes are available: 1 node(s) had untolerated taint \
             {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 \
             nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption \
             victims found for incoming pod.."
        );
    }

    #[test]
    fn a_node_short_of_several_resources_counts_for_each_but_once_for_preemption() {
        let mut d = Diagnosis::default();
        d.record(Rejection {
            reasons: vec![Reason::Insufficient("cpu"), Reason::Insufficient("memory")],
            resolvable: true,
        });
        assert_eq!(
            fit_error(1, &d),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: \
             0/1 nodes are available: 1 No preemption victims found for incoming pod.."
        );
    }

    #[test]
    fn counts_sort_as_text_so_ten_comes_before_two() {
        let mut d = Diagnosis::default();
        d.record_many(Rejection::unresolvable(Reason::NodeAffinity), 10);
        d.record_many(Rejection::unresolvable(Reason::Unschedulable), 2);
        assert_eq!(
            fit_error(12, &d),
            "0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, \
             2 node(s) were unschedulable. preemption: 0/12 nodes are available: 12 Preemption \
             is not helpful for scheduling.."
        );
    }

    #[test]
    fn a_prefilter_refusal_replaces_the_node_reasons() {
        let d = Diagnosis::prefilter("pod affinity terms conflict");
        assert_eq!(
            fit_error(2, &d),
            "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are \
             available: 2 Preemption is not helpful for scheduling.."
        );
    }

    #[test]
    fn every_reason_reads_like_upstream() {
        let t = Taint::new("k", "v", TaintEffect::NoExecute);
        let cases = [
            (Reason::Unschedulable, "node(s) were unschedulable"),
            (Reason::Taint(&t), "node(s) had untolerated taint {k: v}"),
            (
                Reason::NodeAffinity,
                "node(s) didn't match Pod's node affinity/selector",
            ),
            (
                Reason::Ports,
                "node(s) didn't have free ports for the requested pod ports",
            ),
            (Reason::Insufficient("memory"), "Insufficient memory"),
            (Reason::TooManyPods, "Too many pods"),
            (
                Reason::PodAffinity,
                "node(s) didn't match pod affinity rules",
            ),
            (
                Reason::PodAntiAffinity,
                "node(s) didn't match pod anti-affinity rules",
            ),
            (
                Reason::ExistingAntiAffinity,
                "node(s) didn't satisfy existing pods anti-affinity rules",
            ),
            (
                Reason::Spread,
                "node(s) didn't match pod topology spread constraints",
            ),
            (
                Reason::SpreadMissingLabel,
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            (
                Reason::PrefilterResult,
                "node is filtered out by the prefilter result",
            ),
        ];
        for (r, want) in cases {
            assert_eq!(r.text(), want);
        }
    }
}
