//! Child processes for the tests: run a command to completion under a deadline and keep what it
//! printed (`Run`), or keep one running and read its stdout line by line with deadlines
//! (`LineChild`, for `kubectl get -w`). Also the `LogTail` that every failure message carries.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The log files of the components a test started; `render()` gives their last lines for a
/// failure message.
#[derive(Debug, Clone, Default)]
pub struct LogTail {
    pub files: Vec<(String, PathBuf)>,
    pub lines: usize,
}

impl LogTail {
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (label, path) in &self.files {
            let text =
                std::fs::read_to_string(path).unwrap_or_else(|e| format!("<unreadable: {e}>"));
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(self.lines);
            let _ = writeln!(
                out,
                "----- {label}: last {} of {} lines of {} -----",
                all.len() - from,
                all.len(),
                path.display()
            );
            for line in &all[from..] {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }
}

/// A finished (or killed) command and everything it printed.
#[derive(Debug, Clone)]
pub struct Run {
    pub command: String,
    /// `None` when the harness killed it at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Its stdout when it succeeded, else [`Run::describe`]: a probe for the `wait` pollers.
    pub fn stdout_if_ok(self) -> Result<String, String> {
        if self.success() {
            Ok(self.stdout)
        } else {
            Err(self.describe())
        }
    }

    /// Everything a reader of a failure needs: the command, how it ended, stdout and stderr.
    pub fn describe(&self) -> String {
        let ended = match self.status {
            Some(s) => format!("{s}"),
            None => format!(
                "killed by the harness after {:.1?} (deadline)",
                self.elapsed
            ),
        };
        format!(
            "command: {}\nended: {ended} after {:.1?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Asserts that the command's stderr contains `needle` (kubectl's error message, say);
    /// the failure shows the whole run.
    #[track_caller]
    pub fn assert_stderr_has(&self, needle: &str) {
        assert!(self.stderr.contains(needle), "{}", self.describe());
    }

    /// Asserts that the command's stdout contains `needle`; the failure shows the whole run.
    #[track_caller]
    pub fn assert_stdout_has(&self, needle: &str) {
        assert!(self.stdout.contains(needle), "{}", self.describe());
    }
}

/// Shell-like rendering of a command line, for messages.
pub fn command_line(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$;|&<>(){}*".contains(c)) {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

fn drain(mut from: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `cmd` with `stdin` fed to it, killing it if it is still running after `timeout`.
/// Spawning failure panics (a missing tool is a loud failure, never a pass).
pub fn run(mut cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> Run {
    let command = command_line(&cmd);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
    let feeder = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => {
            let bytes = bytes.to_vec();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            }))
        }
        _ => None,
    };
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let status = wait_with_deadline(&mut child, timeout);
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let collect = |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Run {
        command,
        status,
        stdout: collect(out),
        stderr: collect(err),
        elapsed: start.elapsed(),
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// SIGKILLs and reaps the child in `slot`, if there is one: a component stopped with nothing
/// graceful (a test's crash, or teardown).
pub fn kill_and_reap(slot: &mut Option<Child>) {
    if let Some(mut child) = slot.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The exit status of the child in `slot` if it has exited (the slot is then emptied): for
/// failing a start early instead of at the deadline.
pub fn exited(slot: &mut Option<Child>) -> Option<ExitStatus> {
    let status = slot
        .as_mut()
        .and_then(|child| child.try_wait().ok().flatten())?;
    *slot = None;
    Some(status)
}

/// Lets a component's scratch directory go, or keeps it for a post-mortem when the run sets
/// `BERTH_KEEP_TMP` (saying where it is).
pub fn drop_or_keep(tmp: Option<tempfile::TempDir>) {
    if let Some(tmp) = tmp
        && std::env::var_os("BERTH_KEEP_TMP").is_some()
    {
        eprintln!("berth-tests: kept {}", tmp.keep().display());
    }
}

/// Waits for `child` to exit; kills it (SIGKILL) and returns `None` once `timeout` has passed.
pub fn wait_with_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(e) => panic!("cannot wait for child {}: {e}", child.id()),
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// A running child whose stdout is read line by line, each with a deadline.
pub struct LineChild {
    command: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    logs: LogTail,
    closed: bool,
}

impl LineChild {
    /// Starts `cmd` with stdout and stderr captured; `logs` is rendered into failure messages.
    pub fn spawn(mut cmd: Command, logs: LogTail) -> LineChild {
        let command = command_line(&cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
        let (tx, lines) = channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(err) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(mut s) = sink.lock() {
                        s.push_str(&line);
                        s.push('\n');
                    }
                }
            });
        }
        LineChild {
            command,
            child,
            lines,
            seen: Vec::new(),
            stderr,
            logs,
            closed: false,
        }
    }

    /// The next stdout line, or `None` if none arrives within `timeout` or stdout closed.
    pub fn next_line(&mut self, timeout: Duration) -> Option<String> {
        if self.closed {
            return None;
        }
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                None
            }
        }
    }

    /// Reads lines until one satisfies `matches`, skipping others; panics after `timeout` with
    /// every line seen so far, the child's stderr and the component logs.
    pub fn expect_line(
        &mut self,
        timeout: Duration,
        what: &str,
        matches: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(line) if matches(&line) => return line,
                Some(_) => {}
                None => panic!(
                    "{} waiting for a line: {what}\n{}",
                    if self.closed {
                        "stdout closed"
                    } else {
                        "timed out"
                    },
                    self.describe()
                ),
            }
        }
    }

    /// Lines read so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Command, lines seen, stderr so far and the log tail.
    pub fn describe(&self) -> String {
        let stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        format!(
            "command: {}\n--- stdout lines seen ({}) ---\n{}\n--- stderr ---\n{}\n{}",
            self.command,
            self.seen.len(),
            self.seen.join("\n"),
            stderr,
            self.logs.render()
        )
    }
}

impl Drop for LineChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_keeps_stdout_stderr_and_the_exit_status() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat; echo oops >&2; exit 3"]);
        let run = run(cmd, Some(b"hello\n"), Duration::from_secs(10));
        assert_eq!(run.stdout, "hello\n");
        assert_eq!(run.stderr, "oops\n");
        assert_eq!(run.status.and_then(|s| s.code()), Some(3));
        assert!(!run.success());
    }

    #[test]
    fn run_kills_a_command_at_its_deadline() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec tail -f /dev/null"]);
        let run = run(cmd, None, Duration::from_millis(300));
        assert!(run.status.is_none(), "{}", run.describe());
        assert!(run.describe().contains("killed by the harness"));
    }

    #[test]
    fn command_line_quotes_arguments_with_spaces() {
        let mut cmd = Command::new("kubectl");
        cmd.args(["get", "pods", "-l", "app in (a,b)"]);
        assert_eq!(command_line(&cmd), "kubectl get pods -l 'app in (a,b)'");
    }

    #[test]
    fn line_child_reads_lines_with_deadlines() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo one; echo two; exec tail -f /dev/null"]);
        let mut child = LineChild::spawn(cmd, LogTail::default());
        let line = child.expect_line(Duration::from_secs(10), "two", |l| l == "two");
        assert_eq!(line, "two");
        assert_eq!(child.seen(), ["one", "two"]);
        assert_eq!(child.next_line(Duration::from_millis(100)), None);
    }
}
