//! Which active pods go first when a Job has too many, is suspended, or repeats an index
//! (upstream `activePodsForRemoval` over `controller.ActivePods`).
//!
//! Planner: pure, no I/O.

use super::view::{Job, JobPod};
use jiff::Timestamp;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Upstream `afterOrZero` as an order: no time first, then later before earlier.
fn later_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    }
}

/// Upstream `controller.ActivePods`: earlier pods are removed first (unscheduled, pending, not
/// ready, ready more recently, more restarts, newer).
pub fn removal_order(a: &JobPod, b: &JobPod) -> Ordering {
    let phase = |p: &JobPod| match p.phase.as_str() {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    };
    (!a.node_name.is_empty())
        .cmp(&!b.node_name.is_empty())
        .then_with(|| phase(a).cmp(&phase(b)))
        .then_with(|| a.ready.cmp(&b.ready))
        .then_with(|| {
            if a.ready && b.ready {
                later_first(a.ready_since, b.ready_since)
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| b.max_restarts.cmp(&a.max_restarts))
        .then_with(|| later_first(a.created, b.created))
}

/// Upstream `activePodsForRemoval`: for an Indexed Job every pod without a valid index and all
/// but one pod of a repeated index first; then, up to `at_least`, in [`removal_order`].
pub fn for_removal(job: &Job, active: &[&Arc<JobPod>], at_least: usize) -> Vec<Arc<JobPod>> {
    let mut rm: Vec<Arc<JobPod>> = Vec::new();
    let mut left: Vec<Arc<JobPod>> = Vec::new();
    if job.indexed() {
        let completions = job.index_count();
        let mut by_index: BTreeMap<i32, Vec<Arc<JobPod>>> = BTreeMap::new();
        for p in active {
            match p.valid_index(completions) {
                Some(ix) => by_index.entry(ix).or_default().push((*p).clone()),
                None => rm.push((*p).clone()),
            }
        }
        for (_, mut same) in by_index {
            same.sort_by(|a, b| removal_order(a, b));
            let keep = same.pop();
            rm.extend(same);
            left.extend(keep);
        }
    } else {
        left = active.iter().map(|p| (*p).clone()).collect();
    }
    if rm.len() < at_least {
        left.sort_by(|a, b| removal_order(a, b));
        rm.extend(left.into_iter().take(at_least - rm.len()));
    }
    rm
}
