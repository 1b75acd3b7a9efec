//! When a pod must leave a node for its `NoExecute` taints (upstream's taint manager,
//! `processPodOnNode` with `GetMatchingTolerations` and `getMinTolerationTime`): a taint no
//! toleration tolerates → at once; otherwise each taint is tolerated by the pod's first
//! toleration that matches it, for that toleration's `tolerationSeconds` (none: for ever; zero
//! or less: not at all), counted from when the taint was added or the pod was bound there,
//! whichever is later; the pod goes when the first of those runs out.
//!
//! Worked example: `unreachable:NoExecute` added at 10:00:00; the pod tolerates it for 20 s
//! and `not-ready` for 300 s → it goes at 10:00:20. A pod bound at 10:00:05 under the same
//! taint and toleration goes at 10:00:25.
//!
//! Planner: pure, no I/O.

use berth_shared::scheduling::{Taint, Toleration};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// A `NoExecute` taint and when it was put on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoExecute {
    pub taint: Taint,
    /// `timeAdded`, or when the controller first saw the taint.
    pub since: Timestamp,
}

/// A pod toleration with its `tolerationSeconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tolerating {
    pub toleration: Toleration,
    pub seconds: Option<i64>,
}

/// What happens to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It may stay (no taint, or every taint tolerated for ever).
    Keep,
    /// It goes now.
    EvictNow,
    /// It goes at that time unless the taints or tolerations change.
    EvictAt(Timestamp),
}

impl Verdict {
    /// How long until the eviction, for a requeue.
    pub fn wait(self, now: Timestamp) -> Option<Duration> {
        match self {
            Verdict::EvictAt(t) => now
                .until(t)
                .ok()
                .and_then(|s| Duration::try_from(s).ok())
                .map(|d| d + Duration::from_millis(1)),
            _ => None,
        }
    }
}

/// The verdict on a pod bound at `bound` (if known) with `tolerations`, under `taints`.
pub fn verdict(
    taints: &[NoExecute],
    tolerations: &[Tolerating],
    bound: Option<Timestamp>,
    now: Timestamp,
) -> Verdict {
    let mut first: Option<Timestamp> = None;
    for t in taints {
        let Some(used) = tolerations
            .iter()
            .find(|x| x.toleration.tolerates(&t.taint))
        else {
            return Verdict::EvictNow;
        };
        let Some(seconds) = used.seconds else {
            continue;
        };
        if seconds <= 0 {
            return Verdict::EvictNow;
        }
        let start = bound.map_or(t.since, |b| b.max(t.since));
        let at = start
            .checked_add(SignedDuration::from_secs(seconds))
            .unwrap_or(Timestamp::MAX);
        first = Some(first.map_or(at, |f| f.min(at)));
    }
    match first {
        None => Verdict::Keep,
        Some(at) if at <= now => Verdict::EvictNow,
        Some(at) => Verdict::EvictAt(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::k8s_openapi::api::core::v1 as core;
    use berth_shared::scheduling::TaintEffect;

    use crate::test_time::at;

    fn taint(key: &str, since: i64) -> NoExecute {
        NoExecute {
            taint: Taint::new(key, "", TaintEffect::NoExecute),
            since: at(since),
        }
    }

    fn tol(key: &str, seconds: Option<i64>) -> Tolerating {
        Tolerating {
            toleration: Toleration::from_k8s(&core::Toleration {
                key: (!key.is_empty()).then(|| key.to_string()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                ..Default::default()
            }),
            seconds,
        }
    }

    const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    const NOT_READY: &str = "node.kubernetes.io/not-ready";

    #[test]
    fn pods_leave_when_their_toleration_of_a_no_execute_taint_runs_out() {
        let admission = vec![tol(NOT_READY, Some(300)), tol(UNREACHABLE, Some(300))];
        type Case = (
            &'static str,
            Vec<NoExecute>,
            Vec<Tolerating>,
            Option<i64>,
            i64,
            Verdict,
        );
        let cases: Vec<Case> = vec![
            (
                "no taint: the pod stays",
                vec![],
                admission.clone(),
                None,
                0,
                Verdict::Keep,
            ),
            (
                "an untolerated taint: at once",
                vec![taint("dedicated", 0)],
                admission.clone(),
                None,
                0,
                Verdict::EvictNow,
            ),
            (
                "admission's 300 s: 300 s after the taint",
                vec![taint(UNREACHABLE, 0)],
                admission.clone(),
                None,
                60,
                Verdict::EvictAt(at(300)),
            ),
            (
                "a toleration of 20 s: 20 s after the taint",
                vec![taint(UNREACHABLE, 0)],
                vec![tol(UNREACHABLE, Some(20))],
                None,
                5,
                Verdict::EvictAt(at(20)),
            ),
            (
                "the time has come",
                vec![taint(UNREACHABLE, 0)],
                vec![tol(UNREACHABLE, Some(20))],
                None,
                20,
                Verdict::EvictNow,
            ),
            (
                "a pod bound after the taint counts from its binding",
                vec![taint(UNREACHABLE, 0)],
                vec![tol(UNREACHABLE, Some(20))],
                Some(5),
                21,
                Verdict::EvictAt(at(25)),
            ),
            (
                "tolerated for ever (daemon pods): the pod stays",
                vec![taint(UNREACHABLE, 0), taint(NOT_READY, 0)],
                vec![tol(NOT_READY, None), tol(UNREACHABLE, None)],
                None,
                10_000,
                Verdict::Keep,
            ),
            (
                "the first toleration matching a taint is the one used",
                vec![taint(UNREACHABLE, 0)],
                vec![tol(UNREACHABLE, Some(20)), tol("", None)],
                None,
                0,
                Verdict::EvictAt(at(20)),
            ),
            (
                "the shortest of several taints' tolerations wins",
                vec![taint(NOT_READY, 0), taint("maintenance", 10)],
                vec![tol(NOT_READY, Some(300)), tol("maintenance", Some(30))],
                None,
                0,
                Verdict::EvictAt(at(40)),
            ),
            (
                "one taint tolerated for ever does not save the pod from another",
                vec![taint(NOT_READY, 0), taint("dedicated", 0)],
                vec![tol(NOT_READY, None)],
                None,
                0,
                Verdict::EvictNow,
            ),
            (
                "zero seconds: at once",
                vec![taint(UNREACHABLE, 0)],
                vec![tol(UNREACHABLE, Some(0))],
                None,
                0,
                Verdict::EvictNow,
            ),
        ];
        for (name, taints, tolerations, bound, now, want) in cases {
            assert_eq!(
                verdict(&taints, &tolerations, bound.map(at), at(now)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn the_wait_ends_just_after_the_eviction_time() {
        assert_eq!(
            Verdict::EvictAt(at(20)).wait(at(5)),
            Some(Duration::from_millis(15_001))
        );
        assert_eq!(Verdict::Keep.wait(at(5)), None);
    }
}
