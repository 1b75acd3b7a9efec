//! Pod networking against the real CNI plugins (`/usr/lib/cni`), `ip` and `iptables`.
//! Needs root; fails loudly without it. Every test uses its own bridge, CIDR and network name,
//! and a guard tears everything down even when the test fails.
//!
//! The fixtures are tenants of the host as the harness's clusters are
//! (`berth_tests::host::tenancy`): they hold the host lock (shared), their pod ranges are
//! `/24`s of a `/16` leased to this process (`10.<200+lane>.<octet>.0/24`), never one a
//! cluster running beside them routes, and `net.ipv4.ip_forward` (which the bridge plugin
//! turns on) is put back by whichever tenant of the host leaves last.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_tests::host::{HostLock, Tenancy, tenancy};

use berth_agent::network::{
    HostPort, Ipv4Cidr, NetnsId, NetnsPresence, Network, NetworkConfig, NetworkFacts, PodNetwork,
    PodRef, PortProtocol, ProcessNetwork, Record, observe_process,
};

fn require_host() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the network tests need root (netns, veths, iptables)"
    );
    for bin in [
        "/usr/lib/cni/bridge",
        "/usr/lib/cni/loopback",
        "/usr/lib/cni/host-local",
        "/usr/lib/cni/portmap",
        "/bin/busybox",
    ] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing (containernetworking-plugins, busybox-static)"
        );
    }
    for tool in ["ip", "iptables"] {
        let ok = std::process::Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{tool} is missing");
    }
}

/// This process's tenancy of the host, shared by the fixtures alive in it (so that two
/// fixtures of one test share a cluster range), left when the last of them goes.
static TENANCY: Mutex<(usize, Option<Tenancy>)> = Mutex::new((0, None));

/// A fixture's hold on the host: the host lock and this process's lane.
struct HostHold {
    lane: u8,
    _lock: HostLock,
}

impl HostHold {
    fn take() -> HostHold {
        let lock = HostLock::acquire();
        let mut t = TENANCY.lock().unwrap_or_else(|e| e.into_inner());
        if t.0 == 0 {
            t.1 = Some(Tenancy::arrive());
        }
        t.0 += 1;
        let lane = t.1.as_ref().map(Tenancy::lane).unwrap();
        HostHold { lane, _lock: lock }
    }

    /// The second octet of this process's range (`10.<second>.0.0/16`).
    fn second_octet(&self) -> u8 {
        200 + self.lane
    }
}

impl Drop for HostHold {
    fn drop(&mut self) {
        let mut t = TENANCY.lock().unwrap_or_else(|e| e.into_inner());
        t.0 -= 1;
        if t.0 == 0 {
            // Leaves (the last tenant out restores ip_forward) before the lock goes.
            drop(t.1.take());
        }
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A UUID-shaped pod uid, unique in this process.
fn new_uid() -> String {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), n)
}

/// One agent's network with its own bridge, CIDR, state dir and name; torn down on drop.
struct Fixture {
    net: Arc<Network>,
    cfg: NetworkConfig,
    cidr: Ipv4Cidr,
    _dir: tempfile::TempDir,
    /// Last: released after Drop removed everything.
    host: HostHold,
}

impl Fixture {
    /// `octet` picks the pod CIDR `10.<lane's>.<octet>.0/24`; each test uses its own.
    fn new(tag: &str, octet: u8) -> Fixture {
        require_host();
        let host = HostHold::take();
        let second = host.second_octet();
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id() % 100_000;
        let cfg = NetworkConfig {
            cni_bin_dir: "/usr/lib/cni".into(),
            bridge: format!("bt{pid}{tag}"),
            pod_cidr: format!("10.{second}.{octet}.0/24"),
            cluster_cidr: tenancy::cluster_cidr(host.lane),
            state_dir: dir.path().join("network"),
            network_name: format!("berth-t{pid}-{tag}"),
            instance: format!("i{pid}{tag}"),
            mtu: None,
        };
        assert!(cfg.bridge.len() <= 15, "{}", cfg.bridge);
        Fixture {
            net: Arc::new(Network::new(cfg.clone())),
            cidr: cfg.pod_cidr.parse().unwrap(),
            cfg,
            _dir: dir,
            host,
        }
    }

