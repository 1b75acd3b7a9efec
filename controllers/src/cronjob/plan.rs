//! Planner: pure, no I/O.
//!
//! One pass over a CronJob (upstream `syncCronJob` with `cleanupFinishedJobs` before it):
//! trim the finished Jobs to the history limits, fold finished and vanished Jobs out of
//! `status.active` (events `SawCompletedJob`, `MissingJob`, and `UnexpectedJob` for a running
//! Job it did not start), then, unless the CronJob is being deleted or suspended or its
//! schedule is unusable, decide on the scheduled time that is due ([`missed::due`]): apply the
//! concurrency policy (Forbid skips with `JobAlreadyActive`, Replace deletes the running Jobs)
//! and create the Job. The plan is the ordered actions, the status to write, and when to wake:
//! just after the next scheduled time, not on a poll.

use super::missed::{self, Due};
use super::template::job_name;
use super::view::{Concurrency, CronJob, Finished, Job, Status};
use berth_registry::events::EventType;
use berth_shared::cron::Schedule;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::collections::BTreeSet;
use std::time::Duration;

/// Why a Job is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`.
    History,
    /// Still running at the next scheduled time with `concurrencyPolicy: Replace`.
    Replace,
}

/// One step of a pass, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Event {
        kind: EventType,
        reason: &'static str,
        message: String,
    },
    /// Delete a Job (background propagation); `SuccessfulDelete` on success.
    DeleteJob {
        name: String,
        uid: String,
        why: Deletion,
    },
    /// Create the Job for a scheduled time; on success it joins `status.active` and the time
    /// becomes `lastScheduleTime` (`SuccessfulCreate`).
    CreateJob { scheduled: Timestamp },
}

/// A pass's decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// The status to write (before any created Job is added to it).
    pub status: Status,
    pub requeue_after: Option<Duration>,
}

/// Why the schedule cannot be evaluated (found while reading it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleProblem {
    /// `spec.timeZone` is not in the time zone database.
    UnknownTimeZone(String),
    /// The schedule does not parse.
    Unparseable(String),
}

/// The schedule in its zone, as upstream reads it: `spec.timeZone` unless the schedule
/// carries its own `TZ=` prefix, else the controller's `local` zone; or why it cannot be used.
/// `load` finds a zone by name (in the time zone database: I/O, so it is passed in).
pub fn schedule<E: std::fmt::Display>(
    cj: &CronJob,
    local: &TimeZone,
    load: impl FnOnce(&str) -> Result<TimeZone, E>,
) -> Result<Schedule, ScheduleProblem> {
    let zone = match (&cj.time_zone, Schedule::has_zone_prefix(&cj.schedule)) {
        (Some(tz), false) => {
            load(tz).map_err(|e| ScheduleProblem::UnknownTimeZone(e.to_string()))?
        }
        _ => local.clone(),
    };
    Schedule::parse(&cj.schedule)
        .map(|s| s.with_default_zone(zone))
        .map_err(|e| ScheduleProblem::Unparseable(e.to_string()))
}

/// What a pass reads.
pub struct Input<'a> {
    pub cron_job: &'a CronJob,
    /// The Jobs the CronJob controls.
    pub jobs: &'a [Job],
    /// Uids in `status.active` confirmed gone from the API (not just from the cache).
    pub gone: &'a BTreeSet<String>,
    pub schedule: Result<&'a Schedule, ScheduleProblem>,
}

fn event(kind: EventType, reason: &'static str, message: String) -> Action {
    Action::Event {
        kind,
        reason,
        message,
    }
}

