//! The work queues of the running controllers, rendered for `/metrics` with upstream's
//! workqueue metric names (`workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_retries_total`, `workqueue_work_duration_seconds`), one series per controller.

use berth_shared::reconcile::{Queue, QueueStats, WORK_BUCKETS};
use std::fmt::Write;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

type StatsFn = Box<dyn Fn() -> QueueStats + Send + Sync>;

/// The registered queues. Cheap to clone.
#[derive(Clone, Default)]
pub struct QueueMetrics {
    queues: Arc<Mutex<Vec<(&'static str, StatsFn)>>>,
}

impl QueueMetrics {
    /// Registers a controller's queue under its name.
    pub fn register<K: Clone + Eq + Hash + Send + 'static>(
        &self,
        name: &'static str,
        queue: &Queue<K>,
    ) {
        let q = queue.clone();
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name, Box::new(move || q.stats())));
    }

    /// The Prometheus text of every registered queue.
    pub fn render(&self) -> String {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let stats: Vec<(&str, QueueStats)> = queues.iter().map(|(n, f)| (*n, f())).collect();
        drop(queues);
        let mut out = String::new();
        let mut family =
            |name: &str, help: &str, kind: &str, value: &dyn Fn(&QueueStats) -> String| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                for (queue, s) in &stats {
                    let _ = writeln!(out, "{name}{{name=\"{queue}\"}} {}", value(s));
                }
            };
        family(
            "workqueue_depth",
            "Current depth of workqueue.",
            "gauge",
            &|s| s.depth.to_string(),
        );
        family(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue.",
            "counter",
            &|s| s.adds.to_string(),
        );
        family(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue.",
            "counter",
            &|s| s.retries.to_string(),
        );
        let _ = writeln!(
            out,
            "# HELP workqueue_work_duration_seconds How long in seconds processing an item from workqueue takes.\n# TYPE workqueue_work_duration_seconds histogram"
        );
        for (queue, s) in &stats {
            for (bound, count) in WORK_BUCKETS.iter().zip(&s.work_buckets) {
                let _ = writeln!(
                    out,
                    "workqueue_work_duration_seconds_bucket{{name=\"{queue}\",le=\"{bound:e}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "workqueue_work_duration_seconds_bucket{{name=\"{queue}\",le=\"+Inf\"}} {}",
                s.work_count
            );
            let _ = writeln!(
                out,
                "workqueue_work_duration_seconds_sum{{name=\"{queue}\"}} {}",
                s.work_seconds
            );
            let _ = writeln!(
                out,
                "workqueue_work_duration_seconds_count{{name=\"{queue}\"}} {}",
                s.work_count
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_queue_is_rendered_under_its_controller_name() {
        let m = QueueMetrics::default();
        let q: Queue<String> = Queue::new();
        m.register("replicaset", &q);
        q.add("a".into());
        q.add("b".into());
        let text = m.render();
        assert!(
            text.contains("workqueue_depth{name=\"replicaset\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_adds_total{name=\"replicaset\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_work_duration_seconds_count{name=\"replicaset\"} 0"),
            "{text}"
        );
    }
}
