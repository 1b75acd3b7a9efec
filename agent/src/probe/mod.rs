//! Container probes: the pure per-probe state machine ([`policy`]) and the executors that run
//! one diagnostic — exec (through [`ExecProber`], which the worker implements with the
//! runtime), httpGet, tcpSocket and grpc (done here, from the node, against the pod IP).
//!
//! A diagnostic that ran gives an [`Outcome`] (`Success` or `Failure`, with the output for the
//! `Unhealthy` event). A diagnostic that could not run gives a [`ProbeError`]; the caller counts
//! it as `Unknown` (no action), as upstream does.

mod grpc;
mod http;
pub mod policy;
mod tcp;

use std::error::Error as StdError;
use std::future::Future;
use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::{Container, Probe};
use berth_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use policy::{Due, ProbeGate, ProbeKind, ProbeResult, ProbeState, ProbeTiming};

/// What probes identify themselves as (`User-Agent`), as the kubelet of our API level does.
pub const USER_AGENT: &str = "kube-probe/1.34";

/// Runs a command inside a container for an exec probe or hook; the worker implements it
/// with the container runtime, so this module needs no runtime dependency.
pub trait ExecProber {
    type Error: StdError + Send + Sync + 'static;

    /// Runs `cmd` in `container`, returning its exit code and combined output, or `None` when
    /// the command ran longer than `timeout` and was stopped. As with the kubelet's
    /// `ExecSync`, the timeout bounds the command's run, not the runtime's work to start it:
    /// a slow containerd on a busy host is not a failing container.
    fn exec(
        &self,
        container: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<(i32, Vec<u8>)>, Self::Error>> + Send;
}

/// The result of a diagnostic that ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `Success` or `Failure`.
    pub result: ProbeResult,
    /// The handler's output or the failure's description.
    pub output: String,
}

impl Outcome {
    fn success(output: impl Into<String>) -> Self {
        Self {
            result: ProbeResult::Success,
            output: output.into(),
        }
    }

    fn failure(output: impl Into<String>) -> Self {
        Self {
            result: ProbeResult::Failure,
            output: output.into(),
        }
    }
}

/// Why a diagnostic could not run (its result is `Unknown`).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("missing probe handler")]
    NoHandler,
    #[error("couldn't find port: {port} in container {container}")]
    UnknownPortName { port: String, container: String },
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("the pod has no IP address yet")]
    NoPodIp,
    #[error("invalid HTTP header {0:?}")]
    InvalidHeader(String),
    #[error("invalid request target {0:?}")]
    InvalidUri(String),
    #[error("TLS client setup failed")]
    Tls(#[from] rustls::Error),
    #[error("exec probe could not run")]
    Exec(#[source] Box<dyn StdError + Send + Sync>),
    #[error("the probe did not finish within {0:?}")]
    TimedOut(std::time::Duration),
}

impl ProbeError {
    /// Whether trying again later may succeed without a spec change.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::NoPodIp | Self::Exec(_) | Self::TimedOut(_))
    }
}

/// The container a probe belongs to and where its pod can be reached.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub container: &'a Container,
    /// The pod IP (`status.podIP`), the default host for httpGet and tcpSocket and the only one
    /// for grpc.
    pub pod_ip: Option<&'a str>,
}

/// Runs one diagnostic of `probe` against `target`, bounded by the probe's `timeoutSeconds`.
pub async fn run<E: ExecProber>(
    probe: &Probe,
    target: Target<'_>,
    exec: &E,
) -> Result<Outcome, ProbeError> {
    let timeout = ProbeTiming::of(probe).timeout;
    if let Some(action) = &probe.exec {
        run_exec(
            exec,
            target.container,
            action.command.as_deref().unwrap_or_default(),
            timeout,
        )
        .await
    } else if let Some(action) = &probe.http_get {
        http::probe(action, target, timeout).await
    } else if let Some(action) = &probe.tcp_socket {
        tcp::probe(action, target, timeout).await
    } else if let Some(action) = &probe.grpc {
        grpc::probe(action, target, timeout).await
    } else {
        Err(ProbeError::NoHandler)
    }
}

async fn run_exec<E: ExecProber>(
    exec: &E,
    container: &Container,
    cmd: &[String],
    timeout: Duration,
) -> Result<Outcome, ProbeError> {
    match exec.exec(&container.name, cmd, timeout).await {
        Ok(None) => Ok(Outcome::failure(format!(
            "command {:?} timed out",
            cmd.join(" ")
        ))),
        Err(e) => Err(ProbeError::Exec(Box::new(e))),
        Ok(Some((code, output))) => {
            let output = String::from_utf8_lossy(&output).into_owned();
            Ok(if code == 0 {
                Outcome::success(output)
            } else {
                Outcome::failure(output)
            })
        }
    }
}

/// A probe port: a number, or the name of one of the container's ports.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, ProbeError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| i64::from(p.container_port))
            .ok_or_else(|| ProbeError::UnknownPortName {
                port: name.clone(),
                container: container.name.clone(),
            })?,
    };
    checked_port(number)
}

fn checked_port(number: i64) -> Result<u16, ProbeError> {
    u16::try_from(number)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(ProbeError::InvalidPort(number))
}

/// The host to dial: the action's, or the pod IP.
fn host<'a>(explicit: Option<&'a str>, target: Target<'a>) -> Result<&'a str, ProbeError> {
    explicit
        .filter(|h| !h.is_empty())
        .or(target.pod_ip)
        .ok_or(ProbeError::NoPodIp)
}