/// Upstream's `time.RFC1123Z` of a UTC time: `Mon, 02 Jan 2006 15:04:05 +0000`.
fn rfc1123z(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

pub fn plan(input: Input<'_>, now: Timestamp) -> Plan {
    let cj = input.cron_job;
    let mut actions = Vec::new();
    let mut status = cj.status.clone();
    cleanup_history(cj, input.jobs, &mut status, &mut actions);
    fold_finished(input.jobs, input.gone, &mut status, &mut actions);
    let done = |actions, status| Plan {
        actions,
        status,
        requeue_after: None,
    };
    if cj.deleting || cj.suspend {
        return done(actions, status);
    }
    let schedule = match input.schedule {
        Ok(s) => s,
        Err(ScheduleProblem::UnknownTimeZone(e)) => {
            let tz = cj.time_zone.clone().unwrap_or_default();
            let msg = format!("invalid timeZone: {tz:?}: {e}");
            actions.push(event(EventType::Warning, "UnknownTimeZone", msg));
            return done(actions, status);
        }
        Err(ScheduleProblem::Unparseable(e)) => {
            let msg = format!("unparseable schedule: {:?} : {e}", cj.schedule);
            actions.push(event(EventType::Warning, "UnparseableSchedule", msg));
            return done(actions, status);
        }
    };
    if cj.schedule.contains("TZ") {
        let msg = format!(
            "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            cj.schedule
        );
        actions.push(event(EventType::Warning, "UnsupportedSchedule", msg));
    }
    let wake = missed::wake_after(schedule, now);
    let earliest = cj.status.last_schedule_time.unwrap_or(cj.created);
    let scheduled = match missed::due(schedule, earliest, cj.starting_deadline_seconds, now) {
        Due::Run(t) => t,
        Due::Nothing => {
            return Plan {
                actions,
                status,
                requeue_after: wake,
            };
        }
        Due::Never => {
            let msg = format!(
                "invalid schedule: {} : time difference between two schedules is less than 1 second",
                cj.schedule
            );
            actions.push(event(EventType::Warning, "InvalidSchedule", msg));
            return done(actions, status);
        }
        Due::TooLate(t) => {
            let msg = format!("Missed scheduled time to start a job: {}", rfc1123z(t));
            actions.push(event(EventType::Warning, "MissSchedule", msg));
            return Plan {
                actions,
                status,
                requeue_after: wake,
            };
        }
        Due::TooMany => {
            let msg = "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew";
            actions.push(event(
                EventType::Warning,
                "TooManyMissedTimes",
                msg.to_string(),
            ));
            return Plan {
                actions,
                status,
                requeue_after: wake,
            };
        }
    };
    let name = job_name(&cj.name, scheduled);
    let processed = status.active.iter().any(|r| r.name == name)
        || status.last_schedule_time == Some(scheduled);
    if !processed {
        match cj.concurrency {
            Concurrency::Forbid if !status.active.is_empty() => {
                let msg = "Not starting job because prior execution is running and concurrency policy is Forbid";
                actions.push(event(
                    EventType::Normal,
                    "JobAlreadyActive",
                    msg.to_string(),
                ));
            }
            policy => {
                if policy == Concurrency::Replace {
                    for r in std::mem::take(&mut status.active) {
                        actions.push(Action::DeleteJob {
                            name: r.name,
                            uid: r.uid,
                            why: Deletion::Replace,
                        });
                    }
                }
                actions.push(Action::CreateJob { scheduled });
            }
        }
    }
    Plan {
        actions,
        status,
        requeue_after: wake,
    }
}

/// Deletes the oldest finished Jobs beyond the history limits (upstream orders by start time,
/// Jobs without one last, then by name) and drops them from `status.active`.
fn cleanup_history(cj: &CronJob, jobs: &[Job], status: &mut Status, actions: &mut Vec<Action>) {
    for (finished, limit) in [
        (Finished::Complete, cj.successful_jobs_history_limit),
        (Finished::Failed, cj.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else { continue };
        let mut done: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.finished == Some(finished) && !j.deleting)
            .collect();
        let keep = usize::try_from(limit).unwrap_or(0);
        if done.len() <= keep {
            continue;
        }
        done.sort_by(|a, b| match (a.start_time, b.start_time) {
            (Some(x), Some(y)) if x != y => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            _ => a.name.cmp(&b.name),
        });
        let excess = done.len() - keep;
        for j in done.into_iter().take(excess) {
            status.active.retain(|r| r.uid != j.uid);
            actions.push(Action::DeleteJob {
                name: j.name.clone(),
                uid: j.uid.clone(),
                why: Deletion::History,
            });
        }
    }
}

/// Folds the Jobs' states into `status`: finished Jobs leave `active` (`SawCompletedJob`),
/// the latest completion of a successful one is `lastSuccessfulTime`, Jobs gone from the API
/// leave `active` (`MissingJob`), and a running Job not in `active` is reported
/// (`UnexpectedJob`; `kubectl create job --from=cronjob/…` makes such Jobs).
fn fold_finished(
    jobs: &[Job],
    gone: &BTreeSet<String>,
    status: &mut Status,
    actions: &mut Vec<Action>,
) {
    for j in jobs {
        let found = status.active.iter().any(|r| r.uid == j.uid);
        match j.finished {
            None if !found && !j.deleting => actions.push(event(
                EventType::Warning,
                "UnexpectedJob",
                format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    j.name
                ),
            )),
            None => {}
            Some(how) => {
                if found {
                    status.active.retain(|r| r.uid != j.uid);
                    actions.push(event(
                        EventType::Normal,
                        "SawCompletedJob",
                        format!("Saw completed job: {}, condition: {}", j.name, how.as_str()),
                    ));
                }
                if how == Finished::Complete
                    && let Some(t) = j.completion_time
                    && status.last_successful_time.is_none_or(|last| t > last)
                {
                    status.last_successful_time = Some(t);
                }
            }
        }
    }
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.uid.as_str()).collect();
    let mut kept = Vec::new();
    for r in std::mem::take(&mut status.active) {
        if !known.contains(r.uid.as_str()) && gone.contains(&r.uid) {
            actions.push(event(
                EventType::Normal,
                "MissingJob",
                format!("Active job went missing: {}", r.name),
            ));
        } else {
            kept.push(r);
        }
    }
    status.active = kept;
}
