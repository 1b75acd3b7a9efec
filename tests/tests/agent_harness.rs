//! The agent-test harness itself, without an agent: a private containerd runs the fixture
//! images and survives a restart, and its Drop leaves no process behind; the fixtures go through
//! the registry (skopeo push, curl and ctr pull) and the nginx stand-in serves its page on port
//! 80 with its default command; the controller issues a join token and allocates pod CIDRs from
//! `--cluster-cidr`; a cluster without agents starts and stops; and the host sweep removes
//! tagged netns, bridges and iptables rules, leaving everything else as it was.

use std::path::Path;
use std::process::Command;

use berth_tests::cluster::NODE_READY_DEADLINE;
use berth_tests::fixtures::{BUSYBOX, NGINX_1_14_2, SEEDED, nginx_marker, tar_layout};
use berth_tests::host::{HostLock, TOOL_DEADLINE, Tenancy, tool, tool_ok, unique_suffix};
use berth_tests::pod_reading::ipv4_in_cidr;
use berth_tests::process::{alive, run};
use berth_tests::sweep::iptables::{TABLES, snapshot, snapshot_all, sweep_networks};
use berth_tests::sweep::{delete_link, delete_netns_with_prefix, link_exists, netns_with_prefix};
use berth_tests::{Cluster, ClusterConfig, Containerd, Controller, Registry, secs, wait_for};
use serde_json::json;

#[test]
fn a_private_containerd_runs_fixtures_survives_a_restart_and_cleans_up() {
    let _lock = HostLock::acquire();
    let mut ctd = Containerd::start();
    let ns = format!("berth-harness-{}", unique_suffix());
    let archive = ctd.dir().join("busybox.tar");
    tar_layout(&BUSYBOX.layout(), &archive).unwrap();
    ctd.ctr_ok(&ns, &["images", "import", &archive.to_string_lossy()]);
    assert!(
        ctd.images(&ns).contains(&BUSYBOX.full_name()),
        "{:?}",
        ctd.images(&ns)
    );
    let fifo = ctd.dir().join("fifo");
    let fifo = fifo.to_string_lossy();
    let image = BUSYBOX.full_name();
    let out = ctd.ctr_ok(
        &ns,
        &[
            "run",
            "--rm",
            "--fifo-dir",
            &fifo,
            &image,
            "echo-1",
            "sh",
            "-c",
            "echo hello from $(cat /etc/passwd | head -c 4); ls /bin | wc -l",
        ],
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("hello from root"), "{out}");
    let applets: usize = lines.next().unwrap_or("0").trim().parse().unwrap();
    assert!(applets > 100, "only {applets} entries in /bin: {out}");

    ctd.ctr_ok(
        &ns,
        &["run", "-d", "--null-io", &image, "sleeper", "sleep", "3600"],
    );
    let task = ctd
        .tasks(&ns)
        .into_iter()
        .find(|t| t.id == "sleeper")
        .unwrap();
    assert_eq!(task.status, "RUNNING");
    let old_daemon = ctd.pid().unwrap();
    ctd.restart();
    assert_ne!(ctd.pid(), Some(old_daemon));
    let after = ctd
        .tasks(&ns)
        .into_iter()
        .find(|t| t.id == "sleeper")
        .unwrap();
    assert_eq!(
        (after.pid, after.status.as_str()),
        (task.pid, "RUNNING"),
        "the container must outlive a containerd restart"
    );
    let shims: Vec<u32> = ctd.shims().iter().map(|(p, _)| *p as u32).collect();
    assert!(
        !shims.is_empty(),
        "no shim found for {}",
        ctd.socket().display()
    );
    let daemon = ctd.pid().unwrap();
    let dir = ctd.dir().to_path_buf();
    drop(ctd);

    for pid in shims.iter().chain([&task.pid, &daemon]) {
        assert!(
            !alive(*pid),
            "process {pid} survived the containerd teardown"
        );
    }
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert!(!Path::new("/run/containerd/runc").join(&ns).exists());
    for ctrl in ["memory", "pids", "cpu"] {
        let cg = Path::new("/sys/fs/cgroup").join(ctrl).join(&ns);
        assert!(!cg.exists(), "cgroup {} is still there", cg.display());
    }
}

