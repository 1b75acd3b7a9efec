//! What the benchmarks share: numeric settings from the environment, a note on the build a
//! binary comes from, controller CPU over a stretch of work, and `berth-hollow-nodes`
//! (kubemark-style simulated nodes) as a child process killed when the benchmark ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::controller::{Controller, controller_binary};
use crate::wait::ok_if;

/// `$name` as a number, `default` when unset or not a number.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Says whether `bin` is a debug build (figures are then pessimistic).
pub fn build_note(bin: &Path) -> &'static str {
    if bin.components().any(|c| c.as_os_str() == "debug") {
        "a debug build: figures are pessimistic"
    } else {
        "not a debug build"
    }
}

/// `BIN (NOTE)`: a binary's path and its [`build_note`], for a bench's first line.
pub fn built(bin: &Path) -> String {
    format!("{} ({})", bin.display(), build_note(bin))
}

/// Prints a bench's first line, `NAME bench: agent BIN (NOTE), controller BIN (NOTE), SETTINGS`,
/// for a bench that runs both binaries.
pub fn announce_cluster(name: &str, settings: &str) {
    let agent = built(&crate::agent::agent_binary());
    let controller = built(&crate::controller::controller_binary());
    println!("{name} bench: agent {agent}, controller {controller}, {settings}");
}

/// Prints a bench's first line, `NAME bench: BIN (NOTE) and HOLLOW, SETTINGS`, for a bench that
/// runs the controller with `berth-hollow-nodes`.
pub fn announce_hollow(name: &str, settings: &str) {
    let controller = built(&crate::controller::controller_binary());
    let hollow = hollow_binary();
    println!(
        "{name} bench: {controller} and {}, {settings}",
        hollow.display()
    );
}

/// A bench's start on hollow nodes: its first line (as [`announce_hollow`] prints it), a
/// controller, and `nodes` hollow nodes with `extra` flags registered with it. Bind the pair as
/// `(c, _hollow)`: the hollow nodes go first.
pub fn start_hollow(
    name: &str,
    settings: &str,
    nodes: usize,
    extra: &[&str],
) -> (Controller, HollowNodes) {
    announce_hollow(name, settings);
    let c = Controller::start();
    let hollow = HollowNodes::start(&c, nodes, extra);
    (c, hollow)
}

/// Waits (up to ten minutes) until Deployment `name` in `default` reports `pods` ready replicas.
pub fn wait_deployment_ready(c: &crate::Cluster, name: &str, pods: usize) {
    let path = format!("/apis/apps/v1/namespaces/default/deployments/{name}");
    c.wait_for(Duration::from_secs(600), "every pod running", || {
        let ready = c
            .get(&path)
            .and_then(|d| d.pointer("/status/readyReplicas").and_then(|r| r.as_u64()))
            .unwrap_or(0);
        crate::wait::ok_if(ready as usize == pods, ready)
    });
}

/// How long [`time_to_running`] waits for one pod.
const TIME_TO_RUNNING_DEADLINE: Duration = Duration::from_secs(60);

/// POSTs `pod` to `default` and waits (up to a minute) for `watch` on that namespace's pods to
/// show it Running; returns the time between. `running` holds the pods already seen Running, so
/// that an event about an older pod is not taken for this one.
pub fn time_to_running(
    c: &crate::Cluster,
    watch: &mut crate::api::Watch,
    running: &mut std::collections::HashSet<String>,
    name: &str,
    pod: &serde_json::Value,
) -> Duration {
    let start = Instant::now();
    c.api().expect(
        crate::client::Req::post("/api/v1/namespaces/default/pods", pod),
        201,
    );
    loop {
        let left = TIME_TO_RUNNING_DEADLINE.saturating_sub(start.elapsed());
        match watch.next(left) {
            crate::api::Next::Event(e) => {
                let o: &serde_json::Value = &e["object"];
                let pod_name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                if o["status"]["phase"] == "Running"
                    && running.insert(pod_name.clone())
                    && pod_name == name
                {
                    return start.elapsed();
                }
            }
            crate::api::Next::Timeout => panic!(
                "{name} was not Running within {TIME_TO_RUNNING_DEADLINE:?}\n{}",
                c.logs().render()
            ),
            crate::api::Next::Closed(why) => panic!("the watch closed: {why}"),
        }
    }
}

/// Wall time and controller CPU time (user + system) from `start` to `stop`.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub wall: Duration,
    pub cpu: Duration,
}

