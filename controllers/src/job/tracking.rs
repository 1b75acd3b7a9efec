//! Counting finished pods exactly once (upstream `trackJobStatusAndRemoveFinalizers`), in three
//! steps a pass applies in order:
//! 1. [`settle`]: the counts after the pass's pod changes, completion, the `Suspended`
//!    condition (events `Suspended` / `Resumed`, and `startTime` reset on resume);
//! 2. [`track`]: the status to write *before* any finalizer is removed: each finished, tracked
//!    pod's UID goes into `status.uncountedTerminatedPods` (an Indexed Job's successes straight
//!    into `completedIndexes`), the interim `FailureTarget` / `SuccessCriteriaMet` condition is
//!    added; and which pods lose the tracking finalizer;
//! 3. [`finish`]: once the finalizers are off, the UIDs without one move from the uncounted
//!    lists into `succeeded` / `failed`, and the terminal condition is added when no pod is
//!    left uncounted or terminating.
//!
//! A crash between any two writes loses nothing and counts nothing twice: a UID is counted only
//! once its pod's finalizer is gone (or the pod is), and a pod without the finalizer that is
//! not listed as uncounted was counted already.
//!
//! Planner: pure, no I/O.

use super::conditions::{self, COMPLETIONS_REACHED, SUCCESS_CRITERIA_MET, SUSPENDED};
use super::failure_policy;
use super::plan::{Change, Finish, Manage, uncounted};
use super::view::{Job, JobPod, is_failed};
use crate::workload::event_type;
use berth_registry::events::EventType;
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use jiff::Timestamp;
use std::collections::BTreeSet;
use std::sync::Arc;

/// At most this many pods are added to the uncounted lists per pass (upstream
/// `MaxUncountedPods`), keeping the status small.
pub const MAX_UNCOUNTED: usize = 500;

/// What the pass's pod changes achieved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Pods deleted (terminated or removed), and how many of them were ready.
    pub deleted: i32,
    pub deleted_ready: i32,
    /// Pods created.
    pub created: i32,
}

impl Applied {
    /// `n` pods created.
    pub fn of_created(n: usize) -> Applied {
        Applied {
            created: count(n),
            ..Applied::default()
        }
    }

    /// The pods `deleted` (terminated or removed).
    pub fn of_deleted<'a>(deleted: impl IntoIterator<Item = &'a Arc<JobPod>>) -> Applied {
        let (mut all, mut ready) = (0, 0);
        for p in deleted {
            all += 1;
            ready += usize::from(p.ready);
        }
        Applied {
            deleted: count(all),
            deleted_ready: count(ready),
            created: 0,
        }
    }
}

/// A count of pods as the status holds it.
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A Kubernetes Event the pass records about the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

impl Event {
    /// The event's type.
    pub fn event_type(&self) -> EventType {
        event_type(self.warning)
    }

