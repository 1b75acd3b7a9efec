//! The Prometheus text exposition format (version 0.0.4): metric families with `# HELP` and
//! `# TYPE` lines, escaped label values, histograms with cumulative buckets, and the
//! instruments the agent keeps (counters and histograms by label values).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped as the format requires (backslash, double quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `{k="v",…}`, or nothing without labels.
fn label_set(names: &[&str], values: &[String], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect();
    if let Some((n, v)) = extra {
        parts.push(format!("{n}=\"{}\"", escape(v)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// A number as the format writes it (`+Inf`, integers without a fraction).
fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A text exposition being written.
#[derive(Default)]
pub struct Text {
    out: String,
}

impl Text {
    /// Starts a metric family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample, with an optional timestamp in milliseconds.
    pub fn sample(
        &mut self,
        name: &str,
        labels: &[&str],
        values: &[String],
        v: f64,
        timestamp_ms: Option<i64>,
    ) {
        let _ = write!(
            self.out,
            "{name}{} {}",
            label_set(labels, values, None),
            number(v)
        );
        if let Some(t) = timestamp_ms {
            let _ = write!(self.out, " {t}");
        }
        self.out.push('\n');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A family's name, help text and label names, and its series by label values: what a counter
/// and a histogram keep alike.
struct Family<S> {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    series: Mutex<BTreeMap<Vec<String>, S>>,
}

impl<S> Family<S> {
    const fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Family {
            name,
            help,
            labels,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Changes the series of `values`, made by `new` when it is the first of them.
    fn update(&self, values: &[&str], new: impl FnOnce() -> S, change: impl FnOnce(&mut S)) {
        let key = values.iter().map(|v| v.to_string()).collect();
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        change(map.entry(key).or_insert_with(new));
    }

    /// The `# HELP`/`# TYPE` lines, then `sample` for each series in label order.
    fn render(&self, t: &mut Text, kind: &str, mut sample: impl FnMut(&mut Text, &[String], &S)) {
        t.family(self.name, kind, self.help);
        for (k, s) in self.series.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            sample(t, k, s);
        }
    }
}

/// Counters by label values.
pub struct CounterVec(Family<f64>);

impl CounterVec {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> CounterVec {
        CounterVec(Family::new(name, help, labels))
    }

    pub fn inc(&self, values: &[&str]) {
        self.0.update(values, || 0.0, |v| *v += 1.0);
    }

    pub fn render(&self, t: &mut Text) {
        let f = &self.0;
        f.render(t, "counter", |t, k, v| {
            t.sample(f.name, f.labels, k, *v, None)
        });
    }
}

#[derive(Clone)]
struct Series {
    count: u64,
    sum: f64,
    /// Observations at or below each bound (not yet cumulative).
    buckets: Vec<u64>,
}

/// Histograms by label values, with fixed bucket bounds.
pub struct HistogramVec {
    family: Family<Series>,
    bounds: &'static [f64],
}

impl HistogramVec {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
        bounds: &'static [f64],
    ) -> HistogramVec {
        HistogramVec {
            family: Family::new(name, help, labels),
            bounds,
        }
    }

    pub fn observe(&self, values: &[&str], v: f64) {
        let first = || Series {
            count: 0,
            sum: 0.0,
            buckets: vec![0; self.bounds.len()],
        };
        self.family.update(values, first, |s| {
            s.count += 1;
            s.sum += v;
            if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
                s.buckets[i] += 1;
            }
        });
    }

    pub fn render(&self, t: &mut Text) {
        let (name, labels) = (self.family.name, self.family.labels);
        let bucket = format!("{name}_bucket");
        self.family.render(t, "histogram", |t, k, s| {
            let mut cumulative = 0;
            for (bound, n) in self.bounds.iter().zip(&s.buckets) {
                cumulative += n;
                let le = label_set(labels, k, Some(("le", &number(*bound))));
                let _ = writeln!(t.out, "{bucket}{le} {cumulative}");
            }
            let le = label_set(labels, k, Some(("le", "+Inf")));
            let _ = writeln!(t.out, "{bucket}{le} {}", s.count);
            t.sample(&format!("{name}_sum"), labels, k, s.sum, None);
            let count = s.count as f64;
            t.sample(&format!("{name}_count"), labels, k, count, None);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_renders_cumulative_buckets_with_sum_and_count() {
        static H: HistogramVec = HistogramVec::new("op_seconds", "Op time.", &["op"], &[0.5, 1.0]);
        H.observe(&["pull"], 0.2);
        H.observe(&["pull"], 0.7);
        H.observe(&["pull"], 3.0);
        let mut t = Text::default();
        H.render(&mut t);
        assert_eq!(
            t.finish(),
            "# HELP op_seconds Op time.\n# TYPE op_seconds histogram\n\
             op_seconds_bucket{op=\"pull\",le=\"0.5\"} 1\n\
             op_seconds_bucket{op=\"pull\",le=\"1\"} 2\n\
             op_seconds_bucket{op=\"pull\",le=\"+Inf\"} 3\n\
             op_seconds_sum{op=\"pull\"} 3.9\n\
             op_seconds_count{op=\"pull\"} 3\n"
        );
    }

    #[test]
    fn label_values_are_escaped_and_counters_add_up() {
        static C: CounterVec = CounterVec::new("probes_total", "Probes.", &["pod"]);
        C.inc(&["a\"b\\c\nd"]);
        C.inc(&["a\"b\\c\nd"]);
        let mut t = Text::default();
        C.render(&mut t);
        assert!(
            t.finish()
                .ends_with("probes_total{pod=\"a\\\"b\\\\c\\nd\"} 2\n"),
        );
    }

    #[test]
    fn samples_carry_timestamps_in_milliseconds() {
        let mut t = Text::default();
        t.sample("x", &[], &[], 1.5, Some(1_700_000_000_000));
        t.sample("y", &["a"], &["b".into()], 2.0, None);
        assert_eq!(t.finish(), "x 1.5 1700000000000\ny{a=\"b\"} 2\n");
    }
}
