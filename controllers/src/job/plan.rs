//! The Job controller's decisions for one pass (upstream `syncJob` up to `manageJob`): claim the
//! pods (adopting matching orphans, as a `manualSelector` Job adopts an old Job's pods), count the
//! pods, decide whether the Job met its failure criteria (a `FailJob` rule, `backoffLimit`, the
//! active deadline, failed indexes) or its success criteria (the success policy), and what to
//! do about pods: terminate them all (finishing), remove some (suspended, too many, duplicate
//! indexes), or create new ones (respecting parallelism, remaining completions, pending
//! indexes and the failure back-off).
//!
//! Planner: pure, no I/O.

use super::backoff;
use super::conditions::{
    self, BACKOFF_LIMIT_EXCEEDED, DEADLINE_EXCEEDED, FAILED_INDEXES, FAILURE_TARGET,
    MAX_FAILED_INDEXES_EXCEEDED, POD_FAILURE_POLICY, SUCCESS_CRITERIA_MET, SUCCESS_POLICY,
};
use super::failure_policy;
use super::intervals::Intervals;
use super::success_policy;
use super::view::{Job, JobPod, is_failed};
use super::{indexes, removal};
pub use crate::workload::Claim;
use crate::workload::claim::{Candidate, Owner, Rules};
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use jiff::{SignedDuration, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// At most this many pods are created or deleted per pass (upstream
/// `MaxPodCreateDeletePerSync`).
pub const MAX_CREATE_DELETE: usize = 500;
/// The shortest wait a pass asks for (upstream's `syncJobBatchPeriod`).
const MIN_REQUEUE: Duration = Duration::from_secs(1);

/// How a Job finishes: the interim condition (if this pass decided it) and the terminal one.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// `FailureTarget` or `SuccessCriteriaMet` to add now; `None` when the Job has it already.
    pub interim: Option<batch::JobCondition>,
    /// `Failed` or `Complete`, added once no pod is left.
    pub terminal: batch::JobCondition,
}

impl Finish {
    fn from_interim(c: batch::JobCondition, now: Timestamp) -> Finish {
        let terminal = conditions::terminal_for(&c, now);
        Finish {
            interim: Some(c),
            terminal,
        }
    }

    fn failure(reason: &str, message: &str, now: Timestamp) -> Finish {
        let c = conditions::new_condition(FAILURE_TARGET, "True", reason, message, now);
        Finish::from_interim(c, now)
    }

    pub fn success(&self) -> bool {
        self.terminal.type_ == conditions::COMPLETE
    }
}

/// A pod to create: its completion index and, with `backoffLimitPerIndex`, the failure counts
/// it carries (counted, ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewPod {
    pub index: Option<i32>,
    pub failures: Option<(i32, i32)>,
}

/// What happens to pods this pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    None,
    /// The Job is finishing: every active pod is deleted, its finalizer kept (it is counted).
    Terminate(Vec<Arc<JobPod>>),
    /// Suspended, too many, or a duplicate index: deleted with the finalizer removed first
    /// (never counted).
    Remove(Vec<Arc<JobPod>>),
    Create(Vec<NewPod>),
}

/// The decisions of one pass, and the counts they were made on (upstream's `syncJobCtx`).
#[derive(Debug, Clone, PartialEq)]
pub struct Manage {
    pub active: i32,
    pub ready: i32,
    pub terminating: i32,
    /// Successes so far (indexes for an Indexed Job), the pods of this pass included.
    pub succeeded: i32,
    pub start_time: Option<Time>,
    pub finish: Option<Finish>,
    /// Indexed: `status.completedIndexes` as read, and with this pass's successes.
    pub prev_succeeded_indexes: Intervals,
    pub succeeded_indexes: Intervals,
    /// With `backoffLimitPerIndex`: the failed indexes.
    pub failed_indexes: Option<Intervals>,
    /// Per index, the failed pod kept (with its finalizer) until its replacement exists.
    pub delayed: BTreeMap<i32, String>,
    pub change: Change,
    /// Pods were managed (not for a Job being deleted or finishing): suspension is settled.
    pub managed: bool,
    pub requeue_after: Option<Duration>,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn sooner(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// The UIDs of `status.uncountedTerminatedPods`: (succeeded, failed).
pub fn uncounted(status: &batch::JobStatus) -> (BTreeSet<String>, BTreeSet<String>) {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let set = |v: Option<Vec<String>>| v.unwrap_or_default().into_iter().collect();
    (set(u.succeeded), set(u.failed))
}

/// Upstream `getValidPodsWithFilter`: tracked pods not in `skip` with, for an Indexed Job, an
/// index within completions.
pub(super) fn tracked<'a>(
    job: &'a Job,
    pods: &'a [Arc<JobPod>],
    skip: &'a BTreeSet<String>,
) -> impl Iterator<Item = &'a Arc<JobPod>> + 'a {
    pods.iter().filter(move |p| {
        p.finalizer
            && !skip.contains(&p.uid)
            && (!job.indexed() || p.valid_index(job.index_count()).is_some())
    })
}

/// The Job as the claim engine's owner of pods: what it adopts carries the tracking finalizer,
/// what it releases loses it.
pub fn owner(job: &Job) -> Owner<'_> {
    Owner {
        resource: berth_shared::resource::JOBS,
        namespace: &job.namespace,
        name: &job.name,
        uid: &job.uid,
        selector: &job.selector,
        deleting: job.deleting,
        rules: Rules {
            active_only: false,
            finalizer: Some(super::view::TRACKING_FINALIZER),
        },
    }
}

