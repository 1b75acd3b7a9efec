//! Restart rules: whether an exited container runs again (restartPolicy, sidecars) and when
//! (the kubelet's crash-loop back-off), plus the image-pull back-off on the same curve.
//!
//! Planner: pure, no I/O.
//!
//! The kubelet keeps one back-off entry per container: a delay and the time it was last
//! advanced. We keep the same entry on each attempt (`Attempt::backoff`, persisted by the worker
//! as a container label), so an agent restart neither forgets nor resets it.
//!
//! Worked example, a container that exits at once every time (times in seconds):
//!
//! | exit at | entry before | decision                      | entry after |
//! |---------|--------------|-------------------------------|-------------|
//! | 0       | none         | start now (restart 1)         | 10 s @ 0    |
//! | 1       | 10 s @ 0     | back-off 10 s, start at 11    | 20 s @ 11   |
//! | 12      | 20 s @ 11    | back-off 20 s, start at 32    | 40 s @ 32   |
//! | 33      | 40 s @ 32    | back-off 40 s, start at 73    | 80 s @ 73   |
//! | …       |              | 80, 160, 300, 300, … (capped) |             |
//!
//! So the waits between an exit and the next start are 0, 10, 20, 40, 80, 160, 300, 300 … s:
//! the first restart is immediate, exactly as upstream (`doBackOff` finds no entry yet). If a
//! run lasts longer than 10 minutes (twice the cap) after the entry was last advanced, the entry
//! is stale and the next exit starts the curve again: restart at once, then 10 s.
//!
//! The cap is the node's `--max-container-restart-period` (the kubelet's
//! `crashLoopBackOff.maxContainerRestartPeriod`, feature `KubeletCrashLoopBackOffMax`, 1–300 s);
//! a cap below 10 s is also the first delay, as upstream's `newCrashLoopBackOff` does. With
//! `1s` the waits are 0, 1, 1, 1 … s. The stale window stays 10 minutes whatever the cap
//! (upstream fixes it at 600 s). The image-pull back-off keeps the 10 s → 5 min curve.

use std::time::Duration;

use jiff::Timestamp;

use super::model::{ContainerKind, ObservedContainer, RestartPolicy, Termination, after, elapsed};

/// The first back-off delay.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// The cap of the back-off delay ("capped at five minutes").
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A run this long after the entry was advanced resets it ("10 minutes without any problems").
pub const RESET_AFTER: Duration = Duration::from_secs(600);

/// The crash-loop curve of this node: the first delay and the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashLoopBackOff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for CrashLoopBackOff {
    /// Upstream's fixed curve: 10 s doubling to 5 minutes.
    fn default() -> Self {
        Self {
            initial: INITIAL_BACKOFF,
            max: MAX_BACKOFF,
        }
    }
}

impl CrashLoopBackOff {
    /// The curve capped at `max` (`--max-container-restart-period`), which must lie within
    /// 1 s and 300 s as the kubelet validates it; a cap below 10 s is also the first delay.
    pub fn with_max_restart_period(max: Duration) -> Result<Self, String> {
        if max < Duration::from_secs(1) || max > MAX_BACKOFF {
            return Err(format!(
                "max container restart period (got: {} seconds) must be set between 1s and 300s",
                max.as_secs_f64()
            ));
        }
        Ok(Self {
            initial: INITIAL_BACKOFF.min(max),
            max,
        })
    }

    /// A fresh entry at the start of this curve.
    pub fn initial(&self, now: Timestamp) -> Backoff {
        Backoff {
            delay: self.initial,
            since: now,
        }
    }

    /// The delay an entry gives on this curve: its own, capped (an entry written under a
    /// longer cap, before the agent restarted with a shorter one, waits no longer than it).
    fn delay_of(&self, entry: &Backoff) -> Duration {
        entry.delay.min(self.max)
    }
}

/// One back-off entry: the current delay and when it was last advanced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub delay: Duration,
    pub since: Timestamp,
}

impl Backoff {
    /// A fresh entry at the start of the curve.
    pub fn initial(now: Timestamp) -> Self {
        Self {
            delay: INITIAL_BACKOFF,
            since: now,
        }
    }