    fn netns_name(&self, uid: &str) -> String {
        format!("{}-{}-{uid}", self.cfg.network_name, self.cfg.instance)
    }

    fn ipam_files(&self) -> Vec<String> {
        let dir = self.cfg.state_dir.join("ipam").join(&self.cfg.network_name);
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
            .collect()
    }

    /// Asserts that pod `uid`, set up (again) as `pod`, reaches its gateway, holds the only IP
    /// allocation, and has no per-pod rules (the node's rules cover it).
    async fn assert_the_only_pod(&self, uid: &str, pod: &PodNetwork) {
        let (ok, out) = ping_from(&self.netns_name(uid), pod.gateway).await;
        assert!(ok, "the pod reaches its gateway: {out}");
        assert_eq!(
            self.ipam_files(),
            vec![pod.ip.to_string()],
            "one allocation"
        );
        let left = rules_mentioning(uid).await;
        assert!(left.is_empty(), "no per-pod rules: {left:?}");
    }

    /// Asserts that nothing of pod `uid` (set up as `pod`) is left: not its netns, its IP
    /// allocation or a rule naming it.
    async fn assert_gone(&self, uid: &str, pod: &PodNetwork) {
        assert!(!pod.netns_path.exists());
        assert!(self.ipam_files().is_empty(), "{:?}", self.ipam_files());
        assert!(rules_mentioning(uid).await.is_empty());
    }

    async fn setup(&self, uid: &str) -> PodNetwork {
        self.net
            .setup(&PodRef::new(uid, "default", format!("pod-{uid}")))
            .await
            .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let net = self.net.clone();
        let cfg = self.cfg.clone();
        // Drop may run inside the test's runtime: do the async cleanup on a thread of its own.
        let cleaned = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(uids) = net.list().await {
                    for uid in uids {
                        if let Err(e) = net.teardown(&uid).await {
                            eprintln!("cleanup: teardown {uid}: {e}");
                        }
                    }
                }
                if let Err(e) = net.cleanup_host().await {
                    eprintln!("cleanup: cleanup_host: {e}");
                }
            });
        })
        .join();
        // Last resort, independent of the code under test.
        let out = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output();
        if let Ok(out) = out {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let name = line.split_whitespace().next().unwrap_or_default();
                if name.starts_with(&format!("{}-", cfg.network_name)) {
                    let _ = std::process::Command::new("ip")
                        .args(["netns", "delete", name])
                        .status();
                }
            }
        }
        if Path::new("/sys/class/net").join(&cfg.bridge).exists() {
            let _ = std::process::Command::new("ip")
                .args(["link", "delete", &cfg.bridge])
                .status();
        }
        if cleaned.is_err() && !std::thread::panicking() {
            panic!("fixture cleanup panicked");
        }
    }
}

/// Runs a command, killed after 20 s; returns (success, stdout + stderr).
async fn run(program: &str, args: &[&str]) -> (bool, String) {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} timed out"))
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn in_netns(netns: &str, args: &[&str]) -> (bool, String) {
    let mut full = vec!["netns", "exec", netns];
    full.extend_from_slice(args);
    run("ip", &full).await
}

/// One ping from the namespace `netns` to `target`, given two seconds to answer.
async fn ping_from(netns: &str, target: impl std::fmt::Display) -> (bool, String) {
    let target = target.to_string();
    in_netns(netns, &["/bin/busybox", "ping", "-c1", "-W2", &target]).await
}

/// nat and filter rules that mention `needle`.
async fn rules_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for table in ["nat", "filter"] {
        let (ok, text) = run("iptables", &["-w", "5", "-t", table, "-S"]).await;
        assert!(ok, "iptables -t {table} -S: {text}");
        found.extend(
            text.lines()
                .filter(|l| l.contains(needle))
                .map(String::from),
        );
    }
    found
}