/// The claim of `job` on `pod` (upstream `ClaimObject`).
pub fn claim(job: &Job, pod: &JobPod) -> Claim {
    owner(job).decide(&Candidate {
        labels: &pod.labels,
        controller_uid: pod.controller.as_ref().map(|c| c.uid.as_str()),
        deleting: pod.deleting,
        finished: false,
    })
}

/// The pass's decisions for `job` and its claimed pods at `now`.
pub fn manage(job: &Job, pods: &[Arc<JobPod>], now: Timestamp) -> Manage {
    let active_pods: Vec<&Arc<JobPod>> = pods.iter().filter(|p| p.active()).collect();
    let (unc_succeeded, unc_failed) = uncounted(&job.status);
    let new_succeeded = tracked(job, pods, &unc_succeeded)
        .filter(|p| p.succeeded())
        .count();
    let new_failed: Vec<&Arc<JobPod>> = tracked(job, pods, &unc_failed)
        .filter(|p| is_failed(p, job))
        .collect();
    let policy = job.spec.pod_failure_policy.as_ref();
    let counted_failures = new_failed
        .iter()
        .filter(|p| failure_policy::judge(policy, p).counts)
        .count();
    let mut succeeded =
        job.status.succeeded.unwrap_or(0) + count(new_succeeded) + count(unc_succeeded.len());
    let failed = job.status.failed.unwrap_or(0) + count(counted_failures) + count(unc_failed.len());
    let start_time = job
        .status
        .start_time
        .clone()
        .or_else(|| (!job.suspended()).then(|| conditions::stamp(now)));
    let mut requeue_after = None;

    let list = job.conditions();
    let mut finish = if let Some(c) = conditions::true_condition(list, SUCCESS_CRITERIA_MET) {
        Some(Finish {
            interim: None,
            terminal: conditions::terminal_for(c, now),
        })
    } else if let Some(c) = conditions::true_condition(list, FAILURE_TARGET) {
        Some(Finish {
            interim: None,
            terminal: conditions::terminal_for(c, now),
        })
    } else {
        fail_job_message(job, pods).map(|m| Finish::failure(POD_FAILURE_POLICY, &m, now))
    };
    if finish.is_none() {
        if failed > job.backoff_limit() || past_backoff_limit_on_failure(job, pods) {
            let msg = "Job has reached the specified backoff limit";
            finish = Some(Finish::failure(BACKOFF_LIMIT_EXCEEDED, msg, now));
        } else if let Some(left) = deadline_left(job, start_time.as_ref(), now) {
            if left.is_zero() {
                let msg = "Job was active longer than specified deadline";
                finish = Some(Finish::failure(DEADLINE_EXCEEDED, msg, now));
            } else {
                requeue_after = sooner(requeue_after, left);
            }
        }
    }

    let completions = job.index_count();
    let prev_succeeded_indexes = Intervals::parse(
        job.status.completed_indexes.as_deref().unwrap_or_default(),
        completions,
    );
    let mut succeeded_indexes = Intervals::default();
    let mut failed_indexes = None;
    let mut delayed = BTreeMap::new();
    if job.indexed() {
        let mut new: Vec<i32> = pods
            .iter()
            .filter(|p| p.succeeded() && p.finalizer)
            .filter_map(|p| p.valid_index(completions))
            .collect();
        new.sort_unstable();
        new.dedup();
        succeeded_indexes = prev_succeeded_indexes.with_sorted(new);
        succeeded = succeeded_indexes.total();
        if let Some(limit) = job.per_index_limit() {
            let failed = indexes::failed_indexes_of(job, pods, limit);
            if finish.is_none() {
                if job
                    .spec
                    .max_failed_indexes
                    .is_some_and(|m| failed.total() > m)
                {
                    let msg = "Job has exceeded the specified maximal number of failed indexes";
                    finish = Some(Finish::failure(MAX_FAILED_INDEXES_EXCEEDED, msg, now));
                } else if failed.total() > 0
                    && failed.total() + succeeded_indexes.total() >= completions
                {
                    let msg = "Job has failed indexes";
                    finish = Some(Finish::failure(FAILED_INDEXES, msg, now));
                }
            }
            delayed =
                indexes::delayed_per_index(job, pods, &active_pods, &succeeded_indexes, &failed);
            failed_indexes = Some(failed);
        }
        if finish.is_none()
            && let Some(msg) = success_policy::met(
                job.spec.success_policy.as_ref(),
                completions,
                &succeeded_indexes,
            )
        {
            let c =
                conditions::new_condition(SUCCESS_CRITERIA_MET, "True", SUCCESS_POLICY, &msg, now);
            finish = Some(Finish::from_interim(c, now));
        }
    }

    let mut m = Manage {
        active: count(active_pods.len()),
        ready: count(active_pods.iter().filter(|p| p.ready).count()),
        terminating: count(pods.iter().filter(|p| p.terminating()).count()),
        succeeded,
        start_time,
        finish,
        prev_succeeded_indexes,
        succeeded_indexes,
        failed_indexes,
        delayed,
        change: Change::None,
        managed: false,
        requeue_after,
    };
    if m.finish.is_some() {
        m.change = Change::Terminate(active_pods.into_iter().cloned().collect());
    } else if !job.deleting {
        m.managed = true;
        let (change, wait) = manage_pods(job, pods, &active_pods, &m, now);
        m.change = change;
        if let Some(w) = wait {
            m.requeue_after = sooner(m.requeue_after, w.max(MIN_REQUEUE));
        }
    }
    m
}

