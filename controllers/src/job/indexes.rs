//! The Indexed Job's bookkeeping (upstream `indexed_job_utils.go`): which indexes failed for
//! good (`backoffLimitPerIndex` used up, or a `FailIndex` rule), which failed pod of an index
//! waits for its replacement (which inherits its failure count), and which indexes are pending.
//!
//! Planner: pure, no I/O.

use super::backoff;
use super::failure_policy::{self, Action};
use super::intervals::Intervals;
use super::view::{Job, JobPod, is_failed};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Upstream `calculateFailedIndexes`: `status.failedIndexes` plus the indexes of tracked pods
/// whose failure used up the index's limit (or matched `FailIndex`).
pub fn failed_indexes_of(job: &Job, pods: &[Arc<JobPod>], limit: i32) -> Intervals {
    let completions = job.index_count();
    let prev = Intervals::parse(
        job.status.failed_indexes.as_deref().unwrap_or_default(),
        completions,
    );
    let policy = job.spec.pod_failure_policy.as_ref();
    let mut new: Vec<i32> = pods
        .iter()
        .filter(|p| p.finalizer && is_failed(p, job))
        .filter(|p| {
            let verdict = failure_policy::judge(policy, p);
            verdict.action == Some(Action::FailIndex)
                || (verdict.counts && p.index_failures >= limit)
        })
        .filter_map(|p| p.valid_index(completions))
        .collect();
    new.sort_unstable();
    new.dedup();
    prev.with_sorted(new)
}

/// Upstream `getPodsWithDelayedDeletionPerIndex`: for each index with neither a success, a
/// failure verdict nor an active pod, its latest failed pod (most failures, finished last).
pub fn delayed_per_index(
    job: &Job,
    pods: &[Arc<JobPod>],
    active: &[&Arc<JobPod>],
    succeeded: &Intervals,
    failed: &Intervals,
) -> BTreeMap<i32, String> {
    let completions = job.index_count();
    let busy: BTreeSet<i32> = active.iter().filter_map(|p| p.index).collect();
    let none = BTreeSet::new();
    let mut best: BTreeMap<i32, &Arc<JobPod>> = BTreeMap::new();
    for p in super::plan::tracked(job, pods, &none).filter(|p| is_failed(p, job)) {
        let Some(ix) = p.valid_index(completions) else {
            continue;
        };
        if succeeded.has(ix) || failed.has(ix) || busy.contains(&ix) {
            continue;
        }
        let absolute = |q: &JobPod| q.index_failures + q.index_ignored_failures;
        match best.get(&ix) {
            Some(b)
                if !(absolute(b) <= absolute(p)
                    && backoff::finish_time(p) >= backoff::finish_time(b)) => {}
            _ => {
                best.insert(ix, p);
            }
        }
    }
    best.into_iter()
        .map(|(ix, p)| (ix, p.uid.clone()))
        .collect()
}

/// Upstream `getNewIndexFailureCounts`: the counts a replacement of `before` carries.
pub fn failure_counts(job: &Job, before: Option<&JobPod>) -> (i32, i32) {
    let Some(p) = before else { return (0, 0) };
    let (mut counted, mut ignored) = (p.index_failures, p.index_ignored_failures);
    if failure_policy::judge(job.spec.pod_failure_policy.as_ref(), p).counts {
        counted += 1;
    } else {
        ignored += 1;
    }
    (counted, ignored)
}

/// Upstream `firstPendingIndexes`: the first `n` indexes that neither succeeded, failed, nor
/// have an active pod (nor a terminating one, when only failed pods are replaced).
pub fn first_pending(
    job: &Job,
    pods: &[Arc<JobPod>],
    active: &[&Arc<JobPod>],
    succeeded: &Intervals,
    failed: Option<&Intervals>,
    n: usize,
) -> Vec<i32> {
    let mut taken: Vec<i32> = active.iter().filter_map(|p| p.index).collect();
    if job.only_replace_failed() {
        taken.extend(
            pods.iter()
                .filter(|p| p.terminating())
                .filter_map(|p| p.index),
        );
    }
    taken.sort_unstable();
    taken.dedup();
    let mut busy = succeeded.with_sorted(taken);
    if let Some(f) = failed {
        busy = busy.merge(f);
    }
    (0..job.index_count())
        .filter(|ix| !busy.has(*ix))
        .take(n)
        .collect()
}