/// Host-side veths enslaved to the bridge.
async fn bridge_ports(bridge: &str) -> Vec<String> {
    let dir = PathBuf::from("/sys/class/net").join(bridge).join("brif");
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test]
async fn setup_gives_an_ip_in_the_pod_cidr_and_a_working_eth0() {
    let fx = Fixture::new("a", 101);
    let uid = new_uid();
    let started = Instant::now();
    let pod = fx.setup(&uid).await;
    let setup = started.elapsed();
    assert!(
        fx.cidr.contains(pod.ip),
        "{} not in {}",
        pod.ip,
        fx.cfg.pod_cidr
    );
    assert_eq!(
        pod.gateway,
        Ipv4Addr::new(10, fx.host.second_octet(), 101, 1)
    );
    assert_eq!(
        pod.netns_path,
        PathBuf::from("/var/run/netns").join(fx.netns_name(&uid))
    );
    assert!(pod.netns_path.exists());
    let ns = fx.netns_name(&uid);
    let (ok, out) = ping_from(&ns, pod.gateway).await;
    assert!(ok, "ping gateway from the pod: {out}");
    let (ok, out) = ping_from(&ns, "127.0.0.1").await;
    assert!(ok, "loopback is up in the pod: {out}");
    let (ok, out) = run("/bin/busybox", &["ping", "-c1", "-W2", &pod.ip.to_string()]).await;
    assert!(ok, "the host reaches the pod: {out}");
    let (_, routes) = in_netns(&ns, &["ip", "route"]).await;
    assert!(
        routes.contains(&format!("default via {}", pod.gateway)),
        "{routes}"
    );
    assert_eq!(fx.net.list().await.unwrap(), vec![uid.clone()]);

    let started = Instant::now();
    fx.net.teardown(&uid).await.unwrap();
    let teardown = started.elapsed();
    eprintln!("setup {:.1} ms, teardown {:.1} ms", ms(setup), ms(teardown));
}

#[tokio::test]
async fn setup_twice_returns_the_same_ip_also_after_an_agent_restart() {
    let fx = Fixture::new("b", 102);
    let uid = new_uid();
    let first = fx.setup(&uid).await;
    let started = Instant::now();
    let second = fx.setup(&uid).await;
    let again = started.elapsed();
    assert_eq!(first, second);
    // A new agent process: a fresh Network with the same configuration.
    let restarted = Network::new(fx.cfg.clone());
    let third = restarted
        .setup(&PodRef::new(&uid, "default", format!("pod-{uid}")))
        .await
        .unwrap();
    assert_eq!(first, third);
    assert_eq!(fx.ipam_files(), vec![first.ip.to_string()]);
    assert_eq!(bridge_ports(&fx.cfg.bridge).await.len(), 1);
    eprintln!("idempotent setup of an existing pod {:.1} ms", ms(again));
}

#[tokio::test]
async fn teardown_removes_netns_veth_ip_allocation_and_iptables_chains() {
    let fx = Fixture::new("c", 103);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    assert_eq!(bridge_ports(&fx.cfg.bridge).await.len(), 1);
    assert_eq!(fx.ipam_files(), vec![pod.ip.to_string()]);
    // No masquerade chain per pod: the node's one rule covers every pod.
    assert_eq!(rules_mentioning(&uid).await, Vec::<String>::new());
    let node_masq = format!(
        "berth:{} masquerade leaving the cluster",
        fx.cfg.network_name
    );
    assert_eq!(rules_mentioning(&node_masq).await.len(), 1);

    fx.net.teardown(&uid).await.unwrap();
    assert!(!pod.netns_path.exists(), "netns removed");
    assert!(
        bridge_ports(&fx.cfg.bridge).await.is_empty(),
        "veth removed"
    );
    assert!(
        fx.ipam_files().is_empty(),
        "IP released: {:?}",
        fx.ipam_files()
    );
    assert!(
        rules_mentioning(&uid).await.is_empty(),
        "no CNI rules or chains left"
    );
    assert!(fx.net.list().await.unwrap().is_empty());
    // Idempotent.
    fx.net.teardown(&uid).await.unwrap();
    // The address is free again: host-local hands out the next one, but the old one is
    // reusable (the range has room), and a new setup works.
    let again = fx.setup(&uid).await;
    assert!(fx.cidr.contains(again.ip));
}

