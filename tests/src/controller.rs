//! Starts the real `berth-controller` binary on a temporary data directory, restarts it on the
//! same directory, kills it (SIGKILL or SIGTERM) and tears everything down on drop: the fixture
//! each control-plane test begins with.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::api::Api;
use crate::client::{Credentials, Endpoint, Req};
use crate::process::{LogTail, wait_with_deadline};
use crate::wait::ok_if;
use crate::wait::{ensure_for_with, wait_for_with};

/// How long a start may take before the test fails.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
/// How long a graceful shutdown may take.
pub const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// The workspace root (this crate lives in `<root>/tests`).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// `$CARGO_TARGET_DIR` (relative to the workspace root if relative), else `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Where the controller binary is: `$BERTH_CONTROLLER_BIN`, else `<target>/debug/`. Panics,
/// saying how to build it, if it is not there.
pub fn controller_binary() -> PathBuf {
    built_binary("berth-controller", "BERTH_CONTROLLER_BIN")
}

/// Where binary `name` of the workspace is: `$<var>`, else `<target>/debug/<name>`. Panics,
/// saying how to build it, if it is not there.
pub fn built_binary(name: &str, var: &str) -> PathBuf {
    let (path, origin) = match std::env::var_os(var) {
        Some(p) => (PathBuf::from(p), format!("${var}")),
        None => (
            target_dir().join("debug").join(name),
            "the workspace target dir".to_string(),
        ),
    };
    if !path.is_file() {
        panic!(
            "{name} not found at {} (from {origin}): run `cargo build --bins` first, or point \
             {var} at the binary",
            path.display()
        );
    }
    path
}

/// Copies a directory tree (files keep their modes; directories are private).
fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(to)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
    for entry in entries.flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst)
                .unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
        }
    }
}

/// A running (or stopped) controller with its own temporary directory:
/// `<tmp>/data` (the data dir), `<tmp>/controller.{stdout,stderr}.log`, `<tmp>/kubectl-cache`.
pub struct Controller {
    tmp: Option<TempDir>,
    root: PathBuf,
    bin: PathBuf,
    extra_args: Vec<String>,
    /// Run under `prlimit --nofile=N:N` (soft and hard open-files limit).
    nofile: Option<u64>,
    /// The address it listens on: loopback, or every address (`0.0.0.0`) when pods must
    /// reach it.
    listen_host: &'static str,
    child: Option<Child>,
    url: String,
    port: u16,
    starts: u32,
    /// The etcd it keeps its state in, when the run asks for the etcd store
    /// ([`DATASTORE_ENV`]).
    etcd: Option<crate::etcd::EtcdCluster>,
}

/// `BERTH_TEST_DATASTORE=etcd` runs every controller the harness starts on an etcd of its own
/// (one member) instead of the embedded store: the etcd leg of the control-plane tests.
pub const DATASTORE_ENV: &str = "BERTH_TEST_DATASTORE";

/// Whether this run keeps controllers' state in etcd ([`DATASTORE_ENV`]).
pub fn on_etcd() -> bool {
    std::env::var(DATASTORE_ENV).is_ok_and(|v| v == "etcd")
}

impl Controller {
    /// Starts a controller on an empty data dir and waits until it serves `/readyz`.
    pub fn start() -> Controller {
        Controller::start_with(&[])
    }

    /// Like [`Controller::start`], with extra `serve` arguments (e.g. `--watch-history 20`).
    pub fn start_with(args: &[&str]) -> Controller {
        Controller::start_inner(args, None)
    }

    /// Like [`Controller::start_with`], with the process's open-files limit (soft and hard) set
    /// to `nofile` (through `prlimit`, which execs the controller: the pid stays the
    /// controller's).
    pub fn start_with_nofile(args: &[&str], nofile: u64) -> Controller {
        Controller::start_inner(args, Some(nofile))
    }

    /// Like [`Controller::start_with`], listening on every address of the host, so that pods
    /// (in-cluster clients) reach it at the node's address.
    pub fn start_on_all_addresses(args: &[&str]) -> Controller {
        Controller::start_full(args, None, "0.0.0.0")
    }

    /// Like [`Controller::start_with`], with the data dir made and handed to `prepare` first
    /// (to restore a snapshot into it, put a PKI there …).
    pub fn start_prepared(args: &[&str], prepare: impl FnOnce(&Path)) -> Controller {
        let mut c = Controller::prepare(args, None, "127.0.0.1");
        prepare(&c.data_dir());
        c.spawn_and_wait(0);
        c
    }

