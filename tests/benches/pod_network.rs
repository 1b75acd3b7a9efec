//! Pod network benchmark on the multi-host test bed (prints figures, never fails on them): TCP
//! throughput (`iperf3`, Debian's package) and round-trip latency (`ping`) from a pod on host 0
//! to a pod on host 1 (same segment: host-gw) and to a pod on host 3 (behind the router:
//! VXLAN), next to the same between the hosts themselves in the same run. The tools run in the
//! pods' network namespaces (`nsenter --net`), so the path measured is the pods' own: veth,
//! bridge, route (and tunnel). `BERTH_BENCH_SECONDS` sets each iperf3 run's length (default 5).
//! The bed's "wires" are veths on one machine: the figures say what the pod path costs
//! relative to the host path, not what a physical network would carry.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use berth_tests::bench::env_usize;
use berth_tests::host::require_tool;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::Value;

/// The named netns of the pod with `uid` (`/var/run/netns/berth-<node>-<instance>-<uid>`).
fn pod_netns(uid: &str) -> PathBuf {
    let dir = PathBuf::from("/var/run/netns");
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(uid))
        .unwrap_or_else(|| panic!("no netns for pod {uid} in {}", dir.display()))
}

fn in_netns(netns: &Path, program: &str) -> Command {
    let mut cmd = Command::new(require_tool("nsenter"));
    cmd.arg(format!("--net={}", netns.display()))
        .arg(require_tool(program));
    cmd
}

/// A one-off iperf3 server in `netns`, killed on drop.
struct Server(Child);

impl Server {
    fn start(netns: &Path, port: u16) -> Server {
        let child = in_netns(netns, "iperf3")
            .args(["-s", "-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("iperf3 -s: {e}"));
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Gbit/s from `from` to `to_ip` (a server started in `to`).
fn throughput(c: &Cluster, from: &Path, to: &Path, to_ip: &str, seconds: usize) -> f64 {
    let port = 5201;
    let _server = Server::start(to, port);
    // The server may not listen yet: a refused run is retried (it does not use up `-1`).
    let v: Value = c.wait_for(secs(30), &format!("iperf3 to {to_ip}"), || {
        let out = in_netns(from, "iperf3")
            .args([
                "-c",
                to_ip,
                "-p",
                &port.to_string(),
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

/// The average round trip in ms of 50 pings 20 ms apart.
fn latency(from: &Path, to_ip: &str) -> f64 {
    let out = in_netns(from, "busybox")
        .args(["ping", "-q", "-c", "50", "-i", "0.02", to_ip])
        .output()
        .unwrap_or_else(|e| panic!("ping: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    // "round-trip min/avg/max = 0.061/0.073/0.093 ms"
    text.lines()
        .find_map(|l| l.split(" = ").nth(1))
        .and_then(|v| v.split('/').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    require_tool("iperf3");
    let seconds = env_usize("BERTH_BENCH_SECONDS", 5);
    let c = Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(3, 1)));
    let bed = c.test_bed();
    let hosts = [0, 1, 3];
    let mut pods = Vec::new();
    for &h in &hosts {
        let name = format!("net-{h}");
        c.apply(&sh_pod(&name, c.node_name(h), SLEEP_FOREVER));
        let pod = c.wait_for_pod_ready("default", &name, secs(120));
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ip = pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pods.push((pod_netns(&uid), ip));
    }
    let host_ns = |h: usize| bed.host(h).netns_path();
    println!("pod network bench: {seconds} s per iperf3 run");
    println!();
    println!(
        "| path | throughput (Gbit/s) | round trip (ms) | host to host, same run: throughput / round trip |"
    );
    println!("|---|---|---|---|");
    for (label, target) in [
        ("host-gw (same segment)", 1),
        ("VXLAN (through a router)", 2),
    ] {
        let host = hosts[target];
        let (to_ns, to_ip) = &pods[target];
        // Let the first packets find their way (routes and VTEP entries are set up at start).
        c.wait_for(secs(30), &format!("pod 0 → {to_ip}"), || {
            let out = in_netns(&pods[0].0, "busybox")
                .args(["ping", "-c", "1", "-W", "1", to_ip])
                .output()
                .map_err(|e| e.to_string())?;
            ok_if(out.status.success(), "no answer".to_string())
        });
        let pod_tput = throughput(&c, &pods[0].0, to_ns, to_ip, seconds);
        let pod_rtt = latency(&pods[0].0, to_ip);
        let host_ip = bed.host(host).address.to_string();
        let host_tput = throughput(&c, &host_ns(0), &host_ns(host), &host_ip, seconds);
        let host_rtt = latency(&host_ns(0), &host_ip);
        println!(
            "| pod → pod, {label} | {pod_tput:.2} | {pod_rtt:.3} | {host_tput:.2} / {host_rtt:.3} |"
        );
    }
}
