//! The delay before a failed Job pod is replaced (upstream `backoff_utils.go`): 10 s after the
//! first failure since the last success, doubling with each further one, capped at six
//! minutes (the seeds' cap; upstream's `MaxJobPodFailureBackOff` is ten, see D-04). Each pod's
//! finish time is the latest `finishedAt` of its containers (sidecars included), else when its
//! Ready condition turned False, else its deletion time less the grace period, else its
//! creation.
//!
//! Upstream keeps the failure count in memory, fed with each pod as it is counted; here it is
//! derived from the pods themselves on every pass (failed pods stay in the API), so a
//! restarted controller waits as long as the one before it would have.
//!
//! Worked example: pods fail at 12:00:00, 12:00:10 and 12:00:31 with no success between them:
//! three failures, so the next pod waits 10 s × 2² = 40 s from the last one, until 12:01:11; at
//! 12:00:50 the pass asks to run again in 21 s. A sixth failure would wait 320 s, a seventh the
//! cap, 360 s.
//!
//! Planner: pure, no I/O.

use super::view::{Job, JobPod, is_failed};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// The delay after the first failure.
pub const DEFAULT: Duration = Duration::from_secs(10);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(6 * 60);

/// Upstream `getFinishedTime`.
pub fn finish_time(pod: &JobPod) -> Timestamp {
    if let Some(t) = containers_finished(pod) {
        return t;
    }
    if let Some(t) = pod.unready_since {
        return t;
    }
    if let Some((at, grace)) = pod.deletion {
        return at - SignedDuration::from_secs(grace);
    }
    pod.created.unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The latest `finishedAt` when every regular container (and sidecar) terminated with one.
fn containers_finished(pod: &JobPod) -> Option<Timestamp> {
    let sidecars = pod
        .init_containers
        .iter()
        .filter(|c| pod.sidecars.contains(&c.name));
    let mut latest: Option<Timestamp> = None;
    for c in pod.containers.iter().chain(sidecars) {
        let at = c.terminated.and_then(|(_, at)| at)?;
        latest = Some(latest.map_or(at, |l| l.max(at)));
    }
    latest
}

/// Failures since the last success and when the latest of them happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub failures: u32,
    pub last_failure: Option<Timestamp>,
}

/// The Job's failures after its last success. A failed pod is one that failed (or, as
/// upstream counts it, is being deleted unfinished) and is still tracked or ended Failed; pods
/// the controller removed itself (finalizer dropped first) do not count.
pub fn record(job: &Job, pods: &[&JobPod]) -> Record {
    let last_success = pods
        .iter()
        .filter(|p| p.succeeded())
        .map(|p| finish_time(p))
        .max();
    let mut r = Record::default();
    for p in pods {
        if !is_failed(p, job) || !(p.finalizer || p.failed_phase()) {
            continue;
        }
        let at = finish_time(p);
        if last_success.is_some_and(|s| at <= s) {
            continue;
        }
        r.failures += 1;
        r.last_failure = Some(r.last_failure.map_or(at, |l| l.max(at)));
    }
    r
}

/// The delay `failures` failures ask for: 10 s doubled for each failure after the first, at
/// most [`MAX`].
pub fn delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let mut d = DEFAULT;
    for _ in 1..failures {
        d *= 2;
        if d >= MAX {
            return MAX;
        }
    }
    d
}

/// How long from `now` until a replacement may be created (upstream
/// `getRemainingTimeForFailuresCount`); zero when it may be now.
pub fn remaining(failures: u32, last_failure: Option<Timestamp>, now: Timestamp) -> Duration {
    let Some(last) = last_failure else {
        return Duration::ZERO;
    };
    let wait = delay(failures);
    let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or_default();
    wait.saturating_sub(elapsed)
}

