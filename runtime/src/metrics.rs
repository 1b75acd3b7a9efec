//! The running controllers' metrics for `/metrics`: their work queues, with upstream's
//! workqueue metric names (`workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_retries_total`, `workqueue_work_duration_seconds`), one series per controller,
//! and the text of any other source a controller registers (the scheduler's attempts).

use berth_shared::reconcile::{Queue, QueueStats, WORK_BUCKETS};
use std::fmt::Write;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

type StatsFn = Box<dyn Fn() -> QueueStats + Send + Sync>;
type TextFn = Box<dyn Fn() -> String + Send + Sync>;

/// The registered queues and sources. Cheap to clone.
#[derive(Clone, Default)]
pub struct ControllerMetrics {
    queues: Arc<Mutex<Vec<(&'static str, StatsFn)>>>,
    sources: Arc<Mutex<Vec<(&'static str, TextFn)>>>,
}

impl ControllerMetrics {
    /// Registers a controller's queue under its name. A queue registered again under the same
    /// name (the controller started again after a lost leadership) replaces the earlier one, so
    /// no series is rendered twice (a scrape with a duplicate series fails as a whole) and the
    /// old queue is not kept alive.
    pub fn register<K: Clone + Eq + Hash + Send + 'static>(
        &self,
        name: &'static str,
        queue: &Queue<K>,
    ) {
        let q = queue.clone();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.retain(|(n, _)| *n != name);
        queues.push((name, Box::new(move || q.stats())));
    }

    /// Registers a source of metric families under `name`: `render` returns their Prometheus
    /// text. A source registered again under the same name (a controller started again after
    /// a lost leadership) replaces the earlier one.
    pub fn register_source(
        &self,
        name: &'static str,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        sources.retain(|(n, _)| *n != name);
        sources.push((name, Box::new(render)));
    }

    /// The Prometheus text of every registered queue, then of every source.
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
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        for (_, render) in sources.iter() {
            out.push_str(&render());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_queue_is_rendered_under_its_controller_name() {
        let m = ControllerMetrics::default();
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

    #[test]
    fn a_queue_registered_again_under_its_name_replaces_the_first() {
        let m = ControllerMetrics::default();
        let (old, new): (Queue<String>, Queue<String>) = (Queue::new(), Queue::new());
        m.register("replicaset", &old);
        old.add("a".into());
        m.register("replicaset", &new);
        let text = m.render();
        assert_eq!(
            text.matches("workqueue_depth{name=\"replicaset\"}").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("workqueue_depth{name=\"replicaset\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_source_is_rendered_after_the_queues_and_replaced_under_its_name() {
        let m = ControllerMetrics::default();
        let q: Queue<String> = Queue::new();
        m.register("replicaset", &q);
        m.register_source("scheduler", || "scheduler_pending_pods 3\n".to_string());
        m.register_source("scheduler", || "scheduler_pending_pods 4\n".to_string());
        let text = m.render();
        let queue = text.find("workqueue_depth{name=\"replicaset\"}");
        let source = text.find("scheduler_pending_pods 4\n");
        assert!(queue.is_some() && source > queue, "{text}");
        assert!(
            !text.contains("scheduler_pending_pods 3"),
            "replaced: {text}"
        );
    }
}