    fn normal(reason: &str, message: &str) -> Event {
        Event {
            warning: false,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The Job's state after the pass's pod changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The status with the counts of active, ready and terminating pods, `startTime` and the
    /// `Suspended` condition; the tracking fields as read.
    pub status: batch::JobStatus,
    pub finish: Option<Finish>,
    pub terminating: i32,
    pub events: Vec<Event>,
}

/// Step 1 (the end of upstream `syncJob`).
pub fn settle(job: &Job, m: &Manage, applied: Applied, now: Timestamp) -> Settled {
    let mut status = job.status.clone();
    let (mut active, mut ready, mut terminating) = (m.active, m.ready, m.terminating);
    let mut finish = m.finish.clone();
    let mut events = Vec::new();
    status.start_time = m.start_time.clone();
    match &m.change {
        Change::Terminate(_) => {
            // Every active pod must be going before the Job may be declared finished.
            if applied.deleted != active {
                finish = None;
            }
        }
        Change::Create(_) => active += applied.created,
        Change::Remove(_) | Change::None => {}
    }
    if matches!(m.change, Change::Terminate(_) | Change::Remove(_)) {
        active -= applied.deleted;
        terminating += applied.deleted;
        ready -= applied.deleted_ready;
    }
    if m.finish.is_none() {
        let complete = match job.completions() {
            None => m.succeeded > 0 && active == 0,
            Some(c) => m.succeeded >= c && active == 0,
        };
        let list = status.conditions.get_or_insert_with(Vec::new);
        if complete {
            let msg = "Reached expected number of succeeded pods";
            let c = conditions::new_condition(
                SUCCESS_CRITERIA_MET,
                "True",
                COMPLETIONS_REACHED,
                msg,
                now,
            );
            finish = Some(Finish {
                terminal: conditions::terminal_for(&c, now),
                interim: Some(c),
            });
        } else if m.managed && job.suspended() {
            if conditions::ensure(
                list,
                SUSPENDED,
                "True",
                "JobSuspended",
                "Job suspended",
                now,
            ) {
                events.push(Event::normal("Suspended", "Job suspended"));
            }
        } else if m.managed
            && conditions::ensure(list, SUSPENDED, "False", "JobResumed", "Job resumed", now)
        {
            events.push(Event::normal("Resumed", "Job resumed"));
            // The active deadline counts from the resumption.
            status.start_time = Some(conditions::stamp(now));
        }
        if list.is_empty() {
            status.conditions = None;
        }
    }
    status.active = (active > 0).then_some(active);
    status.ready = Some(ready.max(0));
    status.terminating = Some(terminating.max(0));
    status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    Settled {
        status,
        finish,
        terminating,
        events,
    }
}

/// Step 2's result: the status to write first, and the pods to untrack after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracking {
    pub status: batch::JobStatus,
    pub remove: Vec<Arc<JobPod>>,
    /// UIDs of the pods that carry the finalizer (before the removals).
    pub with_finalizer: BTreeSet<String>,
    /// The terminal condition to add once nothing is left.
    pub terminal: Option<batch::JobCondition>,
    pub terminating: i32,
    /// The uncounted lists are full: the Job is not declared finished this pass.
    pub capped: bool,
}

/// Upstream `canRemoveFinalizer`.
fn can_untrack(job: &Job, s: &Settled, m: &Manage, pod: &JobPod, failed: bool) -> bool {
    if job.deleting || s.finish.is_some() || pod.succeeded() {
        return true;
    }
    if !failed {
        return false;
    }
    // With a per-index limit the last failure of an index waits for its replacement, which
    // takes over its failure count.
    !(job.per_index_limit().is_some()
        && pod
            .index
            .is_some_and(|ix| m.delayed.get(&ix) == Some(&pod.uid)))
}

/// Step 2.
pub fn track(job: &Job, pods: &[Arc<JobPod>], m: &Manage, s: Settled) -> Tracking {
    let (was_succeeded, was_failed) = uncounted(&job.status);
    let with_finalizer: BTreeSet<String> = pods
        .iter()
        .filter(|p| p.finalizer)
        .map(|p| p.uid.clone())
        .collect();
    let mut status = s.status.clone();
    count_untracked(&mut status, &with_finalizer);
    let (mut unc_succeeded, mut unc_failed) = lists(&status);
    let completions = job.index_count();
    let policy = job.spec.pod_failure_policy.as_ref();
    let failing_job = s.finish.as_ref().is_some_and(|f| !f.success());
    let mut ordered: Vec<&Arc<JobPod>> = pods.iter().collect();
    if job.indexed() {
        ordered.sort_by_key(|p| p.index.unwrap_or(-1));
    }
    let mut remove = Vec::new();
    let mut new_indexes = Vec::new();
    let mut capped = false;
    for pod in ordered {
        if !pod.finalizer {
            continue;
        }
        let failed = is_failed(pod, job);
        if !can_untrack(job, &s, m, pod, failed) {
            continue;
        }
        remove.push(pod.clone());
        if pod.succeeded() && !was_failed.contains(&pod.uid) {
            if job.indexed() {
                if let Some(ix) = pod.valid_index(completions)
                    && !m.prev_succeeded_indexes.has(ix)
                {
                    new_indexes.push(ix);
                }
            } else if !was_succeeded.contains(&pod.uid) && !unc_succeeded.contains(&pod.uid) {
                unc_succeeded.push(pod.uid.clone());
            }
        } else if (failed || failing_job)
            && !was_failed.contains(&pod.uid)
            && !unc_failed.contains(&pod.uid)
            && (!job.indexed() || pod.valid_index(completions).is_some())
            && failure_policy::judge(policy, pod).counts
        {
            unc_failed.push(pod.uid.clone());
        }
        if new_indexes.len() + unc_succeeded.len() + unc_failed.len() >= MAX_UNCOUNTED {
            capped = true;
            break;
        }
    }
    set_lists(&mut status, unc_succeeded, unc_failed);
    if job.indexed() {
        new_indexes.sort_unstable();
        let done = m.succeeded_indexes.with_sorted(new_indexes);
        status.succeeded = (done.total() > 0).then(|| done.total());
        status.completed_indexes = (!done.is_empty()).then(|| done.to_string());
        if let Some(f) = &m.failed_indexes {
            status.failed_indexes = Some(f.to_string());
        }
    }
    let mut terminal = None;
    if let Some(f) = &s.finish {
        if let Some(interim) = &f.interim {
            let list = status.conditions.get_or_insert_with(Vec::new);
            if !list
                .iter()
                .any(|c| c.type_ == interim.type_ && c.status == "True")
            {
                list.push(interim.clone());
            }
        }
        terminal = Some(f.terminal.clone());
    }
    Tracking {
        status,
        remove,
        with_finalizer,
        terminal,
        terminating: s.terminating,
        capped,
    }
}

fn lists(status: &batch::JobStatus) -> (Vec<String>, Vec<String>) {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default(),
        u.failed.unwrap_or_default(),
    )
}

