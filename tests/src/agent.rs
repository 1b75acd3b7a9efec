//! The real `berth-agent` binary as a child process: started with a test cluster's flags on its
//! own temporary root and log directories, killed with SIGKILL (crash tests) or SIGTERM, started
//! again on the same directories, and its `image` subcommands run against the same containerd.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::controller::built_binary;
use crate::host::{TOOL_DEADLINE, require_tool};
use crate::process::{LogTail, Run, run, wait_with_deadline};
use crate::sweep::NETNS_DIR;
use crate::wait::wait_for_with;

/// How long a SIGTERM'd agent may take to exit.
pub const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// How long `nsenter` may take to exec the agent inside a netns.
const EXEC_DEADLINE: Duration = Duration::from_secs(10);

/// Where the agent binary is: `$BERTH_AGENT_BIN`, else `<target>/debug/berth-agent`. Panics,
/// saying how to build it, if it is not there.
pub fn agent_binary() -> PathBuf {
    built_binary("berth-agent", "BERTH_AGENT_BIN")
}

/// Everything an agent is started with (the flags of the agent contract).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub server: String,
    pub token: String,
    pub node_name: String,
    pub containerd_socket: PathBuf,
    pub containerd_namespace: String,
    /// At most 15 characters.
    pub cni_bridge: String,
    pub cni_bin_dir: PathBuf,
    pub cluster_cidr: String,
    pub registries_config: PathBuf,
    /// `k=v,...`
    pub node_labels: String,
    /// `k=v:Effect,...`
    pub taints: String,
    pub max_pods: u32,
    /// Extra flags, appended last.
    pub extra_args: Vec<String>,
    /// `--listen`, the address of the logs and exec server ([`LOOPBACK_LISTEN`] on the
    /// machine's own network).
    pub listen: String,
    /// `--node-ip`, the Node's InternalIP ([`LOOPBACK_NODE_IP`] on the machine's own network).
    pub node_ip: String,
    /// The named netns the agent runs in (a test bed host), entered with `nsenter --net=` so
    /// the agent keeps the machine's mount namespace: containerd must see the pod netns it
    /// mounts under `/var/run/netns`. `None`: the machine's own netns.
    pub netns: Option<String>,
    /// Capabilities (`sys_resource`, …) dropped from the agent's bounding set with `setpriv`
    /// (which execs the agent: its PID stays the child's), as on a host that lacks them.
    pub bounding_drop: Vec<String>,
}

/// `--listen` of an agent on the machine's own network.
pub const LOOPBACK_LISTEN: &str = "127.0.0.1:0";
/// `--node-ip` of an agent on the machine's own network.
pub const LOOPBACK_NODE_IP: &str = "127.0.0.1";

impl AgentConfig {
    /// The CNI network name the agent derives from its node name; it prefixes the agent's netns
    /// names and tags its iptables rules.
    pub fn network_name(&self) -> String {
        format!("berth-{}", self.node_name)
    }
}

/// A running (or stopped) agent with `<tmp>/root` (`--root-dir`), `<tmp>/logs` (`--log-dir`) and
/// `<tmp>/agent.{stdout,stderr}.log`.
pub struct Agent {
    tmp: Option<TempDir>,
    dir: PathBuf,
    bin: PathBuf,
    config: AgentConfig,
    child: Option<Child>,
    starts: u32,
}

