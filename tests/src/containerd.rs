//! A private containerd for one test: its own root, state, gRPC and ttrpc sockets under a
//! temporary directory, CRI disabled, driven with `ctr -a SOCK -n NS`. `restart()` stops it by
//! PID and starts it again on the same directories (shims and containers keep running). Drop
//! removes every task and container it holds, kills leftover shims and their processes, stops
//! the daemon and cleans what containerd 1.6 keeps outside its root (runc state, shim sockets,
//! cgroups under `/<namespace>`).
//!
//! [`Containerd::start_on_small_fs`] puts its root (content store, snapshots, metadata) on a
//! size-limited tmpfs of its own, so a test can fill the image filesystem the agent's image GC
//! watches without touching the host's disk; Drop (and a later cluster's sweep of an abandoned
//! record, which lists this directory) unmounts it.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::host::{TOOL_DEADLINE, require_root, require_tool};
use crate::process::{LogTail, Run, run, wait_with_deadline};
use crate::sweep;
use crate::wait::wait_for_with;

/// How long containerd may take to answer on its socket.
const START_DEADLINE: Duration = Duration::from_secs(20);
/// How long a SIGTERM'd containerd may take to exit before it gets SIGKILL.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Where containerd 1.6 keeps state outside `root`/`state` whatever its config says.
const RUNC_ROOT: &str = "/run/containerd/runc";
const SHIM_SOCKETS: &str = "/run/containerd/s";
/// Directories that may not exist on the host yet and that containerd, runc or the agent create.
const RUN_DIRS: [&str; 5] = [
    "/run/containerd/runc",
    "/run/containerd/s",
    "/run/containerd/fifo",
    "/run/containerd",
    "/run/berth",
];

/// One task as `ctr tasks ls` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub id: String,
    pub pid: u32,
    /// `RUNNING`, `STOPPED`, `CREATED`, `PAUSED`.
    pub status: String,
}

/// A running (or stopped) private containerd.
pub struct Containerd {
    tmp: Option<TempDir>,
    dir: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
    starts: u32,
    /// Entries of [`RUN_DIRS`] that did not exist before this instance started.
    new_run_dirs: Vec<PathBuf>,
}

impl Containerd {
    /// Starts containerd on a fresh temporary directory and waits until it answers.
    pub fn start() -> Containerd {
        Containerd::start_with_root_size(None)
    }

    /// Starts containerd with its root on a tmpfs of `size` bytes (a small image filesystem).
    pub fn start_on_small_fs(size: u64) -> Containerd {
        Containerd::start_with_root_size(Some(size))
    }

