//! The per-probe state machine (pure): when a probe is due, whether it may run, and how single
//! outcomes turn into a result through `successThreshold`/`failureThreshold`, as the kubelet's
//! probe worker does it.
//!
//! Planner: pure, no I/O.
//!
//! Starting values follow upstream: readiness starts as `Failure` (not ready until a probe
//! passes), liveness as `Success` (alive until proven otherwise), startup as `Unknown` (not
//! started until a probe passes). Liveness and readiness do not run until the container has
//! started (its startup probe succeeded, or it has none); the startup probe stops once it has
//! succeeded. After a liveness or startup failure the probe holds until the next attempt.

use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::Probe;
use jiff::Timestamp;

use crate::pod::model::{after, elapsed, seconds};

/// A probe's result (also what a single diagnostic returns; `Unknown` = the diagnostic itself
/// failed, so no action is taken).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProbeResult {
    #[default]
    Unknown,
    Success,
    Failure,
}

impl ProbeResult {
    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// The result before any probe has decided.
    pub fn initial(self) -> ProbeResult {
        match self {
            Self::Readiness => ProbeResult::Failure,
            Self::Liveness => ProbeResult::Success,
            Self::Startup => ProbeResult::Unknown,
        }
    }

    /// As events spell it: `Liveness probe failed: …`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Startup => "Startup",
            Self::Liveness => "Liveness",
            Self::Readiness => "Readiness",
        }
    }
}

/// A probe's timing and thresholds with the API defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeTiming {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// `terminationGracePeriodSeconds` on the probe: the grace for a kill it causes.
    pub termination_grace: Option<Duration>,
}

impl ProbeTiming {
    /// Defaults: initialDelaySeconds 0, periodSeconds 10, timeoutSeconds 1, successThreshold 1,
    /// failureThreshold 3. Values below 1 (which validation rejects) count as the default.
    pub fn of(probe: &Probe) -> Self {
        let positive = |v: Option<i32>, default: i32| v.filter(|v| *v >= 1).unwrap_or(default);
        Self {
            initial_delay: seconds(probe.initial_delay_seconds.unwrap_or(0).into()),
            period: seconds(positive(probe.period_seconds, 10).into()),
            timeout: seconds(positive(probe.timeout_seconds, 1).into()),
            success_threshold: positive(probe.success_threshold, 1).unsigned_abs(),
            failure_threshold: positive(probe.failure_threshold, 3).unsigned_abs(),
            termination_grace: probe.termination_grace_period_seconds.map(seconds),
        }
    }
}

/// What the prober knows about the container when a probe comes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeGate {
    /// When the current attempt entered Running; `None` if it is not running.
    pub running_since: Option<Timestamp>,
    /// Whether the container has started (startup probe succeeded or absent).
    pub started: bool,
    /// Whether the pod is being deleted.
    pub deleting: bool,
}

/// What to do when a probe comes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Run the diagnostic now and [`ProbeState::record`] its outcome.
    Probe,
    /// Not now; look again at [`ProbeState::next_due`].
    Skip,
    /// This probe is finished for this attempt (liveness/startup of a deleted pod).
    Stop,
}

/// One probe of one container attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeState {
    kind: ProbeKind,
    timing: ProbeTiming,
    result: ProbeResult,
    last_outcome: ProbeResult,
    run: u32,
    on_hold: bool,
    last_probe: Option<Timestamp>,
}

impl ProbeState {
    pub fn new(kind: ProbeKind, timing: ProbeTiming) -> Self {
        Self {
            kind,
            timing,
            result: kind.initial(),
            last_outcome: ProbeResult::Unknown,
            run: 0,
            on_hold: false,
            last_probe: None,
        }
    }

    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    pub fn timing(&self) -> ProbeTiming {
        self.timing
    }

    /// The current result.
    pub fn result(&self) -> ProbeResult {
        self.result
    }