fn set_lists(status: &mut batch::JobStatus, succeeded: Vec<String>, failed: Vec<String>) {
    status.uncounted_terminated_pods = Some(batch::UncountedTerminatedPods {
        succeeded: (!succeeded.is_empty()).then_some(succeeded),
        failed: (!failed.is_empty()).then_some(failed),
    });
}

/// Upstream `cleanUncountedPodsWithoutFinalizers`: uncounted UIDs whose pod no longer carries
/// the finalizer (or is gone) are counted.
pub fn count_untracked(status: &mut batch::JobStatus, with_finalizer: &BTreeSet<String>) {
    let (succeeded, failed) = lists(status);
    let (keep_s, done_s): (Vec<String>, Vec<String>) = succeeded
        .into_iter()
        .partition(|u| with_finalizer.contains(u));
    let (keep_f, done_f): (Vec<String>, Vec<String>) =
        failed.into_iter().partition(|u| with_finalizer.contains(u));
    let add = |n: Option<i32>, k: usize| {
        let total = n.unwrap_or(0) + i32::try_from(k).unwrap_or(i32::MAX);
        (total > 0).then_some(total)
    };
    status.succeeded = add(status.succeeded, done_s.len());
    status.failed = add(status.failed, done_f.len());
    set_lists(status, keep_s, keep_f);
}

/// Step 3: the status once the finalizers of `removed` are off, and the events of a Job that
/// finished.
pub fn finish(
    job: &Job,
    t: &Tracking,
    removed: &BTreeSet<String>,
    now: Timestamp,
) -> (batch::JobStatus, Vec<Event>) {
    let mut status = t.status.clone();
    let left: BTreeSet<String> = t.with_finalizer.difference(removed).cloned().collect();
    count_untracked(&mut status, &left);
    let mut events = Vec::new();
    if let Some(terminal) = &t.terminal
        && !t.capped
        && conditions::enact(&mut status, terminal, t.terminating, now)
    {
        if terminal.type_ == conditions::COMPLETE {
            if job
                .completions()
                .is_some_and(|c| status.succeeded.unwrap_or(0) > c)
            {
                events.push(Event {
                    warning: true,
                    reason: "TooManySucceededPods".into(),
                    message: "Too many succeeded pods running after completion count reached"
                        .into(),
                });
            }
            events.push(Event::normal("Completed", "Job completed"));
        } else {
            events.push(Event {
                warning: true,
                reason: terminal.reason.clone().unwrap_or_default(),
                message: terminal.message.clone().unwrap_or_default(),
            });
        }
    }
    (status, events)
}

#[cfg(test)]
#[path = "tracking_tests.rs"]
mod tests;
