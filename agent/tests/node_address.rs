//! The agent's default node address in a throwaway network namespace: a dummy interface (a veth
//! where the kernel lacks the dummy module) holds
//! the default route, and a bridge whose name sorts first holds 10.42.0.1 (what a CNI bridge of
//! ours or another's looks like). The agent must pick the dummy's address, as the kubelet does.
//! Needs root and `ip`; fails loudly without them. Names are unique per run, and a guard
//! deletes the namespace (and its interfaces with it) even when the test fails.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::os::fd::AsFd;
use std::process::Command;

/// A network namespace under /run/netns, deleted on drop; made under the harness's host lock
/// (shared), as everything that touches the host's networking.
struct Netns(String, #[allow(dead_code)] berth_tests::host::HostLock);

impl Netns {
    fn create(name: &str) -> Netns {
        let host = berth_tests::host::HostLock::acquire();
        ip(&["netns", "add", name]);
        Netns(name.to_string(), host)
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }
}

impl Netns {
    /// Whether `ip -n NS ARGS` succeeded.
    fn try_ip(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["-n", self.0.as_str()])
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_default_node_ip_is_the_default_route_interfaces_not_a_bridge_that_sorts_first() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (a network namespace with a dummy interface and a bridge)"
    );
    let id = format!(
        "{:x}{:x}",
        std::process::id() & 0xffff,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
            & 0xfff
    );
    let ns = Netns::create(&format!("bk14-node-ip-{id}"));
    // "abr…" sorts before "dum…": a name-ordered choice would take the bridge's 10.42.0.1.
    let (dummy, bridge) = (format!("dum{id}"), format!("abr{id}"));
    ns.ip(&["link", "set", "lo", "up"]);
    // A dummy interface where the kernel has the module; else one end of a veth pair (its
    // peer in the same namespace), which holds a route just the same.
    if !ns.try_ip(&["link", "add", &dummy, "type", "dummy"]) {
        let peer = format!("dpe{id}");
        ns.ip(&["link", "add", &dummy, "type", "veth", "peer", "name", &peer]);
        ns.ip(&["link", "set", &peer, "up"]);
    }
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", &dummy]);
    ns.ip(&["link", "set", &dummy, "up"]);
    ns.ip(&["route", "add", "default", "via", "192.0.2.1", "dev", &dummy]);
    ns.ip(&["link", "add", &bridge, "type", "bridge"]);
    ns.ip(&["addr", "add", "10.42.0.1/24", "dev", &bridge]);
    ns.ip(&["link", "set", &bridge, "up"]);

    let path = format!("/run/netns/{}", ns.0);
    let (chosen, seen) = std::thread::spawn(move || {
        // Only this thread enters the namespace; the test's other threads stay where they are.
        let file = std::fs::File::open(&path).unwrap();
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let seen = berth_agent::node::host::observe_interfaces_and_routes();
        (berth_agent::node::host::internal_ip(None), seen)
    })
    .join()
    .unwrap();
    let (interfaces, routes) = seen;
    // The namespace is what the agent looked at: both interfaces and the default route.
    let bridge_seen = interfaces
        .iter()
        .find(|i| i.name == bridge)
        .map(|i| i.addrs.clone());
    assert_eq!(
        bridge_seen,
        Some(vec!["10.42.0.1".parse().unwrap()]),
        "{interfaces:?}"
    );
    assert!(
        routes
            .iter()
            .any(|r| r.iface == dummy && r.destination.is_unspecified() && r.prefix == 0),
        "{routes:?}"
    );
    assert_eq!(
        chosen.as_deref(),
        Some("192.0.2.10"),
        "{interfaces:?} {routes:?}"
    );
    // --node-ip still wins.
    assert_eq!(
        berth_agent::node::host::internal_ip(Some("10.9.8.7")).as_deref(),
        Some("10.9.8.7")
    );
}