#[test]
fn fixtures_go_through_the_registry_and_nginx_serves_port_80_by_default() {
    let _lock = HostLock::acquire();
    let registry = Registry::start();
    for f in SEEDED {
        registry.push(&f.layout(), &f.reference(), f.repository, f.tag);
        assert!(registry.has_manifest(f.repository, f.tag), "{f:?}");
    }
    assert!(!registry.has_manifest("library/nginx", "9.9.9"));
    let catalog = tool_ok(
        "curl",
        &["-fsS", &format!("{}/v2/_catalog", registry.url())],
    );
    assert!(
        catalog.contains("library/busybox") && catalog.contains("library/nginx"),
        "{catalog}"
    );
    let mut inspect = Command::new("skopeo");
    inspect.args([
        "inspect",
        "--tls-verify=false",
        "--config",
        &format!("docker://{}/library/nginx:1.14.2", registry.addr()),
    ]);
    let r = run(inspect, None, TOOL_DEADLINE);
    assert!(r.success(), "{}", r.describe());
    let config: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        config["config"]["Cmd"],
        json!(["sh", "-c", berth_tests::fixtures::NGINX_COMMAND])
    );
    assert!(config["config"].get("StopSignal").is_none());

    // Pull it back with ctr and run its default command in a netns of our own.
    let ctd = Containerd::start();
    let ns = format!("berth-harness-{}", unique_suffix());
    let image = format!("{}/library/nginx:1.14.2", registry.addr());
    ctd.ctr_ok(&ns, &["images", "pull", "--plain-http", &image]);
    let netns = format!("berth-harness-{}", unique_suffix());
    tool_ok("ip", &["netns", "add", &netns]);
    let _cleanup = NetnsGuard(netns.clone());
    tool_ok(
        "ip",
        &["netns", "exec", &netns, "ip", "link", "set", "lo", "up"],
    );
    let with_ns = format!("network:/var/run/netns/{netns}");
    ctd.ctr_ok(
        &ns,
        &[
            "run",
            "-d",
            "--null-io",
            "--with-ns",
            &with_ns,
            &image,
            "web",
        ],
    );
    let page = wait_for(secs(20), "the nginx fixture answering on port 80", || {
        tool(
            "ip",
            &[
                "netns",
                "exec",
                &netns,
                "busybox",
                "wget",
                "-qO-",
                "http://127.0.0.1:80/",
            ],
        )
        .stdout_if_ok()
    });
    assert!(page.contains(&nginx_marker("1.14.2")), "{page}");
    assert_eq!(NGINX_1_14_2.short_name(), "nginx:1.14.2");
}

struct NetnsGuard(String);

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        delete_netns_with_prefix(&self.0);
    }
}

#[test]
fn the_controller_issues_a_join_token_and_allocates_pod_cidrs() {
    let _host = HostLock::acquire();
    let lease = Tenancy::arrive();
    let cidr = lease.cluster_cidr();
    let c = Controller::start_with(&["--cluster-cidr", &cidr]);
    let mut cmd = Command::new(berth_tests::controller::controller_binary());
    cmd.arg("token").arg("--data-dir").arg(c.data_dir());
    let r = run(cmd, None, TOOL_DEADLINE);
    assert!(r.success(), "{}", r.describe());
    let token = r.stdout.trim();
    assert!(token.starts_with("K10"), "{token}");
    let stored = std::fs::read_to_string(c.data_dir().join("token")).unwrap();
    assert_eq!(stored.trim(), token);

    let api = c.admin_api();
    api.create(
        "/api/v1/nodes",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-x"}}),
    );
    let pod_cidr = c.wait_for(NODE_READY_DEADLINE, "a podCIDR for node-x", || {
        let node = api.get_ok("/api/v1/nodes/node-x");
        node["spec"]["podCIDR"]
            .as_str()
            .map(str::to_string)
            .ok_or(node)
    });
    let net = pod_cidr.split('/').next().unwrap();
    assert!(pod_cidr.ends_with("/24"), "{pod_cidr}");
    assert!(ipv4_in_cidr(net, &cidr), "{pod_cidr} is not inside {cidr}");
}

