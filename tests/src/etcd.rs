//! A real etcd cluster for the tests: members of Debian's `etcd-server` on free loopback ports,
//! each with its own data directory under one temporary directory; members can be SIGKILLed
//! and started again on the same ports and data; every member is killed by PID on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::host::{free_port, require_tool, unique_suffix};
use crate::http::http_get;
use crate::wait::ok_if;
use crate::wait::wait_for_with;

/// How long a member (or the cluster's quorum) may take to become healthy.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How many times a new cluster is started on fresh ports when a member exits while starting.
/// `free_port` only says a port was free a moment ago: another test's outgoing connection can
/// take it as its ephemeral port before etcd binds it, and etcd then exits at once.
const START_ATTEMPTS: usize = 3;

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running etcd cluster.
pub struct EtcdCluster {
    tmp: TempDir,
    token: String,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts `size` members and waits until every one reports itself healthy.
    pub fn start(size: usize) -> EtcdCluster {
        EtcdCluster::start_on(size, free_port)
    }

    /// [`EtcdCluster::start`] with the ports taken from `next_port` (a test of the harness hands
    /// out a taken port to see a clash survived).
    pub fn start_on(size: usize, mut next_port: impl FnMut() -> u16) -> EtcdCluster {
        require_tool("etcd");
        let tmp = tempfile::Builder::new()
            .prefix("berth-etcd-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let mut cluster = EtcdCluster {
            tmp,
            token: String::new(),
            members: Vec::new(),
        };
        for attempt in 1..=START_ATTEMPTS {
            cluster.token = format!("berth-{}", unique_suffix());
            cluster.members = (0..size)
                .map(|i| Member {
                    name: format!("a{attempt}m{i}"),
                    client_port: next_port(),
                    peer_port: next_port(),
                    child: None,
                })
                .collect();
            for i in 0..size {
                cluster.spawn(i);
            }
            let exited = (0..size).find(|&i| !cluster.wait_healthy_or_exit(i));
            match exited {
                None => return cluster,
                Some(i) if attempt < START_ATTEMPTS => {
                    eprintln!(
                        "etcd member {i} exited while starting (attempt {attempt}); \
                         starting a new cluster on fresh ports:\n{}",
                        cluster.log_tail(i)
                    );
                    for j in 0..size {
                        cluster.kill(j);
                    }
                }
                Some(i) => panic!(
                    "etcd member {i} exited while starting, {START_ATTEMPTS} times:\n{}",
                    cluster.log_tail(i)
                ),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The client URLs, comma-separated (`--datastore-endpoint`).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// One member's client URL.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    /// One member's client port.
    pub fn client_port(&self, i: usize) -> u16 {
        self.members[i].client_port
    }

    pub fn size(&self) -> usize {
        self.members.len()
    }

    fn log(&self, i: usize) -> PathBuf {
        self.tmp
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    /// The last lines of a member's log.
    pub fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(self.log(i)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn spawn(&mut self, i: usize) {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))
            .unwrap_or_else(|e| panic!("cannot open the etcd log: {e}"));
        let m = &self.members[i];
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(self.tmp.path().join(&m.name))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start etcd: {e}"));
        self.members[i].child = Some(child);
    }

    fn wait_healthy(&mut self, i: usize) {
        if !self.wait_healthy_or_exit(i) {
            panic!(
                "etcd member {i} exited while starting:\n{}",
                self.log_tail(i)
            );
        }
    }

    /// Waits until member `i` is healthy (`true`) or its process has exited (`false`); panics
    /// with the member's log tail if neither happens in time.
    fn wait_healthy_or_exit(&mut self, i: usize) -> bool {
        let port = self.members[i].client_port;
        let mut child = self.members[i].child.take();
        let healthy = wait_for_with(
            START_DEADLINE,
            &format!("etcd member {i} to be healthy"),
            || self.log_tail(i),
            || {
                if let Some(c) = child.as_mut()
                    && let Ok(Some(_)) = c.try_wait()
                {
                    return Ok(false);
                }
                let r = http_get("127.0.0.1", port, "/health")?;
                ok_if(
                    r.status == 200 && r.body.contains("true"),
                    format!("{} {}", r.status, r.body),
                )
                .map(|()| true)
            },
        );
        self.members[i].child = child;
        healthy
    }

    /// SIGKILLs member `i`.
    pub fn kill(&mut self, i: usize) {
        crate::process::kill_and_reap(&mut self.members[i].child);
    }

    /// Starts member `i` again on its data and ports, and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        self.wait_healthy(i);
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