/// The per-pod masquerade chain an earlier version's bridge plugin (`ipMasq`) made, made as it
/// made it: `CNI-<hash>` with a MASQUERADE rule and a POSTROUTING jump, both commented
/// `name: "<network>" id: "<uid>"`.
async fn legacy_masquerade_chain(fx: &Fixture, uid: &str, ip: std::net::Ipv4Addr) {
    let bare = uid.replace('-', "");
    let chain = format!("CNI-{}", &bare[bare.len() - 24..]);
    let comment = format!("name: \"{}\" id: \"{uid}\"", fx.cfg.network_name);
    let source = format!("{ip}/32");
    // Each in the nat table, waiting up to 5 s for the xtables lock.
    for rule in [
        vec!["-N", &chain],
        vec![
            "-A",
            &chain,
            "!",
            "-d",
            "224.0.0.0/4",
            "-m",
            "comment",
            "--comment",
            &comment,
            "-j",
            "MASQUERADE",
        ],
        vec![
            "-A",
            "POSTROUTING",
            "-s",
            &source,
            "-m",
            "comment",
            "--comment",
            &comment,
            "-j",
            &chain,
        ],
    ] {
        let args = [&["-w", "5", "-t", "nat"][..], &rule].concat();
        let (ok, out) = run("iptables", &args).await;
        assert!(ok, "{out}");
    }
}

#[tokio::test]
async fn host_setup_removes_the_per_pod_masquerade_chains_of_an_earlier_version() {
    let fx = Fixture::new("q", 124);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    // An upgrade: the pod was set up by a version whose bridge plugin masqueraded per pod.
    legacy_masquerade_chain(&fx, &uid, pod.ip).await;
    assert_eq!(rules_mentioning(&uid).await.len(), 2);
    fx.net.ensure_host().await.unwrap();
    assert_eq!(rules_mentioning(&uid).await, Vec::<String>::new());
    // The pod keeps its network; the node's rule masquerades it now.
    let (ok, out) = ping_from(&fx.netns_name(&uid), pod.gateway).await;
    assert!(ok, "{out}");
    fx.net.teardown(&uid).await.unwrap();
}

