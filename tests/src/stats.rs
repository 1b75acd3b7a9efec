//! Figures for the benchmark: nearest-rank percentiles of latency samples, the resident set
//! size read from `/proc/<pid>/status`, CPU time from `/proc/<pid>/stat`, and series read
//! from a Prometheus text page.

use std::time::Duration;

/// Latency samples, summarised by nearest-rank percentiles.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    sorted: bool,
    values: Vec<Duration>,
}

impl Samples {
    pub fn new() -> Samples {
        Samples::default()
    }

    pub fn push(&mut self, d: Duration) {
        self.values.push(d);
        self.sorted = false;
    }

    pub fn extend(&mut self, other: Samples) {
        self.values.extend(other.values);
        self.sorted = false;
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Nearest-rank percentile: the smallest sample with at least `p`% of samples at or below
    /// it. Worked example: 10 samples, p99 → rank ceil(9.9) = 10 → the largest; p50 → rank 5.
    pub fn percentile(&mut self, p: f64) -> Option<Duration> {
        if self.values.is_empty() {
            return None;
        }
        if !self.sorted {
            self.values.sort_unstable();
            self.sorted = true;
        }
        let n = self.values.len();
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        Some(self.values[rank.clamp(1, n) - 1])
    }

    /// `p50=1.23 p99=4.56` in milliseconds.
    pub fn p50_p99_ms(&mut self) -> String {
        let ms = |d: Option<Duration>| {
            d.map_or("n/a".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
        };
        let p50 = ms(self.percentile(50.0));
        let p99 = ms(self.percentile(99.0));
        format!("p50={p50} p99={p99}")
    }
}

/// The `VmRSS` line of `/proc/<pid>/status`, in KiB.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    status_kib(status, "VmRSS:")
}

/// The `VmHWM` (peak RSS) line of `/proc/<pid>/status`, in KiB.
pub fn vm_hwm_kib(status: &str) -> Option<u64> {
    status_kib(status, "VmHWM:")
}

fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User plus system CPU time from a `/proc/<pid>/stat` line (fields 14 and 15, in clock ticks).
/// The command name (field 2) may hold spaces and parentheses, so fields are counted after
/// its closing parenthesis: `utime` is then the 12th.
pub fn cpu_time(stat: &str) -> Option<Duration> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|hz| *hz > 0)
        .unwrap_or(100) as u64;
    Some(Duration::from_secs_f64((utime + stime) as f64 / hz as f64))
}

/// The CPU time (user + system) process `pid` has used so far; zero when it cannot be read.
pub fn process_cpu(pid: u32) -> Duration {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| cpu_time(&stat))
        .unwrap_or_default()
}

/// KiB as megabytes with one decimal, `n/a` when unknown (benchmark output).
pub fn megabytes(kib: Option<u64>) -> String {
    kib.map_or("n/a".into(), |k| format!("{:.1}", k as f64 * 1024.0 / 1e6))
}

/// The sum of the series of metric `name` in a Prometheus text page whose labels contain
/// every one of `labels` (`resource="leases"`); 0 when there is none.
pub fn metric_sum(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (series, value) = rest.rsplit_once(' ')?;
            let exact = series.is_empty() || series.starts_with('{');
            (exact && labels.iter().all(|want| series.contains(want))).then_some(value)
        })
        .filter_map(|v| v.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_sums_its_series_with_the_labels_asked_for() {
        let page = "# TYPE x counter\n\
                    x_total{verb=\"PATCH\",code=\"200\"} 3\n\
                    x_total{verb=\"PUT\",code=\"200\"} 2\n\
                    x_total{verb=\"PUT\",code=\"409\"} 7\n\
                    x_total_other 100\n\
                    y 1.5\n";
        assert_eq!(metric_sum(page, "x_total", &["code=\"200\""]), 5.0);
        assert_eq!(metric_sum(page, "x_total", &[]), 12.0);
        assert_eq!(metric_sum(page, "y", &[]), 1.5);
        assert_eq!(metric_sum(page, "z", &[]), 0.0);
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut s = Samples::new();
        for n in (1..=10).rev() {
            s.push(ms(n));
        }
        assert_eq!(s.percentile(50.0), Some(ms(5)));
        assert_eq!(s.percentile(99.0), Some(ms(10)));
        assert_eq!(s.percentile(0.0), Some(ms(1)));
        assert_eq!(s.percentile(100.0), Some(ms(10)));
    }

    #[test]
    fn no_samples_give_no_percentile() {
        let mut s = Samples::new();
        assert_eq!(s.percentile(50.0), None);
        assert_eq!(s.p50_p99_ms(), "p50=n/a p99=n/a");
    }

    #[test]
    fn p50_p99_prints_milliseconds_with_two_decimals() {
        let mut s = Samples::new();
        s.push(Duration::from_micros(1234));
        assert_eq!(s.p50_p99_ms(), "p50=1.23 p99=1.23");
    }

    #[test]
    fn cpu_time_adds_user_and_system_ticks_after_the_command_name() {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        let stat = "4242 (berth (ctl) x) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 9 0";
        assert_eq!(cpu_time(stat), Some(Duration::from_secs_f64(300.0 / hz)));
        assert_eq!(cpu_time("garbage"), None);
    }

    #[test]
    fn vm_rss_is_read_in_kib() {
        let status = "Name:\tberth-controller\nVmPeak:\t  9000 kB\nVmRSS:\t   51234 kB\n";
        assert_eq!(vm_rss_kib(status), Some(51234));
        assert_eq!(vm_rss_kib("Name: x\n"), None);
        assert_eq!(
            vm_hwm_kib("VmHWM:\t 60000 kB\nVmRSS:\t 51234 kB\n"),
            Some(60000)
        );
        assert_eq!(megabytes(Some(1000)), "1.0");
        assert_eq!(megabytes(None), "n/a");
    }
}