impl Span {
    /// CPU time over wall time, in percent of one core.
    pub fn cpu_percent(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    /// `12.3 s wall, 4.5 s CPU (37 % of a core)`.
    pub fn describe(&self) -> String {
        format!(
            "{:.1} s wall, {:.1} s CPU ({:.0} % of a core)",
            self.wall.as_secs_f64(),
            self.cpu.as_secs_f64(),
            self.cpu_percent()
        )
    }
}

/// Measures wall time and the controller's CPU time over a stretch of work.
pub struct SpanTimer<'a> {
    controller: &'a Controller,
    started: Instant,
    cpu: Duration,
}

impl SpanTimer<'_> {
    pub fn start(controller: &Controller) -> SpanTimer<'_> {
        SpanTimer {
            controller,
            started: Instant::now(),
            cpu: controller.cpu_time().unwrap_or_default(),
        }
    }

    pub fn stop(&self) -> Span {
        Span {
            wall: self.started.elapsed(),
            cpu: self
                .controller
                .cpu_time()
                .unwrap_or_default()
                .saturating_sub(self.cpu),
        }
    }
}

/// `berth-hollow-nodes` beside the controller binary (`BERTH_CONTROLLER_BIN`'s directory).
pub fn hollow_binary() -> PathBuf {
    controller_binary().with_file_name("berth-hollow-nodes")
}

/// How long `berth-hollow-nodes` may take to register all its nodes.
const REGISTER_DEADLINE: Duration = Duration::from_secs(600);

/// A running `berth-hollow-nodes`, killed (by its pid) when dropped, however the benchmark
/// ends. Its log is `hollow.log` in the controller's scratch directory.
pub struct HollowNodes(Child);

impl HollowNodes {
    /// Starts `nodes` hollow nodes (`hollow-0` …) against `c` with extra flags (e.g.
    /// `--run-to-completion-after 1s`) and waits until every one is registered.
    pub fn start(c: &Controller, nodes: usize, extra: &[&str]) -> HollowNodes {
        let bin = hollow_binary();
        let log = std::fs::File::create(c.scratch().join("hollow.log"))
            .unwrap_or_else(|e| panic!("hollow log: {e}"));
        let hollow = HollowNodes(
            Command::new(&bin)
                .arg("--kubeconfig")
                .arg(c.kubeconfig())
                .args(["--nodes", &nodes.to_string(), "--concurrency", "32"])
                .args(extra)
                .env("BERTH_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display())),
        );
        let api = c.admin_api();
        c.wait_for(REGISTER_DEADLINE, "every hollow node registered", || {
            let list = api.get_ok("/api/v1/nodes");
            let n = list["items"].as_array().map_or(0, Vec::len);
            ok_if(n >= nodes, n)
        });
        hollow
    }
}

impl HollowNodes {
    /// Stops the process (`SIGSTOP`): its nodes stay registered but nothing renews their Leases
    /// until [`HollowNodes::resume`]. Node lifecycle notices after its grace period (40 s).
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a [`HollowNodes::pause`]d process run again (`SIGCONT`); each node then renews the
    /// Leases it missed at once.
    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        nix::sys::signal::kill(pid, signal)
            .unwrap_or_else(|e| panic!("cannot send {signal} to berth-hollow-nodes: {e}"));
    }
}

impl Drop for HollowNodes {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// For a raw-containerd baseline: a containerd namespace of its own (`<prefix>-<unique>`) with
/// the busybox fixture pulled and one container already run, so later `ctr run`s are warm.
/// Returns the namespace and the image reference.
pub fn warm_raw_namespace(c: &crate::Cluster, prefix: &str) -> (String, String) {
    warm_raw_namespace_of(c, prefix, &crate::fixtures::BUSYBOX)
}

/// [`warm_raw_namespace`] with the fixture `f` (its warm-up container runs `true`).
pub fn warm_raw_namespace_of(
    c: &crate::Cluster,
    prefix: &str,
    f: &crate::fixtures::Fixture,
) -> (String, String) {
    let ns = format!("{prefix}-{}", crate::host::unique_suffix());
    let ctd = c.containerd();
    let image = format!("{}/{}:{}", c.registry().addr(), f.repository, f.tag);
    ctd.ctr_ok(&ns, &["images", "pull", "--plain-http", &image]);
    ctd.ctr_ok(&ns, &["run", "-d", "--null-io", &image, "raw-warm", "true"]);
    (ns, image)
}