/// Upstream `getFailJobMessage`: the message of the first failed pod a `FailJob` rule matches.
fn fail_job_message(job: &Job, pods: &[Arc<JobPod>]) -> Option<String> {
    let policy = job.spec.pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_failed(p, job))
        .find_map(|p| failure_policy::judge(Some(policy), p).fail_job)
}

/// Upstream `pastBackoffLimitOnFailure`: with `OnFailure`, the restarts of every container of
/// the pending and running pods reach the limit (any restart, for a limit of 0).
fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<JobPod>]) -> bool {
    if !job.restart_on_failure() {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(p.phase.as_str(), "Running" | "Pending"))
        .map(|p| p.total_restarts)
        .sum();
    match job.backoff_limit() {
        0 => restarts > 0,
        limit => restarts >= limit,
    }
}

/// With `activeDeadlineSeconds` on a started, unsuspended Job: the time left (zero when past).
fn deadline_left(job: &Job, start: Option<&Time>, now: Timestamp) -> Option<Duration> {
    let secs = job.spec.active_deadline_seconds?;
    let start = start?;
    if job.suspended() {
        return None;
    }
    let end = start.0 + SignedDuration::from_secs(secs);
    Some(Duration::try_from(end.duration_since(now)).unwrap_or_default())
}

/// Upstream `manageJob`: remove pods (suspended, too many, duplicate indexes) or create the
/// missing ones; the wait before creating when in back-off.
fn manage_pods(
    job: &Job,
    pods: &[Arc<JobPod>],
    active: &[&Arc<JobPod>],
    m: &Manage,
    now: Timestamp,
) -> (Change, Option<Duration>) {
    let n_active = count(active.len());
    if job.suspended() {
        let all = removal::for_removal(job, active, active.len());
        return (Change::Remove(all), None);
    }
    let parallelism = job.parallelism();
    let want = match job.completions() {
        None if m.succeeded > 0 => n_active,
        None => parallelism,
        Some(c) => (c - m.succeeded).min(parallelism).max(0),
    };
    let excess = usize::try_from(n_active - want).unwrap_or(0);
    let mut remove = removal::for_removal(job, active, excess);
    if !remove.is_empty() {
        remove.truncate(MAX_CREATE_DELETE);
        return (Change::Remove(remove), None);
    }
    let terminating = if job.only_replace_failed() {
        m.terminating
    } else {
        0
    };
    let missing = want - terminating - n_active;
    if missing <= 0 {
        return (Change::None, None);
    }
    if job.per_index_limit().is_none() {
        let refs: Vec<&JobPod> = pods.iter().map(|p| p.as_ref()).collect();
        let r = backoff::record(job, &refs);
        let wait = backoff::remaining(r.failures, r.last_failure, now);
        if !wait.is_zero() {
            return (Change::None, Some(wait));
        }
    }
    let missing = usize::try_from(missing).unwrap_or(0).min(MAX_CREATE_DELETE);
    if !job.indexed() {
        let new = NewPod {
            index: None,
            failures: None,
        };
        return (Change::Create(vec![new; missing]), None);
    }
    let indexes = indexes::first_pending(
        job,
        pods,
        active,
        &m.succeeded_indexes,
        m.failed_indexes.as_ref(),
        missing,
    );
    let Some(_) = job.per_index_limit() else {
        let new = indexes.into_iter().map(|i| NewPod {
            index: Some(i),
            failures: None,
        });
        return (Change::Create(new.collect()), None);
    };
    let by_uid: BTreeMap<&str, &Arc<JobPod>> = pods.iter().map(|p| (p.uid.as_str(), p)).collect();
    let replaced = |ix: i32| {
        m.delayed
            .get(&ix)
            .and_then(|uid| by_uid.get(uid.as_str()))
            .map(|p| p.as_ref())
    };
    let mut ready = Vec::new();
    let mut wait: Option<Duration> = None;
    for ix in indexes {
        let before = replaced(ix);
        let left = backoff::remaining_for_index(before, now);
        if left.is_zero() {
            ready.push(NewPod {
                index: Some(ix),
                failures: Some(indexes::failure_counts(job, before)),
            });
        } else {
            wait = sooner(wait, left);
        }
    }
    if ready.is_empty() {
        return (Change::None, wait);
    }
    (Change::Create(ready), None)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(super) mod tests;