    /// [`Containerd::start`], with the root on a tmpfs of that many bytes when given.
    pub fn start_with_root_size(root_size: Option<u64>) -> Containerd {
        require_root();
        for t in ["containerd", "containerd-shim-runc-v2", "runc", "ctr"] {
            require_tool(t);
        }
        let new_run_dirs = RUN_DIRS
            .iter()
            .map(PathBuf::from)
            .filter(|p| !p.exists())
            .collect();
        let tmp = tempfile::Builder::new()
            .prefix("berth-containerd-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let dir = tmp.path().to_path_buf();
        let socket = dir.join("containerd.sock");
        let config = format!(
            "version = 2\n\
             root = \"{root}\"\n\
             state = \"{state}\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [debug]\n  level = \"warn\"\n\
             [grpc]\n  address = \"{sock}\"\n\
             [ttrpc]\n  address = \"{sock}.ttrpc\"\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{opt}\"\n",
            root = dir.join("root").display(),
            state = dir.join("state").display(),
            sock = socket.display(),
            opt = dir.join("opt").display(),
        );
        std::fs::write(dir.join("config.toml"), config)
            .unwrap_or_else(|e| panic!("cannot write the containerd config: {e}"));
        let mut c = Containerd {
            tmp: Some(tmp),
            dir,
            socket,
            child: None,
            starts: 0,
            new_run_dirs,
        };
        // Mounted once `c` exists: a panic from here on drops it, which unmounts.
        if let Some(size) = root_size {
            c.mount_small_root(size);
        }
        c.spawn_and_wait();
        c
    }

    /// Mounts a tmpfs of `size` bytes on the root directory.
    fn mount_small_root(&self, size: u64) {
        use nix::mount::{MsFlags, mount};
        let root = self.root();
        std::fs::create_dir_all(&root)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
        let options = format!("size={size},mode=0711");
        mount(
            Some("tmpfs"),
            &root,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .unwrap_or_else(|e| panic!("cannot mount a tmpfs on {}: {e}", root.display()));
    }

    /// containerd's root: content store, snapshots and metadata.
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// The gRPC socket (`--containerd-socket` for agents, `ctr -a`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The instance's directory (config, root, state, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }

    /// The daemon's log, for failure messages.
    pub fn logs(&self) -> LogTail {
        LogTail {
            files: vec![("containerd".into(), self.log_path())],
            lines: 30,
        }
    }

    fn spawn_and_wait(&mut self) {
        self.starts += 1;
        let _ = std::fs::remove_file(&self.socket);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot open the containerd log: {e}"));
        let _ = writeln!(
            log,
            "===== berth-tests: containerd start #{} =====",
            self.starts
        );
        let mut cmd = Command::new(require_tool("containerd"));
        cmd.arg("--config")
            .arg(self.dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start containerd: {e}"));
        self.child = Some(child);
        let logs = self.logs();
        let what = format!("containerd to answer on {}", self.socket.display());
        wait_for_with(
            START_DEADLINE,
            &what,
            || logs.render(),
            || {
                if let Some(status) = crate::process::exited(&mut self.child) {
                    panic!(
                        "containerd exited with {status} during start\n{}",
                        self.logs().render()
                    );
                }
                if UnixStream::connect(&self.socket).is_ok()
                    && self.ctr("default", &["version"]).success()
                {
                    Ok(())
                } else {
                    Err("not answering yet")
                }
            },
        );
    }

    fn stop_daemon(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            if wait_with_deadline(&mut child, STOP_DEADLINE).is_none() {
                eprintln!("berth-tests: containerd ignored SIGTERM for {STOP_DEADLINE:?}; killed");
            }
        }
    }

    /// Stops containerd (SIGTERM, by PID) and starts it again with the same config and
    /// directories; shims and containers keep running meanwhile.
    pub fn restart(&mut self) {
        self.stop_daemon();
        self.spawn_and_wait();
    }

    /// `ctr -a SOCK -n NAMESPACE ARGS`, whatever the outcome.
    pub fn ctr(&self, namespace: &str, args: &[&str]) -> Run {
        let mut cmd = Command::new(require_tool("ctr"));
        cmd.arg("-a")
            .arg(&self.socket)
            .arg("-n")
            .arg(namespace)
            .args(args);
        run(cmd, None, TOOL_DEADLINE)
    }

    /// `ctr …` that must succeed; returns stdout.
    pub fn ctr_ok(&self, namespace: &str, args: &[&str]) -> String {
        let r = self.ctr(namespace, args);
        if !r.success() {
            panic!("ctr failed\n{}\n{}", r.describe(), self.logs().render());
        }
        r.stdout
    }

    /// The namespaces this containerd holds.
    pub fn namespaces(&self) -> Vec<String> {
        lines(&self.ctr_ok("default", &["namespaces", "ls", "-q"]))
    }

    /// Container ids in `namespace`.
    pub fn containers(&self, namespace: &str) -> Vec<String> {
        lines(&self.ctr_ok(namespace, &["containers", "ls", "-q"]))
    }

    /// Tasks in `namespace`.
    pub fn tasks(&self, namespace: &str) -> Vec<Task> {
        parse_tasks(&self.ctr_ok(namespace, &["tasks", "ls"]))
    }

    /// Image names in `namespace`.
    pub fn images(&self, namespace: &str) -> Vec<String> {
        lines(&self.ctr_ok(namespace, &["images", "ls", "-q"]))
    }

    /// Kills and deletes every task and deletes every container of `namespace`; returns the
    /// container ids removed. Best effort: failures are printed (this runs from `Drop`).
    pub fn clean_namespace(&self, namespace: &str) -> Vec<String> {
        let tasks = match self.ctr(namespace, &["tasks", "ls"]) {
            r if r.success() => parse_tasks(&r.stdout),
            r => {
                eprintln!("berth-tests: cannot list tasks\n{}", r.describe());
                Vec::new()
            }
        };
        for t in &tasks {
            if t.status != "STOPPED" {
                let _ = self.ctr(namespace, &["tasks", "kill", "-a", "-s", "SIGKILL", &t.id]);
            }
        }
        for t in &tasks {
            let r = self.ctr(namespace, &["tasks", "delete", "-f", &t.id]);
            if !r.success() && !r.stderr.contains("not found") {
                eprintln!("berth-tests: cannot delete task {}\n{}", t.id, r.describe());
            }
        }
        let ids = match self.ctr(namespace, &["containers", "ls", "-q"]) {
            r if r.success() => lines(&r.stdout),
            _ => Vec::new(),
        };
        for id in &ids {
            let r = self.ctr(namespace, &["containers", "delete", id]);
            if !r.success() {
                eprintln!(
                    "berth-tests: cannot delete container {id}\n{}",
                    r.describe()
                );
            }
        }
        ids
    }

    /// Shims started by this containerd (their command line names its socket).
    pub fn shims(&self) -> Vec<(i32, String)> {
        let sock = self.socket.to_string_lossy().into_owned();
        sweep::processes_matching(&["containerd-shim", &sock])
    }

    /// Kills the shims of this containerd and every process below them (the containers they
    /// reap), removing the sockets they leave behind.
    fn kill_shims(&self) {
        for (pid, cmdline) in self.shims() {
            for child in descendants(pid) {
                sweep::kill_pid(child);
            }
            sweep::kill_pid(pid);
            if let Some(sock) = shim_socket(&cmdline) {
                let _ = std::fs::remove_file(sock);
            }
        }
    }
}

/// The non-empty lines of `text`, trimmed.
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses `ctr tasks ls` (`TASK PID STATUS` and a header).
pub fn parse_tasks(text: &str) -> Vec<Task> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let id = w.next()?.to_string();
            let pid = w.next()?.parse().ok()?;
            let status = w.next()?.to_string();
            Some(Task { id, pid, status })
        })
        .collect()
}

