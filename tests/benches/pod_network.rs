//! Pod network benchmark on the multi-host test bed (prints figures, never fails on them): TCP
//! throughput (`iperf3`, Debian's package) and round-trip latency (`ping`) from a pod on host 0
//! to a pod on host 1 (same segment: host-gw) and to a pod on host 3 (behind the router:
//! VXLAN), next to the same between the hosts themselves in the same run. The tools run in the
//! pods' network namespaces (`nsenter --net`), so the path measured is the pods' own: veth,
//! bridge, route (and tunnel). `BERTH_BENCH_SECONDS` sets each iperf3 run's length (default 5).
//! The bed's "wires" are veths on one machine: the figures say what the pod path costs
//! relative to the host path, not what a physical network would carry.

use std::path::Path;

use berth_tests::bench::env_usize;
use berth_tests::host::require_tool;
use berth_tests::pod_netns::{netns_command, pod_netns, throughput};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};

/// The average round trip in ms of 50 pings 20 ms apart.
fn latency(from: &Path, to_ip: &str) -> f64 {
    let out = netns_command(from, "busybox")
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
        let ip = pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pods.push((pod_netns(&pod), ip));
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
            let out = netns_command(&pods[0].0, "busybox")
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