impl Agent {
    /// Starts an agent (it does not wait for anything: the cluster waits for its Node).
    pub fn start(config: AgentConfig) -> Agent {
        let bin = agent_binary();
        let tmp = tempfile::Builder::new()
            .prefix(&format!("berth-agent-{}-", config.node_name))
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let dir = tmp.path().to_path_buf();
        for sub in ["root", "logs"] {
            std::fs::create_dir_all(dir.join(sub))
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.join(sub).display()));
        }
        let mut a = Agent {
            tmp: Some(tmp),
            dir,
            bin,
            config,
            child: None,
            starts: 0,
        };
        a.spawn();
        a
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The flags the next (re)start uses.
    pub fn config_mut(&mut self) -> &mut AgentConfig {
        &mut self.config
    }
    pub fn node_name(&self) -> &str {
        &self.config.node_name
    }
    pub fn namespace(&self) -> &str {
        &self.config.containerd_namespace
    }
    pub fn bridge(&self) -> &str {
        &self.config.cni_bridge
    }
    pub fn network_name(&self) -> String {
        self.config.network_name()
    }
    /// The agent's temporary directory (root dir, log dir and its own logs are inside).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `--root-dir`
    pub fn root_dir(&self) -> PathBuf {
        self.dir.join("root")
    }
    /// `--log-dir` (container logs: `<ns>_<pod>_<uid>/<container>/<restart>.log`)
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// `<root-dir>/pki/<name>`: `ca.crt`, `node.crt`, `node.key` once joined.
    pub fn pki(&self, name: &str) -> PathBuf {
        self.root_dir().join("pki").join(name)
    }
    pub fn stdout_log(&self) -> PathBuf {
        self.dir.join("agent.stdout.log")
    }
    pub fn stderr_log(&self) -> PathBuf {
        self.dir.join("agent.stderr.log")
    }
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// The exit status, if the agent has exited on its own.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn logs(&self) -> LogTail {
        LogTail {
            files: vec![
                (
                    format!("agent {} stderr", self.node_name()),
                    self.stderr_log(),
                ),
                (
                    format!("agent {} stdout", self.node_name()),
                    self.stdout_log(),
                ),
            ],
            lines: 60,
        }
    }

    /// The agent's resident set size in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        crate::stats::vm_rss_kib(&status)
    }

    /// The agent binary, run in the agent's netns when it has one.
    fn binary_in_netns(&self) -> Command {
        // nsenter execs the agent once it has entered the netns: the child's PID is the
        // agent's (see `spawn`).
        let mut cmd = match &self.config.netns {
            Some(ns) => {
                let mut cmd = Command::new(require_tool("nsenter"));
                cmd.arg(format!("--net={}", Path::new(NETNS_DIR).join(ns).display()));
                cmd
            }
            None if self.config.bounding_drop.is_empty() => return Command::new(&self.bin),
            None => Command::new(require_tool("setpriv")),
        };
        if !self.config.bounding_drop.is_empty() {
            if self.config.netns.is_some() {
                cmd.arg(require_tool("setpriv"));
            }
            let drops: Vec<String> = self
                .config
                .bounding_drop
                .iter()
                .map(|c| format!("-{c}"))
                .collect();
            cmd.arg(format!("--bounding-set={}", drops.join(",")));
        }
        cmd.arg(&self.bin);
        cmd
    }

    /// `berth-agent uninstall` with this agent's flags, in its netns (stop the agent first).
    pub fn uninstall(&self) -> Run {
        let mut cmd = self.binary_in_netns();
        cmd.arg("uninstall");
        self.host_flags(&mut cmd);
        cmd.env("RUST_BACKTRACE", "1");
        run(cmd, None, TOOL_DEADLINE)
    }

    /// The flags that say where this agent's node lives on the host (its name, state, containerd
    /// namespace, bridge and CIDR): the same for running it and for `uninstall`.
    fn host_flags(&self, cmd: &mut Command) {
        let c = &self.config;
        cmd.arg("--node-name")
            .arg(&c.node_name)
            .arg("--root-dir")
            .arg(self.root_dir())
            .arg("--containerd-socket")
            .arg(&c.containerd_socket)
            .arg("--containerd-namespace")
            .arg(&c.containerd_namespace)
            .arg("--cni-bridge")
            .arg(&c.cni_bridge)
            .arg("--cni-bin-dir")
            .arg(&c.cni_bin_dir)
            .arg("--cluster-cidr")
            .arg(&c.cluster_cidr);
    }

    /// The command line for the current config.
    fn command(&self) -> Command {
        let c = &self.config;
        let mut cmd = self.binary_in_netns();
        cmd.arg("--server")
            .arg(&c.server)
            .arg("--token")
            .arg(&c.token);
        self.host_flags(&mut cmd);
        cmd.arg("--listen")
            .arg(&c.listen)
            .arg("--node-ip")
            .arg(&c.node_ip)
            .arg("--registries-config")
            .arg(&c.registries_config)
            .arg("--max-pods")
            .arg(c.max_pods.to_string())
            .arg("--log-dir")
            .arg(self.log_dir());
        if !c.node_labels.is_empty() {
            cmd.arg("--node-labels").arg(&c.node_labels);
        }
        if !c.taints.is_empty() {
            cmd.arg("--register-with-taints").arg(&c.taints);
        }
        if c.netns.is_none() {
            // Agents sharing the machine's own netns would fight over ports 80 and 443: their
            // ingress proxies are off unless a test's extra flags (which come last) turn one on.
            cmd.args(["--ingress-http-port", "0", "--ingress-https-port", "0"]);
        }
        cmd.args(&c.extra_args);
        cmd
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let open_log = |path: PathBuf, starts: u32| {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
            let _ = writeln!(f, "===== berth-tests: agent start #{starts} =====");
            f
        };
        let mut cmd = self.command();
        cmd.env("RUST_BACKTRACE", "1")
            .env(
                "BERTH_LOG",
                std::env::var("BERTH_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(open_log(self.stdout_log(), self.starts))
            .stderr(open_log(self.stderr_log(), self.starts));
        let command = crate::process::command_line(&cmd);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
        let pid = child.id();
        self.child = Some(child);
        if self.config.netns.is_some() {
            self.wait_exec(pid, &command);
        }
    }

    /// Waits until nsenter has exec'd the agent, so that `/proc/PID/exe` (which a cluster's
    /// record keeps, to never kill a reused PID) is the agent's binary and not nsenter.
    fn wait_exec(&mut self, pid: u32, command: &str) {
        let want = std::fs::canonicalize(&self.bin).unwrap_or_else(|_| self.bin.clone());
        let logs = self.logs();
        self.wait_running(
            EXEC_DEADLINE,
            &format!("nsenter to exec the agent (`{command}`)"),
            &format!("`{command}`"),
            &logs,
            || match std::fs::read_link(format!("/proc/{pid}/exe")) {
                Ok(exe) if exe == want => Ok(()),
                other => Err(other),
            },
        );
    }

    /// [`wait_for_with`] `probe` with `logs` in the failure message, as long as the agent runs:
    /// if its process exits, panics at once saying `who` exited.
    pub fn wait_running<T, O: std::fmt::Debug>(
        &mut self,
        timeout: Duration,
        what: &str,
        who: &str,
        logs: &LogTail,
        mut probe: impl FnMut() -> Result<T, O>,
    ) -> T {
        wait_for_with(
            timeout,
            what,
            || logs.render(),
            || {
                if let Some(status) = self.exited() {
                    panic!("{who} exited with {status}\n{}", logs.render());
                }
                probe()
            },
        )
    }

    /// SIGKILL and reap: nothing graceful, as in a crash or an OOM kill of the agent.
    pub fn kill9(&mut self) {
        crate::process::kill_and_reap(&mut self.child);
    }

    /// SIGTERM and wait for the exit; returns the status.
    pub fn terminate(&mut self) -> ExitStatus {
        let Some(mut child) = self.child.take() else {
            panic!("SIGTERM: agent {} is not running", self.node_name());
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if let Err(e) = kill(pid, Signal::SIGTERM) {
            panic!("cannot send SIGTERM to agent {}: {e}", self.node_name());
        }
        wait_with_deadline(&mut child, STOP_DEADLINE).unwrap_or_else(|| {
            panic!(
                "agent {} did not exit within {STOP_DEADLINE:?} of SIGTERM (killed)\n{}",
                self.node_name(),
                self.logs().render()
            )
        })
    }

    /// Starts the agent again on the same directories and flags (killing it first if it still
    /// runs).
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// `berth-agent ARGS --containerd-socket S --containerd-namespace NS --registries-config F`
    /// (the `image import` / `image ls` subcommands), whatever the outcome.
    pub fn subcommand(&self, args: &[&str]) -> Run {
        image_subcommand(&self.bin, &self.config, args)
    }
}

/// `BIN ARGS` against the containerd, namespace and registries of `config`, whether or not an
/// agent runs with it (to import images into a node's namespace before its agent starts).
pub fn image_subcommand(bin: &Path, config: &AgentConfig, args: &[&str]) -> Run {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .arg("--containerd-socket")
        .arg(&config.containerd_socket)
        .arg("--containerd-namespace")
        .arg(&config.containerd_namespace)
        .arg("--registries-config")
        .arg(&config.registries_config)
        .env("RUST_BACKTRACE", "1");
    run(cmd, None, TOOL_DEADLINE)
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill9();
        // Anything the agent mounted under its directories (emptyDir tmpfs, …) must go before
        // the directory itself can.
        crate::sweep::unmount_under(&self.dir);
        crate::process::drop_or_keep(self.tmp.take());
    }
}
