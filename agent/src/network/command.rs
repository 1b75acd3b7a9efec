//! Runs host programs (CNI plugins, `ip`, `iptables`) with a deadline and captured output.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::NetworkError;

/// What a finished program left behind.
#[derive(Debug)]
pub(crate) struct Output {
    pub success: bool,
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Plugins and tools get a fixed, minimal environment: a predictable PATH (the plugins call
/// `iptables`) and nothing inherited that could change their behaviour (stray `CNI_*`).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `program args…` with `env`, feeding `stdin`, killing it after `deadline`.
pub(crate) async fn run(
    program: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    stdin: Option<&[u8]>,
    deadline: Duration,
) -> Result<Output, NetworkError> {
    let display = program.display().to_string();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", PATH)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|source| NetworkError::Spawn {
        program: display.clone(),
        source,
    })?;
    let input = stdin.map(<[u8]>::to_vec);
    let mut pipe = child.stdin.take();
    let finished = async move {
        if let (Some(pipe), Some(input)) = (pipe.as_mut(), input) {
            // A plugin that exits without reading its config closes the pipe: the exit status
            // and its error result say more than EPIPE would, so ignore write errors here.
            let _ = pipe.write_all(&input).await;
        }
        drop(pipe);
        child.wait_with_output().await
    };
    let out = tokio::time::timeout(deadline, finished)
        .await
        .map_err(|_| NetworkError::Timeout {
            program: display.clone(),
            seconds: deadline.as_secs(),
        })?
        .map_err(|source| NetworkError::Spawn {
            program: display,
            source,
        })?;
    Ok(Output {
        success: out.status.success(),
        status: out.status.to_string(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Deadline for the small host tools (`ip`, `iptables`; the latter waits for the xtables lock).
pub(crate) const TOOL_DEADLINE: Duration = Duration::from_secs(30);

/// Runs a host tool and turns a failure exit into `NetworkError::Command`.
pub(crate) async fn tool(program: &str, args: &[&str]) -> Result<Output, NetworkError> {
    let out = run(Path::new(program), args, &[], None, TOOL_DEADLINE).await?;
    if out.success {
        Ok(out)
    } else {
        Err(NetworkError::Command {
            command: format!("{program} {}", args.join(" ")),
            status: out.status,
            stderr: out.stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdin_reaches_the_program_and_stdout_comes_back() {
        let out = run(
            Path::new("/bin/sh"),
            &["-c", "cat; echo \"$FOO\" >&2; exit 3"],
            &[("FOO", OsStr::new("bar"))],
            Some(b"hello"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert!(!out.success);
        assert_eq!(out.stdout, b"hello");
        assert_eq!(out.stderr, "bar");
        assert!(out.status.contains('3'), "{}", out.status);
    }

    #[tokio::test]
    async fn the_environment_is_not_inherited() {
        // HOME is set for the test process but must not reach the child.
        let out = run(
            Path::new("/bin/sh"),
            &["-c", "echo \"${HOME:-unset}:$PATH\""],
            &[],
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("unset:{PATH}")
        );
    }

    #[tokio::test]
    async fn a_hanging_program_is_killed_at_the_deadline() {
        let started = std::time::Instant::now();
        let err = run(
            Path::new("/bin/sleep"),
            &["30"],
            &[],
            None,
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, NetworkError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let err = tool("/nonexistent/iptables", &["-S"]).await.unwrap_err();
        assert!(matches!(err, NetworkError::Spawn { .. }), "{err}");
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn a_failing_tool_reports_command_and_stderr() {
        let err = tool("/bin/sh", &["-c", "echo nope >&2; exit 2"])
            .await
            .unwrap_err();
        match err {
            NetworkError::Command {
                command, stderr, ..
            } => {
                assert!(command.starts_with("/bin/sh -c"), "{command}");
                assert_eq!(stderr, "nope");
            }
            other => panic!("unexpected {other}"),
        }
    }
}