    /// The entry after one more failure at `now`: doubled (capped), or fresh if it was stale.
    pub fn advance(previous: Option<Backoff>, now: Timestamp) -> Self {
        match previous {
            Some(b) if !b.is_stale_at(now) => Self {
                delay: (b.delay * 2).min(MAX_BACKOFF),
                since: now,
            },
            _ => Self::initial(now),
        }
    }

    /// The end of this entry's window.
    pub fn until(&self) -> Timestamp {
        after(self.since, self.delay)
    }

    fn is_stale_at(&self, event: Timestamp) -> bool {
        elapsed(self.since, event) > RESET_AFTER
    }
}

/// When an exited container may run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashLoop {
    /// Start now; the new attempt carries `backoff`.
    StartNow { backoff: Backoff },
    /// In back-off (`CrashLoopBackOff`) until `until`; `delay` is what the message shows.
    BackOff { until: Timestamp, delay: Duration },
}

/// The kubelet's `doBackOff` on the node's `curve`: `current` is the entry the exited attempt
/// was started under and `finished_at` its exit time. In back-off while
/// `now < finished_at + delay`.
pub fn crash_loop(
    current: Option<Backoff>,
    finished_at: Timestamp,
    now: Timestamp,
    curve: CrashLoopBackOff,
) -> CrashLoop {
    if let Some(b) = current
        && !b.is_stale_at(finished_at)
    {
        let delay = curve.delay_of(&b);
        let until = after(finished_at, delay);
        if now < until {
            return CrashLoop::BackOff { until, delay };
        }
    }
    // Staleness is judged at the exit, as upstream's `Next(key, finishedAt)` does.
    let backoff = match current {
        Some(b) if !b.is_stale_at(finished_at) => Backoff {
            delay: (curve.delay_of(&b) * 2).min(curve.max),
            since: now,
        },
        _ => curve.initial(now),
    };
    CrashLoop::StartNow { backoff }
}

/// What a container's next start waits on: its last failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A run that ended (an exit, or a task that never started: `StartError`), or a container
    /// that could not be created: the crash-loop curve, from `at`, with `entry`.
    Crash {
        entry: Option<Backoff>,
        at: Timestamp,
    },
    /// The container's config could not be made (`CreateContainerConfigError`): retried
    /// [`INITIAL_BACKOFF`] after `at`, without doubling, as the kubelet's pod worker requeues a
    /// failed sync after its flat back-off period.
    Config { at: Timestamp },
}

/// The latest failure of a container: its newest terminated attempt (measured with the newest
/// attempt's entry, which started it or was started under it) or the start error the worker
/// kept, whichever is later. A start that fails before a container exists leaves no attempt,
/// so without the start error it would be retried at once, pass after pass.
pub fn last_failure(c: &ObservedContainer) -> Option<Failure> {
    let exited = c.latest_terminated().map(|(_, t)| Failure::Crash {
        entry: c.latest().and_then(|a| a.backoff),
        at: t.finished_at,
    });
    let failed = c.start_error.as_ref().map(|e| {
        if e.is_config_error() {
            Failure::Config { at: e.at }
        } else {
            Failure::Crash {
                entry: e.backoff,
                at: e.at,
            }
        }
    });
    let at = |f: &Failure| match f {
        Failure::Crash { at, .. } | Failure::Config { at } => *at,
    };
    match (exited, failed) {
        (Some(x), Some(f)) if at(&f) > at(&x) => Some(f),
        (Some(x), _) => Some(x),
        (None, f) => f,
    }
}

/// `None` when the exited container may start now, else the time its back-off ends.
pub fn next_start(
    current: Option<Backoff>,
    finished_at: Timestamp,
    now: Timestamp,
    curve: CrashLoopBackOff,
) -> Option<Timestamp> {
    match crash_loop(current, finished_at, now, curve) {
        CrashLoop::StartNow { .. } => None,
        CrashLoop::BackOff { until, .. } => Some(until),
    }
}

/// The image-pull back-off after a failed pull at `now` (kubelet's image back-off: 10 s doubling
/// to 300 s, measured from the failure). Example: failures at 0, 10, 30 s give retries due at
/// 10, 30 and 70 s; the next try after the window shows `ImagePullBackOff` until then.
pub fn image_pull_failed(previous: Option<Backoff>, now: Timestamp) -> Backoff {
    Backoff::advance(previous, now)
}

