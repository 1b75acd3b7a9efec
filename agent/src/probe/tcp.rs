//! tcpSocket probes: success iff a TCP connection to the port opens within the timeout.

use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::TCPSocketAction;
use tokio::net::TcpStream;

use super::{Outcome, ProbeError, Target, host, join_host_port, resolve_port};

pub(super) async fn probe(
    action: &TCPSocketAction,
    target: Target<'_>,
    timeout: Duration,
) -> Result<Outcome, ProbeError> {
    let port = resolve_port(&action.port, target.container)?;
    let host = host(action.host.as_deref(), target)?;
    let addr = join_host_port(host, port);
    Ok(
        match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
            Ok(Ok(_connection)) => Outcome::success(""),
            Ok(Err(e)) => Outcome::failure(format!("dial tcp {addr}: {e}")),
            Err(_) => Outcome::failure(format!("dial tcp {addr}: i/o timeout")),
        },
    )
}

#[cfg(test)]
mod tests {
    use berth_api::k8s_openapi::api::core::v1::Container;
    use berth_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::probe::ProbeResult;
    use crate::probe::tests::container_with_port;

    fn action(port: IntOrString) -> TCPSocketAction {
        TCPSocketAction { host: None, port }
    }

    fn target(c: &Container) -> Target<'_> {
        Target {
            container: c,
            pod_ip: Some("127.0.0.1"),
        }
    }

    #[tokio::test]
    async fn an_open_port_is_success() {
        let (_listener, port) = super::super::tests::listening().await;
        let c = container_with_port("probe", i32::from(port));
        let one_second = Duration::from_secs(1);
        let by_number = action(IntOrString::Int(port.into()));
        let out = probe(&by_number, target(&c), one_second).await.unwrap();
        assert_eq!(out.result, ProbeResult::Success);
        let by_name = action(IntOrString::String("probe".into()));
        let out = probe(&by_name, target(&c), one_second).await.unwrap();
        assert_eq!(out.result, ProbeResult::Success);
    }

    #[tokio::test]
    async fn a_closed_port_is_failure() {
        let port = super::super::tests::closed_port().await;
        let c = Container::default();
        let out = probe(
            &action(IntOrString::Int(port.into())),
            target(&c),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(out.result, ProbeResult::Failure);
        assert!(
            out.output
                .starts_with(&format!("dial tcp 127.0.0.1:{port}: ")),
            "{}",
            out.output
        );
    }

    #[tokio::test]
    async fn the_host_field_overrides_the_pod_ip() {
        let (_listener, port) = super::super::tests::listening().await;
        let c = Container::default();
        let a = TCPSocketAction {
            host: Some("127.0.0.1".into()),
            port: IntOrString::Int(port.into()),
        };
        let elsewhere = Target {
            container: &c,
            pod_ip: Some("192.0.2.1"),
        };
        let out = probe(&a, elsewhere, Duration::from_secs(1)).await.unwrap();
        assert_eq!(out.result, ProbeResult::Success);
    }
}