/// Every process below `pid` (children, grandchildren …), deepest last.
fn descendants(pid: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let ppid = std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().nth(1))
                        .and_then(|v| v.parse::<i32>().ok())
                });
            if let Some(ppid) = ppid {
                parent_of.push((p, ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (child, _) in parent_of.iter().filter(|(_, pp)| *pp == p) {
            out.push(*child);
            frontier.push(*child);
        }
    }
    out
}

/// The socket a runc v2 shim of containerd 1.6 listens on:
/// `/run/containerd/s/<sha256 of "<address>/<namespace>/<id>">`.
pub fn shim_socket(cmdline: &str) -> Option<PathBuf> {
    let args: Vec<&str> = cmdline.split_whitespace().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1).copied())
    };
    let key = format!(
        "{}/{}/{}",
        arg("-address")?,
        arg("-namespace")?,
        arg("-id")?
    );
    let hex: String = Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(Path::new(SHIM_SOCKETS).join(hex))
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let mut namespaces = if self.child.is_some() {
            match self.ctr("default", &["namespaces", "ls", "-q"]) {
                r if r.success() => lines(&r.stdout),
                _ => Vec::new(),
            }
        } else {
            Vec::new()
        };
        // Namespaces with task state, in case containerd is down or did not answer.
        if let Ok(entries) = std::fs::read_dir(self.dir.join("state/io.containerd.runtime.v2.task"))
        {
            namespaces.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
        namespaces.sort();
        namespaces.dedup();
        if self.child.is_some() {
            for ns in &namespaces {
                self.clean_namespace(ns);
            }
        }
        self.kill_shims();
        self.stop_daemon();
        sweep::unmount_under(&self.dir);
        for ns in &namespaces {
            sweep::kill_and_remove_cgroups(ns);
            let _ = std::fs::remove_dir_all(Path::new(RUNC_ROOT).join(ns));
            let _ = std::fs::remove_dir_all(Path::new("/run/berth").join(ns));
        }
        // Directories that were not there before go if nothing else uses them (rmdir only
        // removes empty ones; the list runs from the deepest up).
        for dir in &self.new_run_dirs {
            let _ = std::fs::remove_dir(dir);
        }
        crate::process::drop_or_keep(self.tmp.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctr_task_listings_are_parsed() {
        let text =
            "TASK      PID     STATUS    \nweb-1     4242    RUNNING\nold       0       STOPPED\n";
        assert_eq!(
            parse_tasks(text),
            [
                Task {
                    id: "web-1".into(),
                    pid: 4242,
                    status: "RUNNING".into()
                },
                Task {
                    id: "old".into(),
                    pid: 0,
                    status: "STOPPED".into()
                }
            ]
        );
    }

    #[test]
    fn the_shim_socket_is_the_hash_of_address_namespace_and_id() {
        let cmdline = "/usr/bin/containerd-shim-runc-v2 -namespace ns1 -id c1 -address /tmp/x/containerd.sock";
        let expected: String = Sha256::digest(b"/tmp/x/containerd.sock/ns1/c1")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            shim_socket(cmdline),
            Some(Path::new(SHIM_SOCKETS).join(expected))
        );
        assert_eq!(shim_socket("/usr/bin/containerd-shim-runc-v2 -id c1"), None);
    }
}