/// `host:port`, with brackets around an IPv6 address.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
pub(super) mod tests {
    /// A listener on a free loopback port, and the port.
    pub(in crate::probe) async fn listening() -> (tokio::net::TcpListener, u16) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    /// A loopback port nothing listens on (it was free a moment ago).
    pub(in crate::probe) async fn closed_port() -> u16 {
        listening().await.1
    }

    use std::io;

    use berth_api::k8s_openapi::api::core::v1::{ContainerPort, ExecAction};

    use super::*;

    pub(super) fn container_with_port(name: &str, port: i32) -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some(name.into()),
                container_port: port,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        }
    }

    /// An exec prober that answers from a script: exit code and output or an error, after the
    /// runtime took `.1` to start the command and the command ran for `.2`.
    struct Scripted(
        Result<(i32, &'static str), &'static str>,
        Duration,
        Duration,
    );

    impl ExecProber for Scripted {
        type Error = io::Error;

        async fn exec(
            &self,
            _container: &str,
            _cmd: &[String],
            timeout: Duration,
        ) -> Result<Option<(i32, Vec<u8>)>, io::Error> {
            tokio::time::sleep(self.1).await; // not ordering: a fake runtime this slow (virtual time)
            if self.2 > timeout {
                tokio::time::sleep(timeout).await; // not ordering: the command until it is stopped
                return Ok(None);
            }
            tokio::time::sleep(self.2).await; // not ordering: the command's run (virtual time)
            let (code, out) = self.0.map_err(io::Error::other)?;
            Ok(Some((code, out.as_bytes().to_vec())))
        }
    }

    fn exec_probe(cmd: &[&str]) -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(cmd.iter().map(|s| s.to_string()).collect()),
            }),
            ..Probe::default()
        }
    }

    fn target(c: &Container) -> Target<'_> {
        Target {
            container: c,
            pod_ip: Some("127.0.0.1"),
        }
    }

    #[tokio::test]
    async fn exec_exit_zero_is_success_and_nonzero_is_failure() {
        let c = Container::default();
        let probe = exec_probe(&["cat", "/tmp/healthy"]);
        let ok = Scripted(Ok((0, "fine")), Duration::ZERO, Duration::ZERO);
        let bad = Scripted(
            Ok((1, "cat: can't open '/tmp/healthy'")),
            Duration::ZERO,
            Duration::ZERO,
        );
        assert_eq!(
            run(&probe, target(&c), &ok).await.unwrap(),
            Outcome::success("fine")
        );
        let failed = run(&probe, target(&c), &bad).await.unwrap();
        assert_eq!(failed.result, ProbeResult::Failure);
        assert!(failed.output.contains("can't open"));
    }

    #[tokio::test(start_paused = true)]
    async fn exec_that_outlives_the_timeout_fails_as_timed_out() {
        let c = Container::default();
        let slow = Scripted(Ok((0, "")), Duration::ZERO, Duration::from_secs(5));
        let out = run(&exec_probe(&["sleep", "5"]), target(&c), &slow)
            .await
            .unwrap();
        assert_eq!(out, Outcome::failure("command \"sleep 5\" timed out"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_runtime_slow_to_start_the_command_is_not_a_timeout() {
        // The default timeout is 1 s; a busy containerd took 3 s to start a quick `cat`.
        let c = Container::default();
        let busy = Scripted(Ok((0, "ok")), Duration::from_secs(3), Duration::ZERO);
        let out = run(&exec_probe(&["cat", "/tmp/started"]), target(&c), &busy)
            .await
            .unwrap();
        assert_eq!(out, Outcome::success("ok"));
    }

    #[tokio::test]
    async fn exec_that_cannot_run_is_an_error_not_a_failure() {
        let c = Container::default();
        let broken = Scripted(Err("no such task"), Duration::ZERO, Duration::ZERO);
        let err = run(&exec_probe(&["true"]), target(&c), &broken)
            .await
            .unwrap_err();
        assert!(matches!(err, ProbeError::Exec(_)) && err.is_transient());
    }

    #[tokio::test]
    async fn a_probe_without_handler_is_an_error() {
        let c = Container::default();
        let none = Scripted(Ok((0, "")), Duration::ZERO, Duration::ZERO);
        let err = run(&Probe::default(), target(&c), &none).await.unwrap_err();
        assert!(matches!(err, ProbeError::NoHandler));
    }

    #[test]
    fn ports_resolve_by_number_or_by_container_port_name() {
        let c = container_with_port("http", 8080);
        assert_eq!(resolve_port(&IntOrString::Int(81), &c).unwrap(), 81);
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c).unwrap(),
            8080
        );
        assert!(matches!(
            resolve_port(&IntOrString::String("grpc".into()), &c),
            Err(ProbeError::UnknownPortName { .. })
        ));
        assert!(matches!(
            resolve_port(&IntOrString::Int(70000), &c),
            Err(ProbeError::InvalidPort(70000))
        ));
        assert!(matches!(
            resolve_port(&IntOrString::Int(0), &c),
            Err(ProbeError::InvalidPort(0))
        ));
    }

    #[test]
    fn host_defaults_to_the_pod_ip_and_ipv6_gets_brackets() {
        let c = Container::default();
        let t = Target {
            container: &c,
            pod_ip: Some("10.42.0.7"),
        };
        assert_eq!(host(None, t).unwrap(), "10.42.0.7");
        assert_eq!(host(Some(""), t).unwrap(), "10.42.0.7");
        assert_eq!(host(Some("example.test"), t).unwrap(), "example.test");
        let no_ip = Target { pod_ip: None, ..t };
        assert!(matches!(host(None, no_ip), Err(ProbeError::NoPodIp)));
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("10.42.0.7", 80), "10.42.0.7:80");
    }
}
