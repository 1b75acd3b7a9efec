//! Usage over a window, as metrics-server reports it: the CPU rate between two scrapes of an
//! agent (nanocores) and the latest working set, for the node and for each pod's containers.
//! As metrics-server does, a container that started less than one resolution before a scrape
//! (but at least [`FRESH_CONTAINER_MIN_WINDOW_MS`] before it) is measured from its start, with
//! no CPU used then, so a new pod shows up after one scrape instead of two; and a container that
//! started again since the previous scrape is not measured against that scrape.
//!
//! Planner: pure, no I/O.

use super::scrape::{ContainerKey, Point, Scrape};
use std::collections::BTreeMap;

/// A usage as the metrics API serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The end of the window, in milliseconds since the epoch.
    pub at_ms: i64,
    pub window_ms: i64,
    pub cpu_nanocores: u64,
    pub memory_bytes: u64,
}

/// The shortest window from a container's start that is measured (metrics-server's
/// `freshContainerMinMetricsResolution`: a shorter one gives inaccurate rates).
pub const FRESH_CONTAINER_MIN_WINDOW_MS: i64 = 10_000;

/// The usage between `prev` and `cur` of one series; `None` without both CPU samples, with a
/// counter that went back (the container restarted) or an empty window.
fn between(prev: &Point, cur: &Point) -> Option<Usage> {
    let (c0, c1) = (prev.cpu_seconds?, cur.cpu_seconds?);
    let (t0, t1) = (prev.cpu_at_ms?, cur.cpu_at_ms?);
    if t1 <= t0 || c1 < c0 {
        return None;
    }
    let rate = (c1 - c0) / ((t1 - t0) as f64 / 1e3);
    Some(Usage {
        at_ms: t1,
        window_ms: t1 - t0,
        cpu_nanocores: (rate * 1e9).round() as u64,
        memory_bytes: cur.memory_bytes?.max(0.0) as u64,
    })
}

/// A pod's containers and their usage.
pub type PodUsage = Vec<(String, Usage)>;

/// What one agent's last two scrapes tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeUsage {
    pub node: Option<Usage>,
    /// Containers by namespace, pod and name; a pod appears only if all its containers have a
    /// usage (as metrics-server drops a pod with a container it cannot measure).
    pub pods: BTreeMap<(String, String), PodUsage>,
}

/// The point a container's usage in `cur` is measured from, scraped every `resolution_ms`:
/// its start (no CPU used yet) if it started within the last resolution but at least
/// [`FRESH_CONTAINER_MIN_WINDOW_MS`] ago; else its point in the previous scrape, unless it
/// started again since then.
fn window_start(prev: Option<&Point>, cur: &Point, resolution_ms: i64) -> Option<Point> {
    let at = cur.cpu_at_ms?;
    if let Some(started) = cur.started_ms {
        let age = at - started;
        if (FRESH_CONTAINER_MIN_WINDOW_MS..resolution_ms).contains(&age) {
            return Some(Point {
                cpu_seconds: Some(0.0),
                cpu_at_ms: Some(started),
                ..*cur
            });
        }
    }
    let prev = prev?;
    match (cur.started_ms, prev.cpu_at_ms) {
        (Some(started), Some(then)) if started >= then => None,
        _ => Some(*prev),
    }
}

/// The usage a scrape of an agent tells, given the one before (if any); the agent is scraped
/// every `resolution_ms`.
pub fn usage(prev: Option<&Scrape>, cur: &Scrape, resolution_ms: i64) -> NodeUsage {
    let mut pods: BTreeMap<(String, String), Option<PodUsage>> = BTreeMap::new();
    for ((ns, pod, container), point) in &cur.containers {
        let key: &ContainerKey = &(ns.clone(), pod.clone(), container.clone());
        let before = prev.and_then(|p| p.containers.get(key));
        let u = window_start(before, point, resolution_ms).and_then(|p| between(&p, point));
        let entry = pods
            .entry((ns.clone(), pod.clone()))
            .or_insert_with(|| Some(Vec::new()));
        match (entry.as_mut(), u) {
            (Some(list), Some(u)) => list.push((container.clone(), u)),
            _ => *entry = None,
        }
    }
    NodeUsage {
        node: prev.and_then(|p| between(&p.node, &cur.node)),
        pods: pods
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect(),
    }
}

/// A CPU quantity in nanocores, as metrics-server writes it (`123456n`).
pub fn cpu_quantity(nanocores: u64) -> String {
    format!("{nanocores}n")
}

