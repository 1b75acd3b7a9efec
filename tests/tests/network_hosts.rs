//! The multi-host test bed: four agents, each in a network namespace of its own with its own
//! address, three on segment A and one behind a router on segment B. Each Node reports its
//! host's address; the controller reaches the agent behind the router (`kubectl logs`); the
//! hosts reach each other across the router; cutting a host's link partitions it and
//! reconnecting heals it; and nothing of the bed is left once the cluster is gone. Pod traffic
//! between the hosts is `network_pods`' subject.

use std::os::unix::fs::MetadataExt as _;

use berth_tests::host::{require_tool, tool_ok};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, Segment, TestBed, TestBedLayout, secs};
use serde_json::Value;

/// Whether host `from` gets an answer from `to` (one ping, one second).
fn ping(bed: &TestBed, from: usize, to: usize) -> Result<(), String> {
    let busybox = require_tool("busybox").to_string_lossy().into_owned();
    let address = bed.host(to).address.to_string();
    let r = bed.host_exec(from, &[&busybox, "ping", "-c", "1", "-W", "1", &address]);
    if r.success() {
        Ok(())
    } else {
        Err(format!(
            "host {from} → host {to} ({address}): {}",
            r.describe()
        ))
    }
}

fn internal_ips(node: &Value) -> Vec<String> {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == "InternalIP")
        .filter_map(|a| a["address"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn agents_run_on_hosts_of_their_own_and_the_bed_goes_with_the_cluster() {
    let c = Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(3, 1)));
    let bed = c.test_bed();
    let behind_router = 3;
    assert_eq!(bed.host(behind_router).segment, Segment::B);

    // Every Node is Ready (start waits for it) with its host's address, and each agent runs as
    // itself (nsenter exec'd it) inside its host's netns.
    for (i, host) in bed.hosts().iter().enumerate() {
        let node = c.get(&format!("/api/v1/nodes/{}", c.node_name(i))).unwrap();
        assert_eq!(
            internal_ips(&node),
            [host.address.to_string()],
            "{}",
            c.node_name(i)
        );
        let pid = c.agent(i).pid().unwrap();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert!(
            exe.ends_with("berth-agent"),
            "agent {i} runs {}",
            exe.display()
        );
        let inode = |p: &str| std::fs::metadata(p).unwrap().ino();
        assert_eq!(
            inode(&format!("/proc/{pid}/ns/net")),
            inode(&host.netns_path().to_string_lossy()),
            "agent {i} is not in {}",
            host.netns
        );
    }

    // The controller reaches the agent behind the router: the pod runs and its log is served.
    let node = c.node_name(behind_router).to_string();
    let script = format!("echo hello from behind the router; {SLEEP_FOREVER}");
    c.apply(&sh_pod("behind-router", &node, &script));
    c.wait_for_pod_ready("default", "behind-router", secs(90));
    c.wait_for(
        secs(20),
        "kubectl logs of the pod behind the router",
        || {
            let r = c.logs_of("default", "behind-router", None, &[]);
            ok_if(
                r.success() && r.stdout.contains("hello from behind the router"),
                r.describe(),
            )
        },
    );

    // Every host reaches every other, across the router where they are on different segments.
    let n = bed.hosts().len();
    for from in 0..n {
        for to in (0..n).filter(|&to| to != from) {
            c.wait_for(secs(10), &format!("host {from} pings host {to}"), || {
                ping(bed, from, to)
            });
        }
    }

    // Cutting a host's link partitions it (on A at the root's bridge, on B at the router's);
    // reconnecting heals it.
    for (cut, from) in [(1, 0), (behind_router, 0)] {
        bed.cut_off(cut);
        let what = format!("host {cut} cut off from {from}");
        c.wait_for(secs(10), &what, || {
            ok_if(ping(bed, from, cut).is_err(), "still answers")
        });
        let what = format!("host {cut} stays cut off");
        c.ensure_for(secs(3), &what, || {
            ok_if(ping(bed, from, cut).is_err(), "answers while cut off")
        });
        bed.reconnect(cut);
        c.wait_for(secs(20), &format!("host {cut} reconnected"), || {
            ping(bed, from, cut)
        });
    }

    // Nothing of the bed (or of the pods in it) is left once the cluster is gone.
    let suffix = c.suffix().to_string();
    let subnets = [bed.subnet(Segment::A), bed.subnet(Segment::B)].map(|s| s.to_string());
    drop(c);
    let listings = [
        tool_ok("ip", &["netns", "list"]),
        tool_ok("ip", &["-o", "link", "show"]),
        tool_ok("ip", &["-4", "route", "show", "table", "all"]),
        tool_ok("iptables", &["-w", "5", "-S", "FORWARD"]),
    ];
    for listing in &listings {
        for line in listing.lines() {
            assert!(
                !line.contains(&suffix) && !subnets.iter().any(|s| line.contains(s.as_str())),
                "left behind by the test bed: {line}"
            );
        }
    }
}