/// Whether a container that has run will run again (kubelet's `ShouldContainerBeRestarted`
/// for a dead container): ephemeral containers never; sidecars always; init containers until they succeed (unless
/// `Never`); app containers per `restartPolicy` — `Always` on any exit, `OnFailure` on a failure,
/// `Never` not at all.
pub fn should_restart(kind: ContainerKind, policy: RestartPolicy, exit: &Termination) -> bool {
    match kind {
        ContainerKind::Ephemeral => false,
        ContainerKind::Sidecar => true,
        ContainerKind::Init => !exit.succeeded() && policy != RestartPolicy::Never,
        ContainerKind::App => match policy {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit.exit_code != 0,
            RestartPolicy::Never => false,
        },
    }
}

/// A delay as Go prints a `time.Duration`: `200ms`, `10s`, `1.5s`, `2m40s`, `5m0s`, `1h0m0s`
/// (to millisecond precision, all this agent ever prints).
pub fn go_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let frac = d.subsec_millis();
    let s = if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pod::model::fixtures::{exit, t};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A back-off entry of `delay`, advanced at `t(0)`.
    fn since_t0(delay: Duration) -> Option<Backoff> {
        Some(Backoff { delay, since: t(0) })
    }

    #[test]
    fn first_exit_restarts_at_once_and_opens_a_ten_second_window() {
        assert_eq!(
            crash_loop(None, t(0), t(0), CrashLoopBackOff::default()),
            CrashLoop::StartNow {
                backoff: Backoff {
                    delay: secs(10),
                    since: t(0)
                }
            }
        );
    }

    /// The waits between exit and next start of a container that exits one second after
    /// every start, on `curve`.
    fn waits(curve: CrashLoopBackOff, exits: usize) -> Vec<u64> {
        let mut entry = None;
        let mut now = t(0);
        let mut waits = Vec::new();
        for _ in 0..exits {
            let exited = now;
            match crash_loop(entry, exited, exited, curve) {
                CrashLoop::StartNow { backoff } => {
                    waits.push(0);
                    entry = Some(backoff);
                }
                CrashLoop::BackOff { until, delay } => {
                    waits.push(delay.as_secs());
                    let CrashLoop::StartNow { backoff } = crash_loop(entry, exited, until, curve)
                    else {
                        panic!("still in back-off at its end");
                    };
                    entry = Some(backoff);
                    now = until;
                }
            }
            now = after(now, secs(1));
        }
        waits
    }

    #[test]
    fn delays_follow_the_doubling_curve_capped_at_five_minutes() {
        assert_eq!(
            waits(CrashLoopBackOff::default(), 9),
            vec![0, 10, 20, 40, 80, 160, 300, 300, 300]
        );
    }

    #[test]
    fn a_lower_maximum_restart_period_caps_the_curve() {
        let curve = |s| CrashLoopBackOff::with_max_restart_period(secs(s)).unwrap();
        assert_eq!(waits(curve(60), 7), vec![0, 10, 20, 40, 60, 60, 60]);
        assert_eq!(waits(curve(10), 4), vec![0, 10, 10, 10]);
        // Below the 10 s initial delay the cap is the first delay too (upstream's rule).
        assert_eq!(waits(curve(1), 6), vec![0, 1, 1, 1, 1, 1]);
        assert_eq!(waits(curve(4), 5), vec![0, 4, 4, 4, 4]);
        assert_eq!(curve(300), CrashLoopBackOff::default());
    }

    #[test]
    fn the_maximum_restart_period_must_lie_between_one_second_and_five_minutes() {
        let check = CrashLoopBackOff::with_max_restart_period;
        assert!(check(Duration::from_millis(999)).is_err());
        assert!(check(Duration::ZERO).is_err());
        assert!(check(secs(301)).is_err());
        assert!(check(secs(1)).is_ok());
        assert_eq!(
            check(secs(301)).unwrap_err(),
            "max container restart period (got: 301 seconds) must be set between 1s and 300s"
        );
    }

    #[test]
    fn an_entry_from_a_longer_cap_waits_no_longer_than_the_current_one() {
        // Written while the cap was 5 minutes; the agent now runs with 1 s.
        let entry = since_t0(secs(160));
        let curve = CrashLoopBackOff::with_max_restart_period(secs(1)).unwrap();
        assert_eq!(
            crash_loop(entry, t(5), t(5), curve),
            CrashLoop::BackOff {
                until: t(6),
                delay: secs(1)
            }
        );
        assert_eq!(
            crash_loop(entry, t(5), t(6), curve),
            CrashLoop::StartNow {
                backoff: Backoff {
                    delay: secs(1),
                    since: t(6)
                }
            }
        );
    }

    #[test]
    fn the_stale_window_stays_ten_minutes_under_a_short_cap() {
        let curve = CrashLoopBackOff::with_max_restart_period(secs(1)).unwrap();
        let entry = since_t0(secs(1));
        // A run of a minute is not "10 minutes without any problems": still backing off.
        assert!(matches!(
            crash_loop(entry, t(60), t(60), curve),
            CrashLoop::BackOff { .. }
        ));
        assert_eq!(
            crash_loop(entry, t(601), t(601), curve),
            CrashLoop::StartNow {
                backoff: curve.initial(t(601))
            }
        );
    }

    #[test]
    fn back_off_holds_until_exit_time_plus_delay() {
        let entry = since_t0(secs(20));
        assert_eq!(
            next_start(entry, t(5), t(24), CrashLoopBackOff::default()),
            Some(t(25))
        );
        assert_eq!(
            next_start(entry, t(5), t(25), CrashLoopBackOff::default()),
            None
        );
    }

    #[test]
    fn a_run_of_more_than_ten_minutes_resets_the_back_off() {
        let entry = since_t0(secs(300));
        // Exited 601 s after the entry was advanced: restart at once, curve starts over.
        assert_eq!(
            crash_loop(entry, t(601), t(601), CrashLoopBackOff::default()),
            CrashLoop::StartNow {
                backoff: Backoff::initial(t(601))
            }
        );
        // Exactly ten minutes is not more than ten minutes: still capped.
        assert_eq!(
            crash_loop(entry, t(600), t(601), CrashLoopBackOff::default()),
            CrashLoop::BackOff {
                until: t(900),
                delay: secs(300)
            }
        );
    }

    #[test]
    fn image_pull_back_off_uses_the_same_curve_from_each_failure() {
        let first = image_pull_failed(None, t(0));
        assert_eq!(first.until(), t(10));
        let second = image_pull_failed(Some(first), t(10));
        assert_eq!(second.until(), t(30));
        let third = image_pull_failed(Some(second), t(30));
        assert_eq!(third.until(), t(70));
        let after_quiet_spell = image_pull_failed(Some(third), t(30 + 601));
        assert_eq!(after_quiet_spell.delay, secs(10));
    }

    #[test]
    fn restart_policy_table() {
        use ContainerKind::*;
        use RestartPolicy::*;
        let cases = [
            // kind, policy, exit code, reason, restarts?
            (App, Always, 0, "Completed", true),
            (App, Always, 1, "Error", true),
            (App, OnFailure, 0, "Completed", false),
            (App, OnFailure, 1, "Error", true),
            (App, OnFailure, 137, "OOMKilled", true),
            (App, Never, 0, "Completed", false),
            (App, Never, 1, "Error", false),
            (Init, Always, 0, "Completed", false),
            (Init, Always, 1, "Error", true),
            (Init, OnFailure, 1, "Error", true),
            (Init, Never, 1, "Error", false),
            (Init, OnFailure, 0, "OOMKilled", true),
            (Sidecar, Never, 0, "Completed", true),
            (Sidecar, Never, 1, "Error", true),
            (Sidecar, OnFailure, 0, "Completed", true),
        ];
        for (kind, policy, code, reason, want) in cases {
            assert_eq!(
                should_restart(kind, policy, &exit(code, reason)),
                want,
                "{kind:?} {policy:?} exit {code} {reason}"
            );
        }
    }

    #[test]
    fn delays_print_like_go_durations() {
        assert_eq!(go_duration(secs(10)), "10s");
        assert_eq!(go_duration(secs(160)), "2m40s");
        assert_eq!(go_duration(secs(300)), "5m0s");
        assert_eq!(go_duration(secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(200)), "200ms");
    }
}
