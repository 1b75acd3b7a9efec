//! Reads an agent's `/metrics/resource` answer (the kubelet's resource metrics in the
//! Prometheus text format): the node's and each container's cumulative CPU time and working
//! set, with their sample times, and each container's start time.
//!
//! Planner: pure, no I/O.

use std::collections::BTreeMap;

/// A cumulative CPU time and a working set, as sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    /// Core-seconds consumed so far.
    pub cpu_seconds: Option<f64>,
    /// When the CPU time was sampled, in milliseconds since the epoch.
    pub cpu_at_ms: Option<i64>,
    pub memory_bytes: Option<f64>,
    /// When the container started (`container_start_time_seconds`), in milliseconds since
    /// the epoch; `None` for the node.
    pub started_ms: Option<i64>,
}

/// A container, by namespace, pod and container name.
pub type ContainerKey = (String, String, String);

/// One scrape of one agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub node: Point,
    pub containers: BTreeMap<ContainerKey, Point>,
}

/// One sample line: name, labels, value and timestamp.
type Sample<'a> = (&'a str, BTreeMap<&'a str, String>, f64, Option<i64>);

/// `name{labels} value [timestamp]` split up; `None` for comments, blanks and what does not
/// parse.
fn sample(line: &str) -> Option<Sample<'_>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = match line.find('{') {
        Some(i) => (&line[..i], &line[i..]),
        None => {
            let i = line.find(' ')?;
            (&line[..i], &line[i..])
        }
    };
    let mut labels = BTreeMap::new();
    let rest = if let Some(body) = rest.strip_prefix('{') {
        let end = closing_brace(body)?;
        for (k, v) in label_pairs(&body[..end])? {
            labels.insert(k, v);
        }
        &body[end + 1..]
    } else {
        rest
    };
    let mut fields = rest.split_whitespace();
    let value: f64 = fields.next()?.parse().ok()?;
    let ts = fields.next().and_then(|t| t.parse().ok());
    Some((name, labels, value, ts))
}

/// The index of the `}` that ends a label set (quotes and escapes respected).
fn closing_brace(body: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn label_pairs(body: &str) -> Option<Vec<(&str, String)>> {
    let mut out = Vec::new();
    let mut rest = body.trim_start_matches(',');
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.push((key, value));
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// The resource metrics in `text`.
pub fn parse(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for line in text.lines() {
        let Some((name, labels, value, ts)) = sample(line) else {
            continue;
        };
        let container = || {
            Some((
                labels.get("namespace")?.clone(),
                labels.get("pod")?.clone(),
                labels.get("container")?.clone(),
            ))
        };
        match name {
            "node_cpu_usage_seconds_total" => {
                s.node.cpu_seconds = Some(value);
                s.node.cpu_at_ms = ts;
            }
            "node_memory_working_set_bytes" => s.node.memory_bytes = Some(value),
            "container_cpu_usage_seconds_total" => {
                if let Some(k) = container() {
                    let p = s.containers.entry(k).or_default();
                    p.cpu_seconds = Some(value);
                    p.cpu_at_ms = ts;
                }
            }
            "container_start_time_seconds" => {
                if let Some(k) = container() {
                    s.containers.entry(k).or_default().started_ms =
                        Some((value * 1e3).round() as i64);
                }
            }
            "container_memory_working_set_bytes" => {
                if let Some(k) = container() {
                    s.containers.entry(k).or_default().memory_bytes = Some(value);
                }
            }
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_resource_metrics_are_read() {
        let text = "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time\n\
# TYPE container_cpu_usage_seconds_total counter\n\
container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} 1.5 1700000000123\n\
container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} 2048 1700000000123\n\
container_start_time_seconds{container=\"app\",namespace=\"default\",pod=\"web\"} 1699999990.5 1699999990500\n\
container_cpu_usage_seconds_total{container=\"odd \\\"one\\\"\",namespace=\"x\",pod=\"y,z}\"} 2 1\n\
node_cpu_usage_seconds_total 100.25 1700000000000\n\
node_memory_working_set_bytes 1e+09 1700000000000\n\
scrape_error 0\n";
        let s = parse(text);
        assert_eq!(
            s.node,
            Point {
                cpu_seconds: Some(100.25),
                cpu_at_ms: Some(1_700_000_000_000),
                memory_bytes: Some(1e9),
                started_ms: None,
            }
        );
        let key = |n: &str, p: &str, c: &str| (n.to_string(), p.to_string(), c.to_string());
        assert_eq!(
            s.containers[&key("default", "web", "app")],
            Point {
                cpu_seconds: Some(1.5),
                cpu_at_ms: Some(1_700_000_000_123),
                memory_bytes: Some(2048.0),
                started_ms: Some(1_699_999_990_500),
            }
        );
        assert_eq!(
            s.containers[&key("x", "y,z}", "odd \"one\"")].cpu_seconds,
            Some(2.0),
            "quoted braces, commas and escapes"
        );
    }

    #[test]
    fn lines_that_do_not_parse_are_skipped() {
        let s = parse(
            "node_cpu_usage_seconds_total\ngarbage{ 1\ncontainer_cpu_usage_seconds_total{pod=\"p\"} 3\n",
        );
        assert_eq!(s, Scrape::default());
    }
}
