//! Issue 9, item 5: pod sandbox recovery. A pod whose network namespace was deleted (or
//! replaced) is killed and started again in a new sandbox, as the kubelet does on a sandbox
//! change: with the agent restarted over it (the containers restart within 10 s of the agent's
//! start) and under a running agent. Afterwards the pod IP in the API is the address the
//! container really has, the container runs in the pod's named netns, and the pod answers on
//! its IP. And an agent never deletes another agent's namespaces, even one with its node name.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_tests::agent::{Agent, AgentConfig};
use berth_tests::host::{Tenancy, tool_ok, unique_suffix};
use berth_tests::pod_reading::{container_id, container_status, is_ready, phase, restart_count};
use berth_tests::pod_specs::sh_pod;
use berth_tests::sweep::delete_link;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Controller, http_get, secs};
use serde_json::Value;

const START: Duration = secs(90);
const PORT: u16 = 8080;

/// A busybox httpd serving `<name>` at `/`, that stops at once on SIGTERM (the shell traps it;
/// httpd goes with the container's init).
fn web_pod(name: &str, node: &str) -> Value {
    sh_pod(
        name,
        node,
        &format!(
            "mkdir -p /tmp/www && echo {name} > /tmp/www/index.html && \
             trap 'exit 0' TERM; httpd -f -p {PORT} -h /tmp/www & wait"
        ),
    )
}

