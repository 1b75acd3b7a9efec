//! The scheduler's own metrics, with upstream's names: its attempts by result
//! (`scheduler_schedule_attempts_total`) and the time their decisions took
//! (`scheduler_scheduling_attempt_duration_seconds`). The time is the decision alone, taken
//! under the state's lock and not counting the wait for it, so attempts over seconds is how
//! many pods a second the decision loop could place if it never waited for anything else.

use super::facts::SCHEDULER_NAME;
use super::state::Outcome;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upstream's `result` label values the scheduler produces.
const RESULTS: [&str; 2] = ["scheduled", "unschedulable"];

/// Attempts and their decision time, per result. Shared; updated without a lock.
#[derive(Debug, Default)]
pub struct Attempts {
    count: [AtomicU64; 2],
    nanos: [AtomicU64; 2],
}

impl Attempts {
    /// One decision that took `took`. A preemption nominates the pod but places it in a
    /// later attempt: upstream counts it unschedulable.
    pub fn record(&self, outcome: &Outcome, took: Duration) {
        let i = match outcome {
            Outcome::Bind { .. } => 0,
            Outcome::Unschedulable { .. } | Outcome::Preempt { .. } => 1,
        };
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.count[i].fetch_add(1, Ordering::Relaxed);
        self.nanos[i].fetch_add(nanos, Ordering::Relaxed);
    }

    /// The Prometheus text of both families.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let series = || {
            RESULTS.iter().enumerate().map(|(i, result)| {
                let labels = format!("profile=\"{SCHEDULER_NAME}\",result=\"{result}\"");
                let count = self.count[i].load(Ordering::Relaxed);
                let seconds = self.nanos[i].load(Ordering::Relaxed) as f64 / 1e9;
                (labels, count, seconds)
            })
        };
        out.push_str(
            "# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.\n\
             # TYPE scheduler_schedule_attempts_total counter\n",
        );
        for (labels, count, _) in series() {
            let _ = writeln!(out, "scheduler_schedule_attempts_total{{{labels}}} {count}");
        }
        out.push_str(
            "# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency in seconds (the decision, without waiting for the state).\n\
             # TYPE scheduler_scheduling_attempt_duration_seconds histogram\n",
        );
        let name = "scheduler_scheduling_attempt_duration_seconds";
        for (labels, count, seconds) in series() {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
            let _ = writeln!(out, "{name}_sum{{{labels}}} {seconds}");
            let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn attempts_are_counted_and_timed_by_result() {
        let a = Attempts::default();
        let p = Arc::new(pod("p", json!({})));
        let bind = Outcome::Bind {
            pod: p.clone(),
            node: Arc::from("n1"),
        };
        let unschedulable = Outcome::Unschedulable {
            pod: p.clone(),
            message: "0/1 nodes are available".into(),
        };
        let preempt = Outcome::Preempt {
            pod: p,
            node: Arc::from("n1"),
            victims: Vec::new(),
            message: String::new(),
        };
        a.record(&bind, Duration::from_millis(2));
        a.record(&bind, Duration::from_millis(3));
        a.record(&unschedulable, Duration::from_millis(1));
        a.record(&preempt, Duration::from_millis(1));
        let text = a.render();
        let scheduled = "{profile=\"default-scheduler\",result=\"scheduled\"}";
        let unschedulable = "{profile=\"default-scheduler\",result=\"unschedulable\"}";
        for line in [
            format!("scheduler_schedule_attempts_total{scheduled} 2"),
            format!("scheduler_schedule_attempts_total{unschedulable} 2"),
            format!("scheduler_scheduling_attempt_duration_seconds_sum{scheduled} 0.005"),
            format!("scheduler_scheduling_attempt_duration_seconds_count{unschedulable} 2"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