#[tokio::test]
async fn teardown_after_the_netns_vanished_still_removes_a_masquerade_chain_of_an_earlier_version()
{
    let fx = Fixture::new("d", 104);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    legacy_masquerade_chain(&fx, &uid, pod.ip).await;
    // Something (a reboot, an operator) removed the netns behind the agent's back. The
    // bridge plugin's DEL then cannot find eth0 and leaves its nat chain: the sweep must.
    let (ok, out) = run("ip", &["netns", "delete", &fx.netns_name(&uid)]).await;
    assert!(ok, "{out}");
    assert!(!rules_mentioning(&uid).await.is_empty());
    assert_eq!(
        fx.net.list().await.unwrap(),
        vec![uid.clone()],
        "state still lists it"
    );
    fx.net.teardown(&uid).await.unwrap();
    assert!(rules_mentioning(&uid).await.is_empty());
    assert!(fx.ipam_files().is_empty());
    assert!(fx.net.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn setup_repairs_a_pod_whose_veth_was_deleted() {
    let fx = Fixture::new("e", 105);
    let uid = new_uid();
    let first = fx.setup(&uid).await;
    let ports = bridge_ports(&fx.cfg.bridge).await;
    assert_eq!(ports.len(), 1);
    let (ok, out) = run("ip", &["link", "delete", &ports[0]]).await;
    assert!(ok, "{out}");
    let repaired = fx.setup(&uid).await;
    assert_eq!(repaired.netns_path, first.netns_path);
    // The old IP is released.
    fx.assert_the_only_pod(&uid, &repaired).await;
}

fn state_file(fx: &Fixture, uid: &str) -> PathBuf {
    fx.cfg.state_dir.join("pods").join(format!("{uid}.json"))
}

#[tokio::test]
async fn setup_redoes_a_setup_that_a_crash_left_half_done() {
    let fx = Fixture::new("l", 118);
    let uid = new_uid();
    fx.setup(&uid).await;
    // As if the agent died after the CNI ADD but before recording completion.
    let path = state_file(&fx, &uid);
    let mut st: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    st["complete"] = serde_json::Value::Bool(false);
    std::fs::write(&path, serde_json::to_vec(&st).unwrap()).unwrap();

    let redone = fx.setup(&uid).await;
    fx.assert_the_only_pod(&uid, &redone).await;
    assert_eq!(bridge_ports(&fx.cfg.bridge).await.len(), 1, "one veth");
}

#[tokio::test]
async fn teardown_with_a_corrupt_state_file_still_removes_everything() {
    let fx = Fixture::new("m", 119);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    std::fs::write(state_file(&fx, &uid), "{").unwrap();
    fx.net.teardown(&uid).await.unwrap();
    fx.assert_gone(&uid, &pod).await;
    assert!(bridge_ports(&fx.cfg.bridge).await.is_empty());
    assert!(!state_file(&fx, &uid).exists());
}

/// busybox httpd in the pod's netns with a CGI script that prints the client's address.
struct EchoServer {
    _child: tokio::process::Child,
    _www: tempfile::TempDir,
}

async fn start_echo_server(netns: &str, port: u16) -> EchoServer {
    let www = tempfile::tempdir().unwrap();
    let cgi = www.path().join("cgi-bin");
    std::fs::create_dir(&cgi).unwrap();
    let script = cgi.join("ip");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s\\n' \"$REMOTE_ADDR\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(www.path().join("index.html"), "hello from pod\n").unwrap();
    let child = tokio::process::Command::new("ip")
        .args(["netns", "exec", netns, "/bin/busybox", "httpd", "-f", "-p"])
        .arg(port.to_string())
        .arg("-h")
        .arg(www.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    EchoServer {
        _child: child,
        _www: www,
    }
}

/// busybox httpd reports IPv4 clients as `[::ffff:a.b.c.d]`.
fn client_address(cgi_output: &str) -> String {
    let s = cgi_output.trim();
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("::ffff:")
        .to_string()
}

/// Fetches `url` from inside `netns` (or the host when `None`), retrying for up to 5 s while
/// the server starts.
async fn fetch(netns: Option<&str>, url: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (ok, out) = match netns {
            Some(ns) => in_netns(ns, &["/bin/busybox", "wget", "-qO-", url]).await,
            None => run("/bin/busybox", &["wget", "-qO-", url]).await,
        };
        if ok {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "fetching {url} from {netns:?} failed: {out}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await; // not ordering: retries the fetch until its deadline
    }
}

#[tokio::test]
async fn pods_of_two_agents_reach_each_other_by_ip_without_masquerade() {
    let a = Fixture::new("fa", 111);
    let b = Fixture::new("fb", 112);
    let (uid_a, uid_b) = (new_uid(), new_uid());
    let pod_a = a.setup(&uid_a).await;
    let pod_b = b.setup(&uid_b).await;
    let _server = start_echo_server(&b.netns_name(&uid_b), 8080).await;
    let seen = fetch(
        Some(&a.netns_name(&uid_a)),
        &format!("http://{}:8080/cgi-bin/ip", pod_b.ip),
    )
    .await;
    assert_eq!(
        client_address(&seen),
        pod_a.ip.to_string(),
        "pod B sees pod A's own address (no masquerade inside the cluster CIDR)"
    );
    // Each agent lists only its own pods.
    assert_eq!(a.net.list().await.unwrap(), vec![uid_a.clone()]);
    assert_eq!(b.net.list().await.unwrap(), vec![uid_b.clone()]);
}

/// Deletes a netns or link on drop (test scaffolding outside the code under test).
struct Scaffold(Vec<&'static str>, String);

impl Drop for Scaffold {
    fn drop(&mut self) {
        let mut args: Vec<&str> = self.0.clone();
        args.push(&self.1);
        let _ = std::process::Command::new("ip").args(&args).status();
    }
}

#[tokio::test]
async fn traffic_leaving_the_cluster_cidr_is_masqueraded() {
    let fx = Fixture::new("g", 113);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    // An "outside" host: a netns behind a veth, 198.51.100.2, reached from the pod through
    // the host's forwarding. Its server must see the host's address, not the pod's.
    let outside = format!("{}-outside", fx.cfg.network_name);
    let (host_if, out_if) = (
        format!("bo{}", std::process::id() % 100_000),
        "eth0".to_string(),
    );
    let (ok, out) = run("ip", &["netns", "add", &outside]).await;
    assert!(ok, "{out}");
    let _ns = Scaffold(vec!["netns", "delete"], outside.clone());
    let _link = Scaffold(vec!["link", "delete"], host_if.clone());
    let steps: Vec<Vec<&str>> = vec![
        vec![
            "link", "add", &host_if, "type", "veth", "peer", "name", &out_if, "netns", &outside,
        ],
        vec!["addr", "add", "198.51.100.1/30", "dev", &host_if],
        vec!["link", "set", &host_if, "up"],
        vec![
            "-n",
            &outside,
            "addr",
            "add",
            "198.51.100.2/30",
            "dev",
            &out_if,
        ],
        vec!["-n", &outside, "link", "set", &out_if, "up"],
        vec!["-n", &outside, "link", "set", "lo", "up"],
        vec![
            "-n",
            &outside,
            "route",
            "add",
            "default",
            "via",
            "198.51.100.1",
        ],
    ];
    for args in steps {
        let (ok, out) = run("ip", &args).await;
        assert!(ok, "ip {args:?}: {out}");
    }
    let _server = start_echo_server(&outside, 8081).await;
    let seen = fetch(
        Some(&fx.netns_name(&uid)),
        "http://198.51.100.2:8081/cgi-bin/ip",
    )
    .await;
    assert_eq!(
        client_address(&seen),
        "198.51.100.1",
        "leaving the cluster CIDR, pod {} is masqueraded to the host's address",
        pod.ip
    );
}

#[tokio::test]
async fn a_host_port_reaches_the_pod_and_teardown_removes_its_dnat() {
    let fx = Fixture::new("h", 114);
    let uid = new_uid();
    let mut pod_ref = PodRef::new(&uid, "default", "web");
    let host_port = 20_000 + (std::process::id() % 10_000) as u16;
    pod_ref.host_ports = vec![HostPort {
        host_port,
        container_port: 8080,
        protocol: PortProtocol::Tcp,
        host_ip: None,
    }];
    let pod = fx.net.setup(&pod_ref).await.unwrap();
    let _server = start_echo_server(&fx.netns_name(&uid), 8080).await;
    // Reach it through the host's own primary address (portmap's OUTPUT rule matches local
    // destinations; 127.0.0.1 would need route_localnet).
    let (ok, out) = run("ip", &["-4", "-o", "route", "get", "192.0.2.1"]).await;
    assert!(ok, "{out}");
    let host_ip = out
        .split_whitespace()
        .skip_while(|w| *w != "src")
        .nth(1)
        .unwrap_or_else(|| panic!("no src in {out}"))
        .to_string();
    let body = fetch(None, &format!("http://{host_ip}:{host_port}/index.html")).await;
    assert_eq!(body, "hello from pod\n");
    let dnat = rules_mentioning(&uid).await;
    assert!(
        dnat.iter()
            .any(|r| r.contains("DNAT") || r.contains("CNI-DN")),
        "{dnat:?}"
    );
    fx.net.teardown(&uid).await.unwrap();
    assert!(
        rules_mentioning(&uid).await.is_empty(),
        "portmap's rules are gone"
    );
    assert!(
        rules_mentioning(&format!("{}:{}", pod.ip, 8080))
            .await
            .is_empty(),
        "no DNAT to the old pod address"
    );
}

#[tokio::test]
async fn concurrent_setups_get_distinct_addresses_and_teardowns_release_them() {
    let fx = Fixture::new("i", 115);
    let uids: Vec<String> = (0..6).map(|_| new_uid()).collect();
    let started = Instant::now();
    let pods = futures::future::join_all(uids.iter().map(|u| fx.setup(u))).await;
    let setup = started.elapsed();
    let mut ips: Vec<Ipv4Addr> = pods.iter().map(|p| p.ip).collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), uids.len(), "distinct addresses: {pods:?}");
    assert!(ips.iter().all(|ip| fx.cidr.contains(*ip)));
    let started = Instant::now();
    let results = futures::future::join_all(uids.iter().map(|u| fx.net.teardown(u))).await;
    let teardown = started.elapsed();
    for r in results {
        r.unwrap();
    }
    assert!(fx.ipam_files().is_empty());
    assert!(bridge_ports(&fx.cfg.bridge).await.is_empty());
    eprintln!(
        "{} pods concurrently: setup {:.1} ms, teardown {:.1} ms",
        uids.len(),
        ms(setup),
        ms(teardown)
    );
}

#[tokio::test]
async fn cleanup_host_leaves_no_bridge_and_no_rules() {
    let fx = Fixture::new("j", 116);
    let uid = new_uid();
    fx.setup(&uid).await;
    let tag = format!("berth:{}", fx.cfg.network_name);
    assert_eq!(
        rules_mentioning(&tag).await.len(),
        6,
        "BERTH-FWD (2 rules) + its FORWARD jump, BERTH-MASQ (RETURN, MASQUERADE) + its POSTROUTING jump"
    );
    assert!(Path::new("/sys/class/net").join(&fx.cfg.bridge).exists());
    fx.net.teardown(&uid).await.unwrap();
    fx.net.cleanup_host().await.unwrap();
    assert!(
        !Path::new("/sys/class/net").join(&fx.cfg.bridge).exists(),
        "bridge removed"
    );
    assert!(rules_mentioning(&tag).await.is_empty());
    assert!(
        rules_mentioning(&format!("name: \\\"{}\\\"", fx.cfg.network_name))
            .await
            .is_empty()
    );
    // Idempotent, and the network is usable again afterwards.
    fx.net.cleanup_host().await.unwrap();
    let pod = fx.setup(&uid).await;
    assert!(fx.cidr.contains(pod.ip));
    assert_eq!(rules_mentioning(&tag).await.len(), 6);
}

#[tokio::test]
async fn setup_and_teardown_times() {
    let fx = Fixture::new("k", 117);
    let mut setups = Vec::new();
    let mut teardowns = Vec::new();
    for _ in 0..10 {
        let uid = new_uid();
        let t = Instant::now();
        fx.setup(&uid).await;
        setups.push(ms(t.elapsed()));
        let t = Instant::now();
        fx.net.teardown(&uid).await.unwrap();
        teardowns.push(ms(t.elapsed()));
    }
    setups.sort_by(f64::total_cmp);
    teardowns.sort_by(f64::total_cmp);
    eprintln!(
        "over 10 cycles: setup median {:.1} ms (min {:.1}, max {:.1}); teardown median {:.1} ms (min {:.1}, max {:.1})",
        setups[5], setups[0], setups[9], teardowns[5], teardowns[0], teardowns[9]
    );
}

/// A process in a netns (`ip netns exec NS busybox sleep 60`), killed on drop.
struct InNetns(std::process::Child);

impl InNetns {
    fn start(netns: &str) -> InNetns {
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", netns, "/bin/busybox", "sleep", "60"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        InNetns(child)
    }

    /// Its network once `ip netns exec` has entered the netns and exec'd the sleep (same pid).
    async fn network(&self, want: impl Fn(&ProcessNetwork) -> bool) -> ProcessNetwork {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let seen = observe_process(self.0.id()).await;
            if want(&seen) || Instant::now() > deadline {
                return seen;
            }
            tokio::task::yield_now().await;
        }
    }
}

impl Drop for InNetns {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mounted(facts: &NetworkFacts) -> NetnsId {
    match facts.netns {
        NetnsPresence::Mounted(id) => id,
        other => panic!("netns not mounted: {other:?} in {facts:?}"),
    }
}

#[tokio::test]
async fn observe_sees_the_netns_a_process_is_in_and_a_deleted_or_replaced_netns() {
    let fx = Fixture::new("n", 120);
    let uid = new_uid();
    assert_eq!(fx.net.observe(&uid).await.unwrap(), NetworkFacts::default());
    let pod = fx.setup(&uid).await;
    let facts = fx.net.observe(&uid).await.unwrap();
    let Record::Complete(recorded) = &facts.record else {
        panic!("{facts:?}")
    };
    assert_eq!(
        (recorded.ip, recorded.gateway, recorded.host_veth),
        (pod.ip, pod.gateway, Some(true))
    );
    assert_eq!(recorded.netns_path, pod.netns_path);
    let id = mounted(&facts);

    let inside = InNetns::start(&fx.netns_name(&uid));
    let seen = inside.network(|p| p.netns == Some(id)).await;
    assert_eq!(seen.netns, Some(id), "{seen:?}");
    assert!(
        seen.ipv4.as_ref().is_some_and(|ips| ips.contains(&pod.ip)),
        "{seen:?}"
    );

    // Deleted behind the agent's back: the record stays, the name is gone; the process keeps
    // the namespace (and its address) alive.
    let (ok, out) = run("ip", &["netns", "delete", &fx.netns_name(&uid)]).await;
    assert!(ok, "{out}");
    let facts = fx.net.observe(&uid).await.unwrap();
    assert!(matches!(facts.record, Record::Complete(_)), "{facts:?}");
    assert_eq!(facts.netns, NetnsPresence::Absent);
    assert_eq!(observe_process(inside.0.id()).await.netns, Some(id));

    // A new namespace under the old name is another namespace.
    let (ok, out) = run("ip", &["netns", "add", &fx.netns_name(&uid)]).await;
    assert!(ok, "{out}");
    let replaced = mounted(&fx.net.observe(&uid).await.unwrap());
    assert_ne!(replaced, id);

    drop(inside);
    fx.net.teardown(&uid).await.unwrap();
    assert_eq!(fx.net.observe(&uid).await.unwrap(), NetworkFacts::default());
    fx.assert_gone(&uid, &pod).await;
}

#[tokio::test]
async fn an_unmounted_netns_file_is_not_a_namespace_and_teardown_still_removes_it() {
    let fx = Fixture::new("o", 121);
    let uid = new_uid();
    let pod = fx.setup(&uid).await;
    // What a reboot leaves when /var/run/netns is on disk: the file, no namespace.
    let (ok, out) = run("umount", &[&pod.netns_path.to_string_lossy()]).await;
    assert!(ok, "{out}");
    assert!(pod.netns_path.exists());
    let facts = fx.net.observe(&uid).await.unwrap();
    assert_eq!(facts.netns, NetnsPresence::NotMounted, "{facts:?}");
    fx.net.teardown(&uid).await.unwrap();
    fx.assert_gone(&uid, &pod).await;
}

#[tokio::test]
async fn an_agent_never_touches_the_netns_of_another_agent_with_the_same_network_name() {
    let a = Fixture::new("p", 122);
    // Agent B: the same network name (the same node name), its own root dir and instance.
    let dir_b = tempfile::tempdir().unwrap();
    let pid = std::process::id() % 100_000;
    let b = Network::new(NetworkConfig {
        bridge: format!("bt{pid}q"),
        pod_cidr: format!("10.{}.123.0/24", a.host.second_octet()),
        state_dir: dir_b.path().join("network"),
        instance: format!("i{pid}q"),
        mtu: None,
        ..a.cfg.clone()
    });
    let uid = new_uid();
    let pod = a.setup(&uid).await;
    let rules = rules_mentioning(&format!("berth:{}", a.cfg.network_name)).await;
    assert!(!rules.is_empty());

    // B's start-up clean-up lists only its own pods, and a teardown of A's pod uid by B (the
    // pod manager's clean-up of a uid it does not know) leaves A's pod alone.
    assert_eq!(b.list().await.unwrap(), Vec::<String>::new());
    assert_eq!(b.observe(&uid).await.unwrap(), NetworkFacts::default());
    b.teardown(&uid).await.unwrap();
    assert!(pod.netns_path.exists(), "A's netns survives");
    assert_eq!(
        rules_mentioning(&format!("berth:{}", a.cfg.network_name)).await,
        rules,
        "A's rules survive"
    );
    let (ok, out) = ping_from(&a.netns_name(&uid), pod.gateway).await;
    assert!(ok, "A's pod still reaches its gateway: {out}");
    assert_eq!(a.net.list().await.unwrap(), vec![uid.clone()]);

    // B's own pods get netns of B's, and B's teardown of them leaves A's alone too.
    let own = new_uid();
    let theirs = b.setup(&PodRef::new(&own, "default", "b")).await.unwrap();
    let name = theirs.netns_path.to_string_lossy().into_owned();
    assert!(name.ends_with(&format!("-i{pid}q-{own}")), "{name}");
    assert_eq!(b.list().await.unwrap(), vec![own.clone()]);
    assert_eq!(
        a.net.list().await.unwrap(),
        vec![uid.clone()],
        "A does not claim B's"
    );
    b.teardown(&own).await.unwrap();
    assert!(!theirs.netns_path.exists());
    assert!(
        pod.netns_path.exists(),
        "A's netns survives B's own teardown"
    );
    b.cleanup_host().await.unwrap();
}
