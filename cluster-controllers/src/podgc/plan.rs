//! Which pods the pod garbage collector removes (upstream's `PodGCController`): pods bound to a
//! node that no longer exists (`gcOrphaned`: marked Failed with `DisruptionTarget`
//! `DeletionByPodGC`, then force-deleted; terminating ones included), terminating pods never
//! bound (`gcUnscheduledTerminating`), and terminating pods on a node that is not Ready and
//! carries the `node.kubernetes.io/out-of-service` taint (`gcTerminating`). A node is taken for
//! gone only after it has been missing for the quarantine (40 s, as upstream), so a node whose
//! creation the cache has not seen yet does not cost its pods.
//!
//! Finished pods beyond `--terminated-pod-gc-threshold` are chosen in [`super::terminated`].
//!
//! Planner: pure, no I/O.

use jiff::Timestamp;
use std::time::Duration;

/// How long a node must be missing before its pods are collected.
pub const QUARANTINE: Duration = Duration::from_secs(40);
/// The taint with which an operator declares a node out of service.
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// What the collector knows about a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// `spec.nodeName`; empty when not bound.
    pub node: String,
    pub terminating: bool,
    /// Succeeded or Failed.
    pub terminal: bool,
    /// Failed with reason `Evicted`.
    pub evicted: bool,
    /// `metadata.creationTimestamp`.
    pub created: String,
}

/// What it knows about the pod's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFacts {
    Present {
        ready: bool,
        out_of_service: bool,
    },
    /// Missing from the cache since then.
    Missing {
        since: Timestamp,
    },
}

/// What happens to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Look again then (the node's quarantine runs).
    Wait(Duration),
    /// Its node is gone (once confirmed by a fresh read): mark it Failed with the condition
    /// unless it is terminal, then force-delete it.
    Orphaned,
    /// Force-delete it as it is.
    ForceDelete,
}

/// The verdict on `pod`, whose node is `node`, with a node `quarantine` ([`QUARANTINE`]).
pub fn verdict(
    pod: &PodFacts,
    node: Option<NodeFacts>,
    quarantine: Duration,
    now: Timestamp,
) -> Verdict {
    if pod.node.is_empty() {
        return if pod.terminating {
            Verdict::ForceDelete
        } else {
            Verdict::Keep
        };
    }
    match node {
        None => Verdict::Keep,
        Some(NodeFacts::Missing { since }) => {
            let gone_for = since
                .until(now)
                .ok()
                .and_then(|s| Duration::try_from(s).ok())
                .unwrap_or_default();
            if gone_for >= quarantine {
                Verdict::Orphaned
            } else {
                Verdict::Wait(quarantine - gone_for + Duration::from_millis(1))
            }
        }
        Some(NodeFacts::Present {
            ready,
            out_of_service,
        }) => {
            if pod.terminating && !ready && out_of_service {
                Verdict::ForceDelete
            } else {
                Verdict::Keep
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_time::at;

    fn pod(node: &str, terminating: bool) -> PodFacts {
        PodFacts {
            node: node.into(),
            terminating,
            terminal: false,
            evicted: false,
            created: String::new(),
        }
    }

    #[test]
    fn pods_are_collected_when_their_node_is_gone_or_they_can_never_end() {
        let present = |ready, out_of_service| {
            Some(NodeFacts::Present {
                ready,
                out_of_service,
            })
        };
        let cases: Vec<(&str, PodFacts, Option<NodeFacts>, Verdict)> = vec![
            ("a pending pod stays", pod("", false), None, Verdict::Keep),
            (
                "a terminating pod never bound goes",
                pod("", true),
                None,
                Verdict::ForceDelete,
            ),
            (
                "a pod on a live node stays",
                pod("n", false),
                present(true, false),
                Verdict::Keep,
            ),
            (
                "a pod on a node just missing waits out the quarantine",
                pod("n", false),
                Some(NodeFacts::Missing { since: at(-10) }),
                Verdict::Wait(Duration::from_millis(30_001)),
            ),
            (
                "a pod on a node missing past the quarantine is orphaned",
                pod("n", true),
                Some(NodeFacts::Missing { since: at(-40) }),
                Verdict::Orphaned,
            ),
            (
                "a terminating pod on an unready node that is out of service goes",
                pod("n", true),
                present(false, true),
                Verdict::ForceDelete,
            ),
            (
                "a terminating pod on an unready node waits for its agent",
                pod("n", true),
                present(false, false),
                Verdict::Keep,
            ),
            (
                "out of service but Ready: the agent ends it",
                pod("n", true),
                present(true, true),
                Verdict::Keep,
            ),
        ];
        for (name, p, node, want) in cases {
            assert_eq!(verdict(&p, node, QUARANTINE, at(0)), want, "{name}");
        }
    }
}