    fn start_inner(args: &[&str], nofile: Option<u64>) -> Controller {
        Controller::start_full(args, nofile, "127.0.0.1")
    }

    /// Starts another controller of `peer`'s cluster: its data dir gets a copy of `peer`'s
    /// `pki/` and `token` (the documented way to add a controller), and `args` must name the
    /// same `--datastore-endpoint`.
    pub fn start_joining(peer: &Controller, args: &[&str]) -> Controller {
        Controller::start_prepared(args, |data| {
            copy_tree(&peer.data_dir().join("pki"), &data.join("pki"));
            std::fs::copy(peer.data_dir().join("token"), data.join("token"))
                .unwrap_or_else(|e| panic!("cannot copy the join token: {e}"));
        })
    }

    fn start_full(args: &[&str], nofile: Option<u64>, listen_host: &'static str) -> Controller {
        let mut c = Controller::prepare(args, nofile, listen_host);
        c.spawn_and_wait(0);
        c
    }

    fn prepare(args: &[&str], nofile: Option<u64>, listen_host: &'static str) -> Controller {
        let mut c = Controller::prepare_dirs(args, nofile, listen_host);
        if on_etcd() && !args.iter().any(|a| a.starts_with("--datastore-endpoint")) {
            let etcd = crate::etcd::EtcdCluster::start(1);
            c.extra_args
                .extend(["--datastore-endpoint".to_string(), etcd.endpoints()]);
            c.etcd = Some(etcd);
        }
        c
    }

    fn prepare_dirs(args: &[&str], nofile: Option<u64>, listen_host: &'static str) -> Controller {
        let bin = controller_binary();
        let tmp = tempfile::Builder::new()
            .prefix("berth-controller-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let root = tmp.path().to_path_buf();
        for dir in ["data", "kubectl-cache"] {
            std::fs::create_dir_all(root.join(dir))
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", root.join(dir).display()));
        }
        Controller {
            tmp: Some(tmp),
            root,
            bin,
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            nofile,
            listen_host,
            child: None,
            url: String::new(),
            port: 0,
            starts: 0,
            etcd: None,
        }
    }

    /// `https://127.0.0.1:PORT`
    pub fn url(&self) -> &str {
        &self.url
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }
    /// `DATA/pki/<name>`
    pub fn pki(&self, name: &str) -> PathBuf {
        self.data_dir().join("pki").join(name)
    }
    /// The admin kubeconfig the controller wrote (`DATA/admin.kubeconfig`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("admin.kubeconfig")
    }
    /// A fresh-per-test directory outside the data dir, for kubectl's cache and test files.
    pub fn scratch(&self) -> &Path {
        &self.root
    }
    pub fn stdout_log(&self) -> PathBuf {
        self.root.join("controller.stdout.log")
    }
    pub fn stderr_log(&self) -> PathBuf {
        self.root.join("controller.stderr.log")
    }
    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The controller's log files, for failure messages.
    pub fn logs(&self) -> LogTail {
        LogTail {
            files: vec![
                ("controller stderr".into(), self.stderr_log()),
                ("controller stdout".into(), self.stdout_log()),
            ],
            lines: 60,
        }
    }

    /// The last lines of the controller's logs.
    pub fn log_tail(&self) -> String {
        self.logs().render()
    }

    /// SIGKILL, then reap. No graceful anything: what was acknowledged must already be on disk.
    pub fn kill9(&mut self) {
        crate::process::kill_and_reap(&mut self.child);
    }