/// How long until the index of `failed` (its latest failed pod) may get a new pod (upstream
/// `getRemainingTimePerIndex`): its failures so far are the pod's counts plus itself.
pub fn remaining_for_index(failed: Option<&JobPod>, now: Timestamp) -> Duration {
    let Some(p) = failed else {
        return Duration::ZERO;
    };
    let failures = u32::try_from(p.index_failures + p.index_ignored_failures + 1).unwrap_or(1);
    remaining(failures, Some(finish_time(p)), now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::view::ContainerEnd;
    use serde_json::json;

    fn t(s: &str) -> Timestamp {
        format!("2024-06-01T{s}Z").parse().unwrap()
    }

    fn job() -> Job {
        Job::from_value(&json!({"metadata": {"name": "j", "uid": "u"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}}))
        .unwrap()
    }

    fn ended(phase: &str, at: &str) -> JobPod {
        JobPod {
            phase: phase.into(),
            finalizer: true,
            containers: vec![ContainerEnd {
                name: "c".into(),
                terminated: Some((1, Some(t(at)))),
            }],
            ..JobPod::default()
        }
    }

    #[test]
    fn delays_double_from_ten_seconds_to_the_six_minute_cap() {
        let cases = [
            ("no failure waits nothing", 0, 0),
            ("the first failure waits 10 s", 1, 10),
            ("the second 20 s", 2, 20),
            ("the third 40 s", 3, 40),
            ("the sixth 320 s", 6, 320),
            ("the seventh reaches the cap", 7, 360),
            ("many more stay at the cap", 40, 360),
        ];
        for (name, failures, secs) in cases {
            assert_eq!(delay(failures), Duration::from_secs(secs), "{name}");
        }
    }

    #[test]
    fn the_wait_runs_from_the_last_failure() {
        let cases = [
            ("just failed", 1, "12:00:00", "12:00:00", 10),
            ("part of the wait passed", 3, "12:00:31", "12:00:50", 21),
            ("the wait is over", 2, "12:00:00", "12:00:25", 0),
            (
                "a clock behind the failure waits the whole delay",
                1,
                "12:00:05",
                "12:00:00",
                10,
            ),
        ];
        for (name, failures, last, now, secs) in cases {
            assert_eq!(
                remaining(failures, Some(t(last)), t(now)),
                Duration::from_secs(secs),
                "{name}"
            );
        }
        assert_eq!(remaining(3, None, t("12:00:00")), Duration::ZERO);
    }

    #[test]
    fn only_failures_after_the_last_success_count() {
        let j = job();
        let pods = [
            ended("Failed", "12:00:00"),
            ended("Succeeded", "12:00:05"),
            ended("Failed", "12:00:10"),
            ended("Failed", "12:00:31"),
        ];
        let refs: Vec<&JobPod> = pods.iter().collect();
        assert_eq!(
            record(&j, &refs),
            Record {
                failures: 2,
                last_failure: Some(t("12:00:31"))
            }
        );
        let mut removed = ended("Running", "12:00:40");
        removed.deleting = true;
        removed.finalizer = false;
        let refs: Vec<&JobPod> = pods.iter().chain([&removed]).collect();
        assert_eq!(
            record(&j, &refs).failures,
            2,
            "a pod the controller removed"
        );
    }

    #[test]
    fn finish_times_fall_back_from_containers_to_readiness_deletion_and_creation() {
        let mut p = ended("Failed", "12:00:04");
        assert_eq!(finish_time(&p), t("12:00:04"));
        p.containers.push(ContainerEnd {
            name: "still".into(),
            terminated: None,
        });
        p.unready_since = Some(t("12:00:06"));
        assert_eq!(finish_time(&p), t("12:00:06"), "a container still running");
        p.unready_since = None;
        p.deletion = Some((t("12:00:40"), 30));
        assert_eq!(finish_time(&p), t("12:00:10"));
        p.deletion = None;
        p.created = Some(t("11:59:00"));
        assert_eq!(finish_time(&p), t("11:59:00"));
    }

    #[test]
    fn an_index_waits_by_the_failures_its_last_pod_carries() {
        let mut p = ended("Failed", "12:00:00");
        p.index_failures = 1;
        assert_eq!(
            remaining_for_index(Some(&p), t("12:00:05")),
            Duration::from_secs(15)
        );
        assert_eq!(remaining_for_index(None, t("12:00:05")), Duration::ZERO);
    }
}
