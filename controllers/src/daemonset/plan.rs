//! The DaemonSet controller's core decisions (upstream `manage` and `podsShouldBeOnNode`), node
//! by node: a node that should run the pod and has none gets one; a node that may keep it has
//! its failed pods deleted (with [`backoff`](super::backoff)), its succeeded ones deleted and
//! all but one running pod (the oldest; with surge, old and new as the rolling update needs)
//! deleted; a node that may not keep it loses them all. Unbound pods meant for nodes that no
//! longer exist are deleted too (upstream `getUnscheduledPodsWithoutNode`: the scheduler would
//! never bind them); bound ones are the pod garbage collector's.
//!
//! Planner: pure, no I/O.

use super::backoff::{self, FailedBackoff};
use super::eligibility::fit;
use super::rolling::allows_surge;
use super::view::{DaemonPod, DaemonSet, HASH_LABEL, Node, Revision};
use crate::views::Pod;
use crate::workload::availability::is_available;
use berth_registry::events::EventType;
use jiff::Timestamp;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// At most this many creations or deletions per pass (upstream's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;

/// Why a pod goes; decides the event and the deletion's grace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Failed: a `FailedDaemonPod` warning, and the back-off under `key` steps.
    Failed { node: String, key: String },
    /// Succeeded: a `SucceededDaemonPod` event.
    Succeeded { node: String },
    /// More pods on the node than it should have.
    Excess,
    /// The node may no longer run the pod.
    NotEligible,
    /// Not bound, and the node it is meant for is gone.
    NodeGone,
    /// Replaced by the rolling update.
    Update,
}

/// One pod to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub pod: Arc<Pod>,
    pub why: Why,
}

/// Pods to create and delete.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Nodes that get a new pod, in node order.
    pub create: Vec<String>,
    pub delete: Vec<Deletion>,
    /// When a failed pod in back-off may be deleted.
    pub requeue_after: Option<Duration>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.delete.is_empty()
    }

    /// At most [`BURST_REPLICAS`] of each, as upstream's `syncNodes`.
    pub fn capped(mut self) -> Changes {
        self.create.truncate(BURST_REPLICAS);
        self.delete.truncate(BURST_REPLICAS);
        self
    }
}

/// Upstream `podByCreationTimestampAndPhase`: bound pods first, then older, then by name.
pub fn oldest_first(a: &Pod, b: &Pod) -> Ordering {
    a.node_name
        .is_empty()
        .cmp(&b.node_name.is_empty())
        .then_with(|| a.created.cmp(&b.created))
        .then_with(|| a.name.cmp(&b.name))
}

impl Deletion {
    /// The event announcing the deletion (upstream's `FailedDaemonPod` and
    /// `SucceededDaemonPod`), if any.
    pub fn event(&self, namespace: &str) -> Option<(EventType, &'static str, String)> {
        let (t, reason, what, node) = match &self.why {
            Why::Failed { node, .. } => (EventType::Warning, "FailedDaemonPod", "failed", node),
            Why::Succeeded { node } => (EventType::Normal, "SucceededDaemonPod", "succeeded", node),
            _ => return None,
        };
        let verb = if t == EventType::Warning {
            "kill"
        } else {
            "delete"
        };
        let pod = &self.pod.name;
        let msg = format!(
            "Found {what} daemon pod {namespace}/{pod} on node {node}, will try to {verb} it"
        );
        Some((t, reason, msg))
    }
}

/// The revision hashes the pods carry: their revisions outlive the history limit.
pub fn live_hashes(pods: &[DaemonPod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p.pod.labels.get(HASH_LABEL).cloned())
        .collect()
}

/// The pods made from a duplicate of the current revision, to be relabelled with its hash
/// (upstream relabels every pod of another hash; only the duplicates' pods are meant).
pub fn made_from<'a>(dup: &'a Revision, pods: &'a [DaemonPod]) -> impl Iterator<Item = &'a Pod> {
    pods.iter()
        .map(|p| &*p.pod)
        .filter(|p| p.labels.get(HASH_LABEL).map(String::as_str) == Some(dup.hash(HASH_LABEL)))
}