#[test]
fn a_cluster_without_agents_starts_and_stops_cleanly() {
    let (containerd_pid, registry_dir, controller_pid) = {
        let c = Cluster::start_with(ClusterConfig::agents(0));
        let out = c.kubectl().ok(&["get", "nodes"]);
        assert!(out.trim().is_empty() || !out.contains("node-"), "{out}");
        assert!(c.registry().has_manifest("library/busybox", "1.28"));
        let mirrors = std::fs::read_to_string(c.registries_file()).unwrap();
        assert!(mirrors.contains(&c.registry().url()), "{mirrors}");
        assert!(c.cluster_cidr().starts_with("10.2"), "{}", c.cluster_cidr());
        (
            c.containerd().pid().unwrap(),
            c.registry().dir().to_path_buf(),
            c.controller().pid().unwrap(),
        )
    };
    assert!(!alive(containerd_pid));
    assert!(!alive(controller_pid));
    assert!(!registry_dir.exists());
    // The host lock was released.
    drop(HostLock::acquire());
}

#[test]
fn the_host_sweep_removes_tagged_netns_bridges_and_rules_only() {
    let _lock = HostLock::acquire();
    let before = snapshot_all();
    let suffix = unique_suffix();
    let net = format!("berth-sweep{suffix}");
    let other = format!("berth-other{suffix}");
    let bridge = format!("bt{suffix}z");
    let chain = format!("CNI-{suffix}");
    let other_chain = format!("CNI-o{suffix}");
    tool_ok("ip", &["netns", "add", &format!("{net}-pod1")]);
    tool_ok("ip", &["netns", "add", &format!("{other}-pod1")]);
    let _other_netns = NetnsGuard(other.clone());
    tool_ok("ip", &["link", "add", &bridge, "type", "bridge"]);
    let ipt = |args: &[&str]| tool_ok("iptables", args);
    let comment = format!("name: \"{net}\" id: \"pod1\"");
    let other_comment = format!("name: \"{other}\" id: \"pod1\"");
    // What the CNI bridge plugin's ipMasq leaves for one pod: a chain that masquerades, and a
    // POSTROUTING jump to it from the pod's address, both tagged with the network's comment.
    for (chain, comment, source) in [
        (chain.as_str(), comment.as_str(), "10.251.0.2/32"),
        (
            other_chain.as_str(),
            other_comment.as_str(),
            "10.251.0.3/32",
        ),
    ] {
        ipt(&["-t", "nat", "-N", chain]);
        let tagged: [&str; 5] = ["-m", "comment", "--comment", comment, "-j"];
        ipt(&[&["-t", "nat", "-A", chain][..], &tagged, &["MASQUERADE"]].concat());
        let jump = [
            &["-t", "nat", "-A", "POSTROUTING", "-s", source][..],
            &tagged,
            &[chain],
        ];
        ipt(&jump.concat());
    }
    let forward = format!("berth:{net} forward from bridge");
    ipt(&[
        "-t",
        "filter",
        "-A",
        "FORWARD",
        "-i",
        &bridge,
        "-m",
        "comment",
        "--comment",
        &forward,
        "-j",
        "ACCEPT",
    ]);

    let removed = sweep_networks(std::slice::from_ref(&net));
    assert!(!removed.is_empty());
    delete_netns_with_prefix(&format!("{net}-"));
    delete_link(&bridge);

    assert!(netns_with_prefix(&format!("{net}-")).is_empty());
    assert!(!link_exists(&bridge));
    let nat = snapshot("nat");
    assert!(!nat.chains.contains(&chain), "{chain} is still there");
    assert!(
        nat.chains.contains(&other_chain),
        "another network's chain was removed"
    );
    assert_eq!(netns_with_prefix(&format!("{other}-")).len(), 1);

    // Now the other network too: the host is back to what it was.
    sweep_networks(std::slice::from_ref(&other));
    for table in TABLES {
        let now = tool_ok("iptables-save", &["-t", table]);
        assert!(
            !now.contains(&suffix),
            "{table} still holds rules of this test:\n{now}"
        );
        assert_eq!(snapshot(table).chains, before[table].chains, "{table}");
    }
}
