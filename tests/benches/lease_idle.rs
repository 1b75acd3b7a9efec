//! Idle heartbeat benchmark (issue 32; prints figures, never fails on them): the controller's
//! CPU while N hollow nodes (`berth-hollow-nodes`) renew their Leases every I seconds and
//! nothing else happens, as % of one core over a window. Baselines from the same run: the
//! controller idle before any node registered, and the same controller with the nodes still
//! registered but their renewals stopped (`SIGSTOP`, for less than node lifecycle's 40 s grace,
//! so nothing else reacts). Renewing and stopped windows alternate in pairs, so a neighbour's
//! load hits both alike; the renewals are counted from the controller's own
//! `apiserver_request_total`, and their cost is the difference over that count.
//! `BERTH_BENCH_NODES` (default 1,000), `BERTH_BENCH_LEASE_INTERVAL` (s, default 10),
//! `BERTH_BENCH_WINDOW` (s of renewals per pair, default 60), `BERTH_BENCH_PAIRS` (default 2);
//! The baseline controller commits each renewal on its own (`--heartbeat-batch-interval 0`),
//! as before heartbeats were batched; the second runs with the defaults.
//! `BERTH_CONTROLLER_BIN` picks the controller (a release build gives the meaningful figures;
//! `berth-hollow-nodes` is taken from the same directory).

use std::time::Duration;

use berth_tests::Controller;
use berth_tests::bench::{HollowNodes, Span, SpanTimer, announce_hollow, env_usize};
use berth_tests::client::Req;
use berth_tests::stats::metric_sum;

const GOAL: &str = "≤ 3 % of a core (issue 32)";
/// How long a stopped window lasts: with the last renewals at most one interval old when the
/// nodes stop, their Leases stay fresh for node lifecycle's 40 s grace.
const STOPPED: Duration = Duration::from_secs(20);
/// Left out before a stopped window (renewals in flight) and after it (the missed renewals each
/// node sends at once on resuming).
const SETTLE: Duration = Duration::from_secs(3);
const RESUME_SETTLE: Duration = Duration::from_secs(12);

/// Lease PATCHes and PUTs the controller has answered 200 so far (`apiserver_request_total`).
fn renewals(c: &Controller) -> u64 {
    let page = c.admin_api().send(Req::get("/metrics")).body;
    let answered = |verb: &str| {
        let verb = format!("verb=\"{verb}\"");
        let labels = ["resource=\"leases\"", "code=\"200\"", verb.as_str()];
        metric_sum(&page, "apiserver_request_total", &labels)
    };
    (answered("PATCH") + answered("PUT")) as u64
}

/// CPU and the renewals answered over `window`.
fn measure(c: &Controller, window: Duration) -> (Span, u64) {
    let before = renewals(c);
    let timer = SpanTimer::start(c);
    std::thread::sleep(window);
    let span = timer.stop();
    (span, renewals(c).saturating_sub(before))
}

/// Sums spans.
fn total(spans: &[Span]) -> Span {
    Span {
        wall: spans.iter().map(|s| s.wall).sum(),
        cpu: spans.iter().map(|s| s.cpu).sum(),
    }
}

fn pct(s: &Span) -> String {
    format!("{:.2} %", s.cpu_percent())
}

/// What one controller measured.
struct Figures {
    empty: Span,
    renewing: Span,
    stopped: Span,
    renewals: u64,
}

impl Figures {
    fn per_second(&self) -> f64 {
        self.renewals as f64 / self.renewing.wall.as_secs_f64().max(1e-9)
    }

    /// CPU per renewal: renewing − stopped, over the renewals counted.
    fn per_renewal_us(&self) -> f64 {
        let extra = (self.renewing.cpu_percent() - self.stopped.cpu_percent()) / 100.0;
        1e6 * extra / self.per_second().max(1e-9)
    }
}

/// One controller started with `args`: empty, then with the hollow nodes renewing and stopped
/// in alternating windows.
fn run(
    label: &str,
    args: &[&str],
    nodes: usize,
    interval: usize,
    window: Duration,
    pairs: usize,
) -> Figures {
    println!("{label} (controller flags: {args:?})");
    let c = Controller::start_with(args);
    std::thread::sleep(Duration::from_secs(5));
    let (empty, _) = measure(&c, STOPPED);
    println!("  empty controller: {}", empty.describe());

    let hollow = HollowNodes::start(&c, nodes, &["--lease-interval", &interval.to_string()]);
    // Registration's burst (and the first renewals of every node) behind us.
    std::thread::sleep(Duration::from_secs(interval as u64 + 10));

    let (mut renewing, mut stopped, mut count) = (Vec::new(), Vec::new(), 0);
    for pair in 1..=pairs {
        let (span, n) = measure(&c, window);
        println!("  pair {pair}: renewing {} ({n} renewals)", span.describe());
        renewing.push(span);
        count += n;
        hollow.pause();
        std::thread::sleep(SETTLE);
        let (span, n) = measure(&c, STOPPED);
        hollow.resume();
        println!("  pair {pair}: stopped  {} ({n} renewals)", span.describe());
        stopped.push(span);
        std::thread::sleep(RESUME_SETTLE);
    }
    drop(hollow);
    Figures {
        empty,
        renewing: total(&renewing),
        stopped: total(&stopped),
        renewals: count,
    }
}

fn main() {
    let nodes = env_usize("BERTH_BENCH_NODES", 1_000);
    let interval = env_usize("BERTH_BENCH_LEASE_INTERVAL", 10).max(1);
    let window = Duration::from_secs(env_usize("BERTH_BENCH_WINDOW", 60).max(5) as u64);
    let pairs = env_usize("BERTH_BENCH_PAIRS", 2).max(1);
    announce_hollow(
        "lease_idle",
        &format!(
            "nodes={nodes}, lease interval={interval} s, window={} s, pairs={pairs}",
            window.as_secs()
        ),
    );
    // The baseline first: every renewal committed on its own, as before heartbeats were
    // batched (`--heartbeat-batch-interval 0`); then the controller's defaults.
    let alone = run(
        "baseline: each renewal committed alone",
        &["--heartbeat-batch-interval", "0"],
        nodes,
        interval,
        window,
        pairs,
    );
    let batched = run("as shipped", &[], nodes, interval, window, pairs);

    println!();
    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| controller CPU, idle, {nodes} hollow nodes renewing Leases every {interval} s ({:.0} renewals/s) | {} of a core | each renewal committed alone: {}; nodes registered, renewals stopped: {}; empty controller: {} | {GOAL} |",
        batched.per_second(),
        pct(&batched.renewing),
        pct(&alone.renewing),
        pct(&batched.stopped),
        pct(&batched.empty)
    );
    println!(
        "| controller CPU per Lease renewal (renewing − stopped, over {} renewals) | {:.0} µs | each renewal committed alone: {:.0} µs | |",
        batched.renewals,
        batched.per_renewal_us(),
        alone.per_renewal_us()
    );
    println!(
        "| idle cost per renewing node (renewing − empty) | {:.4} % of a core | | |",
        (batched.renewing.cpu_percent() - batched.empty.cpu_percent()) / nodes as f64
    );
}