/// The claimed pods by the node they are meant for (upstream `getNodesToDaemonPods`), without
/// finished pods that are being deleted; each node's pods oldest first.
pub fn by_node(pods: &[DaemonPod]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut out: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in pods {
        let finished = matches!(p.pod.phase.as_str(), "Succeeded" | "Failed");
        if finished && p.pod.deleting {
            continue;
        }
        if let Some(node) = &p.node {
            out.entry(node.clone()).or_default().push(p.pod.clone());
        }
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| oldest_first(a, b));
    }
    out
}

/// What one pass does about the pods, before any rolling update.
pub fn manage(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    failed: &FailedBackoff,
    now: Timestamp,
) -> Changes {
    let mut changes = Changes::default();
    let surge = allows_surge(ds);
    // Back-off keys stepped by this plan: a second failed pod on the node waits its turn.
    let mut stepped = BTreeSet::new();
    for node in nodes {
        let verdict = fit(&ds.placement, node);
        let here = pods.get(&node.name);
        match here {
            None if verdict.should_run => changes.create.push(node.name.clone()),
            Some(list) if verdict.should_continue => {
                let mut running = Vec::new();
                for pod in list.iter().filter(|p| !p.deleting) {
                    match pod.phase.as_str() {
                        "Failed" => {
                            let key =
                                backoff::key(&ds.uid, ds.status.observed_generation, &node.name);
                            let wait = failed
                                .remaining(&key, now)
                                .or_else(|| stepped.contains(&key).then_some(backoff::INITIAL));
                            if let Some(wait) = wait {
                                changes.requeue_after =
                                    Some(changes.requeue_after.map_or(wait, |r| r.min(wait)));
                                continue;
                            }
                            stepped.insert(key.clone());
                            changes.delete.push(Deletion {
                                pod: pod.clone(),
                                why: Why::Failed {
                                    node: node.name.clone(),
                                    key,
                                },
                            });
                        }
                        "Succeeded" => changes.delete.push(Deletion {
                            pod: pod.clone(),
                            why: Why::Succeeded {
                                node: node.name.clone(),
                            },
                        }),
                        _ => running.push(pod.clone()),
                    }
                }
                prune(ds, surge, &running, hash, now, &mut changes);
                if surge && running.is_empty() && verdict.should_run {
                    changes.create.push(node.name.clone());
                }
            }
            Some(list) if !verdict.should_continue => {
                for pod in list.iter().filter(|p| !p.deleting) {
                    changes.delete.push(Deletion {
                        pod: pod.clone(),
                        why: Why::NotEligible,
                    });
                }
            }
            _ => {}
        }
    }
    let known: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    for (node, list) in pods {
        if known.contains(node.as_str()) {
            continue;
        }
        for pod in list
            .iter()
            .filter(|p| !p.deleting && p.node_name.is_empty())
        {
            changes.delete.push(Deletion {
                pod: pod.clone(),
                why: Why::NodeGone,
            });
        }
    }
    changes
}

/// The running pods of one node beyond what it should keep (oldest first in `running`): without
/// surge all but the oldest; with surge at most the oldest new one and the oldest old one, and
/// the old one too once it is not ready or the new one is available.
fn prune(
    ds: &DaemonSet,
    surge: bool,
    running: &[Arc<Pod>],
    hash: &str,
    now: Timestamp,
    changes: &mut Changes,
) {
    let excess = |pod: &Arc<Pod>| Deletion {
        pod: pod.clone(),
        why: Why::Excess,
    };
    if running.len() <= 1 {
        return;
    }
    if !surge {
        changes.delete.extend(running[1..].iter().map(excess));
        return;
    }
    let (mut oldest_new, mut oldest_old) = (None, None);
    for pod in running {
        // Upstream compares the hash label only here, not the template generation.
        let slot = if pod.labels.get(super::view::HASH_LABEL).map(String::as_str) == Some(hash) {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            changes.delete.push(excess(pod));
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old)
        && (!old.ready || is_available(new, ds.min_ready_seconds, now))
    {
        changes.delete.push(Deletion {
            pod: old.clone(),
            why: Why::Update,
        });
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