fn uid_of(pod: &Value) -> String {
    pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What the API says of container `main`: (containerID, restartCount, podIP).
fn identity(pod: &Value) -> (String, u64, String) {
    let cs = container_status(pod, "main");
    (
        cs.and_then(container_id).unwrap_or_default().to_string(),
        cs.map_or(0, restart_count),
        pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The local IPv4 addresses of a `fib_trie` listing (`|-- <addr>` then `/32 host LOCAL`),
/// without loopback.
fn local_addresses(fib_trie: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut leaf = None;
    for line in fib_trie.lines().map(str::trim) {
        if let Some(addr) = line.strip_prefix("|-- ") {
            leaf = Some(addr.to_string());
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(a) = leaf.take().filter(|a| !a.starts_with("127.")) {
                out.push(a);
            }
        } else {
            leaf = None;
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The pod's named netns (of the cluster's agent 0).
fn pod_netns(c: &Cluster, uid: &str) -> String {
    let names: Vec<String> = c
        .netns(0)
        .into_iter()
        .filter(|n| n.ends_with(uid))
        .collect();
    match names.as_slice() {
        [one] => one.clone(),
        _ => panic!(
            "pod {uid}: expected one netns, found {names:?}\n{}",
            c.logs().render()
        ),
    }
}

/// (device, inode) of a namespace file.
fn ns_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Checks a recovered pod: its container runs in the pod's named netns, the podIP in the API
/// is the address the container has, and the pod answers on it. Returns the podIP.
fn check_network(c: &Cluster, name: &str) -> String {
    let pod = c.pod("default", name).expect("the pod");
    let (id, _, ip) = identity(&pod);
    let id = id.trim_start_matches("containerd://").to_string();
    let uid = uid_of(&pod);
    let netns = pod_netns(c, &uid);
    let task = c
        .containerd()
        .tasks(c.agent(0).namespace())
        .into_iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no task {id}\n{}", c.logs().render()));
    let named = ns_identity(&Path::new("/var/run/netns").join(&netns));
    let joined = ns_identity(&PathBuf::from(format!("/proc/{}/ns/net", task.pid)));
    assert!(named.is_some(), "netns {netns} is not there");
    assert_eq!(joined, named, "container {id} runs in netns {netns}");
    let inside = local_addresses(&c.exec_ok("default", name, None, &["cat", "/proc/net/fib_trie"]));
    assert_eq!(
        inside,
        vec![ip.clone()],
        "status.podIP {ip} is the container's one address"
    );
    let page = c.wait_for(
        secs(10),
        &format!("http://{ip}:{PORT}/ from the host"),
        || match http_get(&ip, PORT, "/") {
            Ok(r) if r.status == 200 => Ok(r.body),
            other => Err(other),
        },
    );
    assert_eq!(page.trim(), name);
    ip
}

/// Waits until container `main` runs Ready again with `restartCount` `restarts`, in another
/// container than `old_id`; returns the pod.
fn wait_restarted(c: &Cluster, name: &str, old_id: &str, restarts: u64, within: Duration) -> Value {
    c.wait_pod(
        "default",
        name,
        within,
        &format!("restarted in a new sandbox (restartCount {restarts}), Ready"),
        |p| {
            let (id, count, ip) = identity(p);
            if id != old_id && count == restarts && phase(p) == "Running" && is_ready(p) {
                if ip.is_empty() {
                    return Err("no podIP".into());
                }
                Ok(p.clone())
            } else {
                Err(format!("container {id}, restartCount {count}"))
            }
        },
    )
}

fn sandbox_changed_events(c: &Cluster, name: &str) -> Vec<Value> {
    c.pod_events("default", name)
        .into_iter()
        .filter(|e| e["reason"] == "SandboxChanged")
        .collect()
}

/// Starts the `web` pod on `node` and returns it once Ready.
fn ready_web(c: &Cluster, node: &str) -> Value {
    c.apply(&web_pod("web", node));
    c.wait_for_pod_ready("default", "web", START)
}

#[test]
fn a_pod_whose_netns_was_deleted_is_restarted_in_a_new_sandbox_when_the_agent_restarts() {
    let mut c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    let pod = ready_web(&c, &node);
    let (old_id, restarts, old_ip) = identity(&pod);
    assert_eq!(restarts, 0);
    assert_eq!(check_network(&c, "web"), old_ip);
    let netns = pod_netns(&c, &uid_of(&pod));

    // The host loses the pod's netns while the agent is down; the container keeps running in
    // the (now nameless) namespace.
    c.kill9_agent(0);
    tool_ok("ip", &["netns", "delete", &netns]);
    let old = old_id.trim_start_matches("containerd://");
    assert!(
        c.containerd()
            .tasks(c.agent(0).namespace())
            .iter()
            .any(|t| t.id == old && t.status == "RUNNING")
    );

    c.restart_agent(0);
    let started = Instant::now();
    wait_restarted(&c, "web", &old_id, 1, secs(10));
    eprintln!(
        "berth-tests: restarted in a new sandbox {:.1?} after the agent's start",
        started.elapsed()
    );
    check_network(&c, "web");
    assert!(
        !c.containerd()
            .tasks(c.agent(0).namespace())
            .iter()
            .any(|t| t.id == old && t.status == "RUNNING"),
        "the old container was killed"
    );
    let events = sandbox_changed_events(&c, "web");
    assert_eq!(events.len(), 1, "{}", c.event_lines("default", "web"));
    assert_eq!(events[0]["type"], "Normal");
    assert_eq!(
        events[0]["message"],
        "Pod sandbox changed, it will be killed and re-created."
    );
    // And it stays that way: no more restarts, no more sandbox changes.
    c.ensure_for(secs(3), "the recovered pod stays put", || {
        let p = c.pod("default", "web").ok_or("gone")?;
        match identity(&p).1 {
            1 => Ok(()),
            n => Err(format!("restartCount {n}")),
        }
    });
}

#[test]
fn a_netns_replaced_or_deleted_under_a_running_agent_is_recovered() {
    let (c, node) = Cluster::start_one();
    let pod = ready_web(&c, &node);
    let (first_id, _, _) = identity(&pod);
    let uid = uid_of(&pod);

    // A new, empty namespace under the pod's netns name: the container is not in it.
    let netns = pod_netns(&c, &uid);
    tool_ok("ip", &["netns", "delete", &netns]);
    tool_ok("ip", &["netns", "add", &netns]);
    // The agent checks every pod at least every 10 s.
    let pod = wait_restarted(&c, "web", &first_id, 1, secs(30));
    check_network(&c, "web");

    // Then the netns simply deleted. The container's second restart falls in its crash-loop
    // back-off (10 s), as the kubelet's would.
    let (second_id, _, _) = identity(&pod);
    tool_ok("ip", &["netns", "delete", &pod_netns(&c, &uid)]);
    wait_restarted(&c, "web", &second_id, 2, secs(40));
    check_network(&c, "web");
    assert_eq!(
        sandbox_changed_events(&c, "web")
            .iter()
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum::<u64>(),
        2,
        "{}",
        c.event_lines("default", "web")
    );
}

/// Removes agent B's bridge at the end (its netns and tagged rules share agent A's network
/// name, so the cluster's own sweep removes them; containerd's drop its containers).
struct BridgeGuard(String);

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        delete_link(&self.0);
    }
}

#[test]
fn an_agent_with_the_same_node_name_leaves_the_other_agents_netns_alone() {
    let (c, node) = Cluster::start_one();
    let pod = ready_web(&c, &node);
    let (_, _, ip) = identity(&pod);
    let netns = pod_netns(&c, &uid_of(&pod));

    // Agent B: another cluster's node of the same name on this host (its own controller,
    // root dir, containerd namespace and bridge), sharing containerd.
    // A lane of its own: its pod range is no other cluster's (this one's included).
    let lease_b = Tenancy::arrive();
    let cidr_b = lease_b.cluster_cidr();
    let controller_b = Controller::start_with(&["--cluster-cidr", &cidr_b]);
    let bridge_b = format!("btw{}", unique_suffix());
    let _bridge_guard = BridgeGuard(bridge_b.clone());
    let mut b = Agent::start(AgentConfig {
        server: controller_b.url().to_string(),
        token: controller_b.join_token(),
        containerd_namespace: format!("{}-twin", c.agent(0).namespace()),
        cni_bridge: bridge_b,
        cluster_cidr: cidr_b,
        ..c.agent(0).config().clone()
    });
    assert_eq!(b.node_name(), node);
    let api_b = controller_b.admin_api();
    controller_b.wait_for(secs(60), "agent B's node with a podCIDR", || {
        if let Some(status) = b.exited() {
            panic!("agent B exited with {status}\n{}", b.logs().render());
        }
        let node = api_b.get(&format!("/api/v1/nodes/{node}")).json();
        node["spec"]["podCIDR"]
            .as_str()
            .map(str::to_string)
            .ok_or("no podCIDR yet")
    });

    // B's start-up clean-up (its pod manager starts once the node has a podCIDR) and its first
    // periodic resync (10 s) leave A's netns and pod be.
    let served = || -> Result<(), String> {
        if !Path::new("/var/run/netns").join(&netns).exists() {
            return Err(format!("A's netns {netns} is gone"));
        }
        match http_get(&ip, PORT, "/") {
            Ok(r) if r.status == 200 => Ok(()),
            other => Err(format!("A's pod does not answer: {other:?}")),
        }
    };
    c.ensure_for(secs(12), "A's pod keeps its netns and answers", served);

    // B runs a pod of its own beside A's, in a netns of its own, and cleans it up again
    // without touching A's.
    let created = api_b.create("/api/v1/namespaces/default/pods", &web_pod("twin", &node));
    let twin_uid = uid_of(&created);
    let twin_netns = controller_b.wait_for(secs(60), "B's pod running in a netns of B's", || {
        let pod = api_b.get("/api/v1/namespaces/default/pods/twin").json();
        if !(phase(&pod) == "Running" && is_ready(&pod)) {
            return Err(format!("phase {}", phase(&pod)));
        }
        c.netns(0)
            .into_iter()
            .find(|n| n.ends_with(&twin_uid))
            .ok_or_else(|| "no netns".to_string())
    });
    // Each netns name carries its agent's instance id (kept in the agent's root dir).
    let instance = |root: PathBuf| {
        let id = std::fs::read_to_string(root.join("network/instance-id"))
            .unwrap_or_else(|e| panic!("no instance id in {}: {e}", root.display()));
        format!("-{}-", id.trim())
    };
    let (instance_a, instance_b) = (instance(c.agent(0).root_dir()), instance(b.root_dir()));
    assert_ne!(instance_a, instance_b);
    assert!(
        netns.contains(&instance_a),
        "{netns} carries A's {instance_a}"
    );
    assert!(
        twin_netns.contains(&instance_b),
        "{twin_netns} carries B's {instance_b}"
    );
    served().unwrap_or_else(|e| panic!("{e}\n{}", c.logs().render()));
    api_b.send(berth_tests::Req::delete(
        "/api/v1/namespaces/default/pods/twin",
    ));
    controller_b.wait_for(secs(60), "B's pod and its netns gone", || {
        let gone = api_b.get("/api/v1/namespaces/default/pods/twin").status == 404;
        let netns_left = Path::new("/var/run/netns").join(&twin_netns).exists();
        ok_if(
            gone && !netns_left,
            format!("pod gone {gone}, netns left {netns_left}"),
        )
    });
    served().unwrap_or_else(|e| panic!("{e}\n{}", c.logs().render()));
    b.kill9();
}
