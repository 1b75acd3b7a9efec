//! A pod's network namespace seen from the test process, for the network benchmarks: finding
//! it, running a host program in it (`nsenter --net`), and TCP throughput between two
//! (`iperf3`, Debian's package), so what is measured is the pods' own path.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::host::require_tool;
use crate::{Cluster, secs};

/// Where the agents mount pods' network namespaces (`berth-<node>-<instance>-<uid>`).
const NETNS_DIR: &str = "/var/run/netns";
/// The port of the one-off iperf3 servers.
const IPERF_PORT: &str = "5201";

/// The named netns of `pod` (the pod object as the API returned it), found by its uid.
pub fn pod_netns(pod: &Value) -> PathBuf {
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    assert!(!uid.is_empty(), "the pod has no uid: {pod}");
    let dir = PathBuf::from(NETNS_DIR);
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(uid))
        .unwrap_or_else(|| panic!("no netns for pod {uid} in {}", dir.display()))
}

/// A command that runs the host's `program` inside `netns` (arguments still to add).
pub fn netns_command(netns: &Path, program: &str) -> Command {
    let mut cmd = Command::new(require_tool("nsenter"));
    cmd.arg(format!("--net={}", netns.display()))
        .arg(require_tool(program));
    cmd
}

/// A one-off iperf3 server, killed on drop.
struct Iperf(Child);

impl Drop for Iperf {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Gbit/s from `from` to `to_ip`, over `seconds`, to an iperf3 server started in `to`.
pub fn throughput(c: &Cluster, from: &Path, to: &Path, to_ip: &str, seconds: usize) -> f64 {
    let _server = Iperf(
        netns_command(to, "iperf3")
            .args(["-s", "-1", "-p", IPERF_PORT])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("iperf3 -s: {e}")),
    );
    // The server may not listen yet: a refused run is retried (it does not use up `-1`).
    let v: Value = c.wait_for(secs(30), &format!("iperf3 to {to_ip}"), || {
        let out = netns_command(from, "iperf3")
            .args([
                "-c",
                to_ip,
                "-p",
                IPERF_PORT,
                "-t",
                &seconds.to_string(),
                "-J",
            ])
            .output()
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        match v["error"].as_str() {
            None if out.status.success() => Ok(v),
            Some(error) => Err(error.to_string()),
            None => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    });
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9
}