/// A memory quantity, in Ki when whole (`2048Ki`), in bytes otherwise.
pub fn memory_quantity(bytes: u64) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{}Ki", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(cpu: f64, at_ms: i64, mem: f64) -> Point {
        Point {
            cpu_seconds: Some(cpu),
            cpu_at_ms: Some(at_ms),
            memory_bytes: Some(mem),
            started_ms: None,
        }
    }

    fn started(p: Point, at_ms: i64) -> Point {
        Point {
            started_ms: Some(at_ms),
            ..p
        }
    }

    fn scrape(node: Point, containers: &[(&str, &str, Point)]) -> Scrape {
        Scrape {
            node,
            containers: containers
                .iter()
                .map(|(p, c, pt)| (("default".into(), p.to_string(), c.to_string()), *pt))
                .collect(),
        }
    }

    #[test]
    fn cpu_is_the_rate_over_the_window_and_memory_the_latest() {
        let prev = scrape(point(10.0, 0, 0.0), &[("web", "app", point(1.0, 0, 1.0))]);
        let cur = scrape(
            point(25.0, 15_000, 4096.0),
            &[("web", "app", point(1.75, 15_000, 2048.0))],
        );
        let u = usage(Some(&prev), &cur, 15_000);
        assert_eq!(
            u.node,
            Some(Usage {
                at_ms: 15_000,
                window_ms: 15_000,
                cpu_nanocores: 1_000_000_000,
                memory_bytes: 4096
            })
        );
        assert_eq!(
            u.pods[&("default".into(), "web".into())][0].1.cpu_nanocores,
            50_000_000
        );
    }

    #[test]
    fn a_pod_with_a_container_that_cannot_be_measured_is_left_out() {
        let prev = scrape(
            point(0.0, 0, 0.0),
            &[
                ("web", "app", point(1.0, 0, 1.0)),
                ("db", "pg", point(5.0, 0, 1.0)),
            ],
        );
        let cur = scrape(
            point(1.0, 1000, 0.0),
            &[
                ("web", "app", point(2.0, 1000, 1.0)),
                ("web", "sidecar", point(0.5, 1000, 1.0)),
                ("db", "pg", point(1.0, 1000, 1.0)),
            ],
        );
        let u = usage(Some(&prev), &cur, 15_000);
        assert!(
            u.pods.is_empty(),
            "web's sidecar is new, db's counter went back: {u:?}"
        );
    }

    #[test]
    fn a_container_started_within_one_resolution_is_measured_from_its_start() {
        // Started 12 s before the node's first scrape, 0.6 s of CPU since: 0.05 cores.
        let cur = scrape(
            point(1.0, 100_000, 0.0),
            &[("web", "app", started(point(0.6, 100_000, 4096.0), 88_000))],
        );
        let u = usage(None, &cur, 15_000);
        assert_eq!(u.node, None, "the node needs two scrapes");
        assert_eq!(
            u.pods[&("default".into(), "web".into())],
            vec![(
                "app".to_string(),
                Usage {
                    at_ms: 100_000,
                    window_ms: 12_000,
                    cpu_nanocores: 50_000_000,
                    memory_bytes: 4096
                }
            )]
        );
    }

    #[test]
    fn a_container_started_under_ten_seconds_or_over_a_resolution_ago_needs_two_scrapes() {
        for age_ms in [5_000, 9_999, 15_000, 60_000] {
            let cur = scrape(
                point(1.0, 100_000, 0.0),
                &[(
                    "web",
                    "app",
                    started(point(0.6, 100_000, 1.0), 100_000 - age_ms),
                )],
            );
            assert!(
                usage(None, &cur, 15_000).pods.is_empty(),
                "started {age_ms} ms before the scrape"
            );
        }
    }

    #[test]
    fn a_container_that_started_again_since_the_previous_scrape_is_not_measured_against_it() {
        let prev = scrape(
            point(0.0, 0, 0.0),
            &[("web", "app", started(point(1.0, 0, 1.0), -60_000))],
        );
        let cur = scrape(
            point(1.0, 30_000, 0.0),
            &[("web", "app", started(point(2.0, 30_000, 1.0), 1_000))],
        );
        assert!(usage(Some(&prev), &cur, 15_000).pods.is_empty());
        let same = scrape(
            point(1.0, 30_000, 0.0),
            &[("web", "app", started(point(2.0, 30_000, 1.0), -60_000))],
        );
        assert_eq!(
            usage(Some(&prev), &same, 15_000).pods[&("default".into(), "web".into())][0]
                .1
                .window_ms,
            30_000
        );
    }

    #[test]
    fn quantities_are_written_as_metrics_server_writes_them() {
        assert_eq!(cpu_quantity(1_234), "1234n");
        assert_eq!(memory_quantity(2048), "2Ki");
        assert_eq!(memory_quantity(1000), "1000");
    }
}