    /// SIGTERM and wait for a graceful exit; returns the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal_and_wait(Signal::SIGTERM)
    }

    /// SIGINT and wait for a graceful exit; returns the exit status.
    pub fn interrupt(&mut self) -> ExitStatus {
        self.signal_and_wait(Signal::SIGINT)
    }

    fn signal_and_wait(&mut self, signal: Signal) -> ExitStatus {
        let Some(mut child) = self.child.take() else {
            panic!("{signal:?}: the controller is not running");
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if let Err(e) = kill(pid, signal) {
            panic!("cannot send {signal:?} to the controller ({pid}): {e}");
        }
        match wait_with_deadline(&mut child, STOP_DEADLINE) {
            Some(status) => status,
            None => panic!(
                "the controller did not exit within {STOP_DEADLINE:?} of {signal:?} (killed)\n{}",
                self.log_tail()
            ),
        }
    }

    /// Starts the controller again on the same data dir and the same port (stopping it first
    /// with SIGTERM if it is still running), and waits until it is ready.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            let status = self.terminate();
            if !status.success() {
                panic!(
                    "graceful stop before restart ended with {status}\n{}",
                    self.log_tail()
                );
            }
        }
        let port = self.port;
        self.spawn_and_wait(port);
    }

    fn spawn_and_wait(&mut self, port: u16) {
        self.starts += 1;
        let listen_file = self.data_dir().join("listen-address");
        // A previous run's address must not be mistaken for this run's.
        let _ = std::fs::remove_file(&listen_file);
        let open_log = |path: PathBuf| {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
            let _ = writeln!(
                f,
                "===== berth-tests: controller start #{} =====",
                self.starts
            );
            f
        };
        let stdout = open_log(self.stdout_log());
        let stderr = open_log(self.stderr_log());
        let mut cmd = match self.nofile {
            Some(n) => {
                let mut cmd = Command::new("prlimit");
                cmd.arg(format!("--nofile={n}:{n}")).arg(&self.bin);
                cmd
            }
            None => Command::new(&self.bin),
        };
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--listen")
            .arg(format!("{}:{port}", self.listen_host))
            .args(&self.extra_args)
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let command = crate::process::command_line(&cmd);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
        self.child = Some(child);
        let start = Instant::now();
        let url = self.wait_ready(&command, &listen_file, start);
        let parsed = url.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
        let Some(actual) = parsed else {
            panic!("listen-address {url:?} has no port\n{}", self.log_tail());
        };
        if port != 0 && actual != port {
            panic!("restarted with --listen 127.0.0.1:{port} but it listens on {url}");
        }
        self.url = url;
        self.port = actual;
    }

    /// Waits for `DATA/listen-address` and then a 200 from `/readyz`, failing early if the
    /// process exits.
    fn wait_ready(&mut self, command: &str, listen_file: &Path, start: Instant) -> String {
        let logs = self.logs();
        let left = START_DEADLINE.saturating_sub(start.elapsed());
        wait_for_with(
            left,
            &format!("the controller to be ready (command: {command})"),
            || logs.render(),
            || {
                if let Some(status) = crate::process::exited(&mut self.child) {
                    panic!(
                        "the controller exited with {status} before it was ready\ncommand: {command}\n{}",
                        self.log_tail()
                    );
                }
                match std::fs::read_to_string(listen_file) {
                    Ok(text) if text.trim().starts_with("https://") => {
                        let url = text.trim().to_string();
                        self.readyz(&url)
                            .map(|()| url.clone())
                            .map_err(|e| format!("listen-address {url}; /readyz: {e}"))
                    }
                    Ok(text) => Err(format!("listen-address holds {text:?}")),
                    Err(e) => Err(format!("no {}: {e}", listen_file.display())),
                }
            },
        )
    }

    fn readyz(&self, url: &str) -> Result<(), String> {
        let ca_pem =
            std::fs::read(self.pki("ca.crt")).map_err(|e| format!("no pki/ca.crt: {e}"))?;
        let endpoint = Endpoint {
            url: url.to_string(),
            ca_pem,
            credentials: Credentials::Anonymous,
            resolve: None,
            http2_only: false,
        };
        let reply = Api::new(endpoint, self.logs()).try_send(Req::get("/readyz"))?;
        ok_if(reply.status == 200, reply.describe())
    }

    /// `--datastore-endpoint URLS` when this controller keeps its state in etcd, else nothing.
    pub fn datastore_args(&self) -> Vec<String> {
        let mut args = self.extra_args.iter();
        while let Some(a) = args.next() {
            if a == "--datastore-endpoint" {
                return args
                    .next()
                    .map(|v| vec![a.clone(), v.clone()])
                    .unwrap_or_default();
            }
        }
        Vec::new()
    }

    /// Whether this controller says in `/metrics` that it leads the controllers sharing its
    /// store (`false` when it does not answer).
    pub fn leads(&self) -> bool {
        self.admin_api()
            .try_send(Req::get("/metrics"))
            .is_ok_and(|r| {
                r.body
                    .contains("leader_election_master_status{name=\"berth-controller\"} 1")
            })
    }

    /// The join token the controller made (`DATA/token`, `K10<ca-hash>::node:<secret>`).
    pub fn join_token(&self) -> String {
        let path = self.data_dir().join("token");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
            .trim()
            .to_string()
    }

    /// `berth-controller ARGS --data-dir DATA` (a subcommand on this controller's data dir),
    /// whatever the outcome.
    pub fn subcommand(&self, args: &[&str]) -> crate::process::Run {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).arg("--data-dir").arg(self.data_dir());
        // Node records are in etcd when the controller keeps its state there.
        if args.first() == Some(&"node") {
            cmd.args(self.datastore_args());
        }
        crate::process::run(cmd, None, crate::host::TOOL_DEADLINE)
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.pki("ca.crt")).unwrap_or_else(|e| panic!("cannot read pki/ca.crt: {e}"))
    }

    /// The admin client certificate followed by its key (PEM), as a client identity.
    pub fn admin_identity(&self) -> Vec<u8> {
        crate::pki::identity_from_files(&self.pki("admin.crt"), &self.pki("admin.key"))
    }

    /// The endpoint of this controller with the given credentials.
    pub fn endpoint(&self, credentials: Credentials) -> Endpoint {
        Endpoint {
            url: self.url.clone(),
            ca_pem: self.ca_pem(),
            credentials,
            resolve: None,
            http2_only: false,
        }
    }

    /// The endpoint with the admin client certificate.
    pub fn admin_endpoint(&self) -> Endpoint {
        self.endpoint(Credentials::ClientCert(self.admin_identity()))
    }

    /// A raw HTTPS client presenting the admin client certificate.
    pub fn admin_api(&self) -> Api {
        Api::new(self.admin_endpoint(), self.logs())
    }

    /// A raw HTTPS client with no credentials (it still trusts the CA).
    pub fn anonymous_api(&self) -> Api {
        Api::new(self.endpoint(Credentials::Anonymous), self.logs())
    }

    /// A raw HTTPS client with other credentials.
    pub fn api_with(&self, credentials: Credentials) -> Api {
        Api::new(self.endpoint(credentials), self.logs())
    }

    /// [`crate::wait::wait_for`] with this controller's log tail in the failure message.
    pub fn wait_for<T, O: std::fmt::Debug>(
        &self,
        timeout: Duration,
        what: &str,
        probe: impl FnMut() -> Result<T, O>,
    ) -> T {
        wait_for_with(timeout, what, || self.log_tail(), probe)
    }

    /// [`crate::wait::ensure_for`] with this controller's log tail in the failure message.
    pub fn ensure_for<O: std::fmt::Debug>(
        &self,
        duration: Duration,
        what: &str,
        probe: impl FnMut() -> Result<(), O>,
    ) {
        ensure_for_with(duration, what, || self.log_tail(), probe)
    }

    /// The controller's resident set size in KiB (`VmRSS` in `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        crate::stats::vm_rss_kib(&status)
    }

    /// The controller's peak RSS in KiB (`VmHWM`): since it started, or since the last
    /// [`Controller::reset_peak_rss`].
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        crate::stats::vm_hwm_kib(&status)
    }

    /// Resets the peak RSS to the current RSS (`5` to `/proc/<pid>/clear_refs`), so that the
    /// next [`Controller::peak_rss_kib`] is the peak of what ran in between.
    pub fn reset_peak_rss(&self) -> bool {
        self.pid()
            .is_some_and(|pid| std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok())
    }

    /// CPU time (user + system) the controller has used so far (`/proc/<pid>/stat`).
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?)).ok()?;
        crate::stats::cpu_time(&stat)
    }

    /// Lines in the controller's stdout and stderr logs.
    pub fn log_lines(&self) -> usize {
        [self.stdout_log(), self.stderr_log()]
            .iter()
            .map(|p| std::fs::read_to_string(p).map_or(0, |t| t.lines().count()))
            .sum()
    }

    /// The RSS once the allocator has handed freed memory back (it does so over seconds): the
    /// first sample that is within 1% of the one taken 3 s earlier, or the last one after 60 s.
    /// For benchmarks.
    pub fn rss_at_rest_kib(&self) -> Option<u64> {
        let start = Instant::now();
        let mut samples: Vec<(Instant, u64)> = Vec::new();
        crate::wait::wait_for(
            Duration::from_secs(61),
            "the controller's RSS to settle",
            || {
                let now = (Instant::now(), self.rss_kib().ok_or("no RSS")?);
                samples.push(now);
                let settled = samples
                    .iter()
                    .rev()
                    .find(|(t, _)| now.0.duration_since(*t) >= Duration::from_secs(3))
                    .is_some_and(|(_, old)| now.1 * 100 >= old * 99);
                if settled || start.elapsed() >= Duration::from_secs(60) {
                    Ok(now.1)
                } else {
                    Err("still falling")
                }
            },
        )
        .into()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        crate::process::kill_and_reap(&mut self.child);
        // BERTH_KEEP_TMP=1 keeps the logs and the data dir for a post-mortem.
        crate::process::drop_or_keep(self.tmp.take());
    }
}