    /// When to look next: the end of the initial delay for the first probe, then one period
    /// after the previous probe.
    pub fn next_due(&self, running_since: Timestamp) -> Timestamp {
        match self.last_probe {
            None => after(running_since, self.timing.initial_delay),
            Some(last) => after(last, self.timing.period),
        }
    }

    /// Decides whether to probe now; may change the result when the container is not running
    /// (→ `Failure`) or the pod is being deleted (liveness/startup → `Success`, quietly).
    pub fn gate(&mut self, gate: ProbeGate, now: Timestamp) -> Due {
        let Some(since) = gate.running_since else {
            self.result = ProbeResult::Failure;
            return Due::Skip;
        };
        if gate.deleting && self.kind != ProbeKind::Readiness {
            self.result = ProbeResult::Success;
            return Due::Stop;
        }
        if self.on_hold || elapsed(since, now) < self.timing.initial_delay {
            return Due::Skip;
        }
        let is_startup = self.kind == ProbeKind::Startup;
        if gate.started == is_startup {
            // Startup probing ends once started; the others wait for it.
            return Due::Skip;
        }
        Due::Probe
    }

    /// Records one diagnostic's outcome at `now`; returns the new result when it changed.
    /// `Unknown` outcomes are thrown away. A result changes only after `failureThreshold`
    /// consecutive failures or `successThreshold` consecutive successes.
    pub fn record(&mut self, outcome: ProbeResult, now: Timestamp) -> Option<ProbeResult> {
        self.last_probe = Some(now);
        if outcome == ProbeResult::Unknown {
            return None;
        }
        if self.last_outcome == outcome {
            self.run = self.run.saturating_add(1);
        } else {
            self.last_outcome = outcome;
            self.run = 1;
        }
        let threshold = match outcome {
            ProbeResult::Failure => self.timing.failure_threshold,
            _ => self.timing.success_threshold,
        };
        if self.run < threshold {
            return None;
        }
        let changed = self.result != outcome;
        self.result = outcome;
        if outcome == ProbeResult::Failure && self.kind != ProbeKind::Readiness {
            // The container will be killed; stop probing until there is a new attempt.
            self.on_hold = true;
            self.run = 0;
        }
        changed.then_some(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProbeResult::{Failure, Success};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn timing(initial: i32, period: i32, success: i32, failure: i32) -> ProbeTiming {
        ProbeTiming::of(&Probe {
            initial_delay_seconds: Some(initial),
            period_seconds: Some(period),
            success_threshold: Some(success),
            failure_threshold: Some(failure),
            ..Probe::default()
        })
    }

    fn running(started: bool) -> ProbeGate {
        ProbeGate {
            running_since: Some(t(0)),
            started,
            deleting: false,
        }
    }

    #[test]
    fn defaults_are_period_ten_timeout_one_thresholds_one_and_three() {
        let d = ProbeTiming::of(&Probe::default());
        assert_eq!(d.initial_delay, Duration::ZERO);
        assert_eq!(d.period, Duration::from_secs(10));
        assert_eq!(d.timeout, Duration::from_secs(1));
        assert_eq!((d.success_threshold, d.failure_threshold), (1, 3));
        assert_eq!(d.termination_grace, None);
    }

    #[test]
    fn readiness_starts_failed_liveness_succeeded_startup_unknown() {
        let cases = [
            (ProbeKind::Readiness, Failure),
            (ProbeKind::Liveness, Success),
            (ProbeKind::Startup, ProbeResult::Unknown),
        ];
        for (kind, want) in cases {
            assert_eq!(
                ProbeState::new(kind, timing(0, 10, 1, 3)).result(),
                want,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn no_probe_before_the_initial_delay() {
        let mut p = ProbeState::new(ProbeKind::Readiness, timing(15, 10, 1, 3));
        assert_eq!(p.next_due(t(0)), t(15));
        assert_eq!(p.gate(running(true), t(14)), Due::Skip);
        assert_eq!(p.gate(running(true), t(15)), Due::Probe);
    }

    #[test]
    fn next_probe_is_one_period_after_the_last() {
        let mut p = ProbeState::new(ProbeKind::Liveness, timing(0, 7, 1, 3));
        p.record(Success, t(3));
        assert_eq!(p.next_due(t(0)), t(10));
    }

    #[test]
    fn liveness_and_readiness_wait_for_startup_and_startup_stops_after_it() {
        let mut live = ProbeState::new(ProbeKind::Liveness, timing(0, 10, 1, 3));
        let mut startup = ProbeState::new(ProbeKind::Startup, timing(0, 10, 1, 3));
        assert_eq!(live.gate(running(false), t(1)), Due::Skip);
        assert_eq!(startup.gate(running(false), t(1)), Due::Probe);
        assert_eq!(live.gate(running(true), t(1)), Due::Probe);
        assert_eq!(startup.gate(running(true), t(1)), Due::Skip);
    }

    #[test]
    fn failure_threshold_consecutive_failures_flip_liveness() {
        let mut p = ProbeState::new(ProbeKind::Liveness, timing(0, 10, 1, 3));
        assert_eq!(p.record(Failure, t(0)), None);
        assert_eq!(p.record(Failure, t(10)), None);
        assert_eq!(p.record(Success, t(20)), None, "a success breaks the run");
        assert_eq!(p.record(Failure, t(30)), None);
        assert_eq!(p.record(Failure, t(40)), None);
        assert_eq!(p.record(Failure, t(50)), Some(Failure));
    }

    #[test]
    fn success_threshold_consecutive_successes_make_ready() {
        let mut p = ProbeState::new(ProbeKind::Readiness, timing(0, 10, 2, 3));
        assert_eq!(p.record(Success, t(0)), None);
        assert_eq!(p.record(Success, t(10)), Some(Success));
        assert_eq!(p.result(), Success);
    }

    #[test]
    fn readiness_failure_keeps_probing_so_it_can_recover() {
        let mut p = ProbeState::new(ProbeKind::Readiness, timing(0, 10, 1, 1));
        p.record(Success, t(0));
        assert_eq!(p.record(Failure, t(10)), Some(Failure));
        assert_eq!(p.gate(running(true), t(20)), Due::Probe);
        assert_eq!(p.record(Success, t(20)), Some(Success));
    }

    #[test]
    fn liveness_failure_holds_probing_until_the_next_attempt() {
        let mut p = ProbeState::new(ProbeKind::Liveness, timing(0, 10, 1, 1));
        assert_eq!(p.record(Failure, t(0)), Some(Failure));
        assert_eq!(p.gate(running(true), t(10)), Due::Skip);
    }

    #[test]
    fn unknown_outcomes_change_nothing() {
        let mut p = ProbeState::new(ProbeKind::Liveness, timing(0, 10, 1, 2));
        p.record(Failure, t(0));
        assert_eq!(p.record(ProbeResult::Unknown, t(10)), None);
        assert_eq!(p.result(), Success);
        assert_eq!(p.record(Failure, t(20)), Some(Failure));
    }

    #[test]
    fn deletion_turns_liveness_and_startup_quietly_successful() {
        let gate = ProbeGate {
            deleting: true,
            ..running(false)
        };
        let mut startup = ProbeState::new(ProbeKind::Startup, timing(0, 10, 1, 3));
        assert_eq!(startup.gate(gate, t(1)), Due::Stop);
        assert_eq!(startup.result(), Success);
        let mut ready = ProbeState::new(ProbeKind::Readiness, timing(0, 10, 1, 3));
        assert_eq!(
            ready.gate(
                ProbeGate {
                    started: true,
                    ..gate
                },
                t(1)
            ),
            Due::Probe
        );
    }

    #[test]
    fn a_container_that_is_not_running_fails_its_probe() {
        let mut p = ProbeState::new(ProbeKind::Readiness, timing(0, 10, 1, 3));
        p.record(Success, t(0));
        let gate = ProbeGate {
            running_since: None,
            started: false,
            deleting: false,
        };
        assert_eq!(p.gate(gate, t(10)), Due::Skip);
        assert_eq!(p.result(), Failure);
    }
}
