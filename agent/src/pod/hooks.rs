//! Lifecycle hooks (postStart, preStop): an exec in the container, or an HTTP GET against it.

use super::ports::ContainerRuntime;
use crate::runtime::ContainerId;
use berth_api::k8s_openapi::api::core::v1::LifecycleHandler;
use berth_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs a hook; the error is the event message.
pub async fn run(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    hook: &LifecycleHandler,
    pod_ip: &str,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(exec) = &hook.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        return match runtime.exec_output(id, &cmd, timeout).await {
            Ok((0, _)) => Ok(()),
            Ok((code, out)) => Err(format!(
                "Exec lifecycle hook ({cmd:?}) for Container in Pod failed - error: command '{}' exited with {code}: {}",
                cmd.join(" "),
                String::from_utf8_lossy(&out)
            )),
            Err(e) => Err(format!("Exec lifecycle hook ({cmd:?}) failed - error: {e}")),
        };
    }
    if let Some(http) = &hook.http_get {
        let host = http
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| pod_ip.to_string());
        let port = match &http.port {
            IntOrString::Int(p) => *p,
            IntOrString::String(s) => s.parse().unwrap_or(80),
        };
        let path = http.path.clone().unwrap_or_else(|| "/".to_string());
        let request = async {
            let mut s = tokio::net::TcpStream::connect((host.as_str(), port as u16))
                .await
                .map_err(|e| e.to_string())?;
            let req = format!(
                "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: berth-agent\r\n\r\n"
            );
            s.write_all(req.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
            let status_line = String::from_utf8_lossy(&buf)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            let code: u16 = status_line
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            if (200..400).contains(&code) {
                Ok(())
            } else {
                Err(format!("HTTP status {code}"))
            }
        };
        return match tokio::time::timeout(timeout, request).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!(
                "HTTP lifecycle hook ({path}) for Container in Pod failed - error: {e}"
            )),
            Err(_) => Err(format!("HTTP lifecycle hook ({path}) timed out")),
        };
    }
    if let Some(sleep) = &hook.sleep {
        tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64).min(timeout)).await;
    }
    Ok(())
}
