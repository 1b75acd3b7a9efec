//! The RollingUpdate strategy (upstream `rollingUpdate`): which old pods to delete, or where to
//! start new pods beside old ones, within `maxUnavailable` and `maxSurge`. Both are counts of
//! nodes, as absolute numbers or percentages of the nodes that should run the pod, rounded up
//! (upstream's `UnavailableCount`/`SurgeCount`); if both come out 0 (no nodes yet, or a
//! config the API would refuse) one unavailable node is allowed.
//!
//! Worked examples: maxUnavailable 1 on 3 nodes allows 1 node without an available pod;
//! "30%" of 3 is ceil(0.9) = 1, of 10 is 3, of 11 is ceil(3.3) = 4. maxSurge "10%" of 3 is 1.
//!
//! Without surge: an old pod that is not available may be replaced at once (it counts as
//! unavailable); an available one only while fewer than maxUnavailable nodes lack an available
//! pod, where a node counts as unavailable if it has no pod, an unavailable new pod, or an old
//! and a new one (the core loop is still at work there). The deleted pods' replacements come
//! from [`super::plan::manage`] on the next pass. With surge: a new pod starts beside an old
//! unavailable pod at once, beside an old available one while fewer than maxSurge new pods are
//! not yet available; an old pod goes once the new one beside it is available.
//!
//! Planner: pure, no I/O.

use super::eligibility::fit;
use super::plan::{Changes, Deletion, Why};
use super::view::{DaemonSet, Node, Strategy};
use crate::views::Pod;
use crate::workload::availability::is_available;
use crate::workload::scaled::scaled_value;
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `value` of `total`, rounded up; a malformed value (validation refuses them) counts as 0.
fn count(value: &IntOrString, total: i32) -> i32 {
    scaled_value(value, total, true).unwrap_or(0).max(0)
}

/// Upstream `AllowsSurge`: maxSurge of one node is not 0.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    match &ds.strategy {
        Strategy::RollingUpdate { max_surge, .. } => count(max_surge, 1) != 0,
        Strategy::OnDelete => false,
    }
}

/// (maxSurge, maxUnavailable) in nodes, for `desired` nodes that should run the pod (upstream
/// `updatedDesiredNodeCounts`).
pub fn limits(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    let (surge, unavailable) = match &ds.strategy {
        Strategy::RollingUpdate {
            max_unavailable,
            max_surge,
        } => (count(max_surge, desired), count(max_unavailable, desired)),
        Strategy::OnDelete => (0, 0),
    };
    if desired > 0 && surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// A node's new pod and old pod, either possibly missing.
type NewAndOld<'a> = (Option<&'a Arc<Pod>>, Option<&'a Arc<Pod>>);

/// Upstream `findUpdatedPodsOnNode`: the new and the old pod of a node among those not being
/// deleted; `None` when there are two of either (the core loop prunes them first).
fn new_and_old<'a>(ds: &DaemonSet, pods: &'a [Arc<Pod>], hash: &str) -> Option<NewAndOld<'a>> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| !p.deleting) {
        let slot = if ds.is_updated(pod, hash) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

fn replace(pod: &Arc<Pod>) -> Deletion {
    Deletion {
        pod: pod.clone(),
        why: Why::Update,
    }
}

/// One step of the rolling update.
pub fn rolling_update(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> Changes {
    let should_run: BTreeMap<&str, bool> = nodes
        .iter()
        .map(|n| (n.name.as_str(), fit(&ds.placement, n).should_run))
        .collect();
    let desired = should_run.values().filter(|r| **r).count();
    let mut all: BTreeMap<&str, &[Arc<Pod>]> = pods
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    for (n, run) in &should_run {
        if *run {
            all.entry(n).or_insert(&[]);
        }
    }
    let (max_surge, max_unavailable) = limits(ds, i32::try_from(desired).unwrap_or(i32::MAX));
    let (max_surge, max_unavailable) = (
        usize::try_from(max_surge).unwrap_or(0),
        usize::try_from(max_unavailable).unwrap_or(0),
    );
    let available = |p: &Pod| is_available(p, ds.min_ready_seconds, now);
    let mut changes = Changes::default();

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for here in all.values() {
            match new_and_old(ds, here, hash) {
                None | Some((None, None)) | Some((Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                Some((None, Some(old))) => {
                    if !available(old) {
                        changes.delete.push(replace(old));
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(old);
                    }
                }
            }
        }
        let room = max_unavailable
            .saturating_sub(unavailable)
            .min(candidates.len());
        changes
            .delete
            .extend(candidates.into_iter().take(room).map(replace));
        return changes;
    }

    let (mut surging, mut available_nodes) = (0usize, 0usize);
    let (mut candidates, mut off_nodes) = (Vec::new(), Vec::new());
    for (node, here) in &all {
        let Some((new, old)) = new_and_old(ds, here, hash) else {
            surging += 1;
            continue;
        };
        // Availability is counted on every node, those being sunset included.
        if old.or(new).is_some_and(|p| available(p)) {
            available_nodes += 1;
        }
        let runs_here = should_run.get(node).copied().unwrap_or(false);
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) if !available(old) => {
                if runs_here {
                    changes.create.push((*node).to_string());
                } else {
                    changes.delete.push(replace(old));
                }
            }
            (None, Some(old)) => {
                if !runs_here {
                    off_nodes.push(old);
                } else if surging < max_surge {
                    candidates.push((*node).to_string());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    changes.delete.push(replace(old));
                } else {
                    surging += 1;
                }
            }
        }
    }
    // With surge the owner expects full availability: an old pod on a node that no longer
    // runs the DaemonSet goes only while more nodes are available than desired.
    let deletable = available_nodes.saturating_sub(desired).min(off_nodes.len());
    changes
        .delete
        .extend(off_nodes.into_iter().take(deletable).map(replace));
    let room = max_surge.saturating_sub(surging).min(candidates.len());
    changes.create.extend(candidates.into_iter().take(room));
    changes
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
