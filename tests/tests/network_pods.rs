//! Issue 12 on the multi-host test bed (three hosts on segment A, one behind a router on
//! segment B; real agents, containerd and kubectl):
//! * pods on every host reach pods on every other host by pod IP, host-gw within the segment
//!   and VXLAN across the router, and see each other's real address; traffic leaving the
//!   cluster CIDR is masqueraded to the host's address; a deleted Node's route and FDB entry
//!   go from the other hosts;
//! * routes removed behind the agent's back come back, a host cut off and reconnected works
//!   again, and an agent restart keeps routes and rules (no duplicates, no lost packets
//!   between its pods and another host's);
//! * a ClusterIP Service over three pods on three hosts answers from every host with all three,
//!   by cluster IP and by name through the host's cluster DNS
//!   (and a pod that reaches itself through it, hairpin), follows a scale-down within 2 s, pins
//!   a client with `ClientIP` affinity, and its NodePort answers on every host's address.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};

use berth_tests::host::{free_port_on, require_tool};
use berth_tests::pod_reading::is_ready;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

/// Serves `/` (the pod's hostname) and `/cgi-bin/ip` (the client's address, as the server
/// sees it) on port 8080.
const ECHO_SERVER: &str = "mkdir -p /www/cgi-bin \
    && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip \
    && chmod +x /www/cgi-bin/ip && hostname > /www/index.html && httpd -p 8080 -h /www; \
    trap 'exit 0' TERM; while true; do sleep 1; done";

const BEHIND_ROUTER: usize = 3;

fn bed_cluster() -> Cluster {
    Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(3, 1)))
}

fn echo_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"role": "echo"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.28",
                                 "command": ["sh", "-c", ECHO_SERVER]}]}})
}

/// The address in a CGI `REMOTE_ADDR` (IPv4-mapped when httpd listens on IPv6).
fn remote_addr(body: &str) -> String {
    body.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("::ffff:")
        .to_string()
}

/// `wget -qO- URL` in `pod` (busybox's `-T` segfaults; `timeout` bounds it instead).
fn fetch(c: &Cluster, pod: &str, url: &str) -> Result<String, String> {
    let r = c.exec("default", pod, None, &["timeout", "3", "wget", "-qO-", url]);
    if r.success() {
        Ok(r.stdout)
    } else {
        Err(r.describe())
    }
}

/// `ip … ` in host `i`'s network namespace.
fn host_ip(c: &Cluster, i: usize, args: &[&str]) -> String {
    let mut full = vec!["ip"];
    full.extend(args);
    c.test_bed().host_exec_ok(i, &full)
}

/// Host `i`'s agent routes (`ip route show proto 98`), one per line.
fn agent_routes(c: &Cluster, i: usize) -> Vec<String> {
    host_ip(c, i, &["-4", "route", "show", "proto", "98"])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn pod_cidr(c: &Cluster, i: usize) -> String {
    c.get(&format!("/api/v1/nodes/{}", c.node_name(i)))
        .expect("network_pods")["spec"]["podCIDR"]
        .as_str()
        .expect("network_pods")
        .to_string()
}

/// Starts an echo pod on every host; returns their names and IPs.
fn echo_pods_everywhere(c: &Cluster) -> Vec<(String, String)> {
    let n = c.test_bed().hosts().len();
    for i in 0..n {
        c.apply(&echo_pod(&format!("echo-{i}"), c.node_name(i)));
    }
    (0..n)
        .map(|i| {
            let name = format!("echo-{i}");
            let pod = c.wait_for_pod_ready("default", &name, secs(90));
            (
                name,
                pod["status"]["podIP"]
                    .as_str()
                    .expect("network_pods")
                    .to_string(),
            )
        })
        .collect()
}

/// A busybox httpd in the machine's own network namespace on the bed's gateway address,
/// answering `/cgi-bin/ip` like the echo pods: the world outside the cluster.
struct OutsideServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl OutsideServer {
    fn start(address: Ipv4Addr) -> OutsideServer {
        let dir = tempfile::tempdir().expect("network_pods");
        let cgi = dir.path().join("cgi-bin");
        std::fs::create_dir_all(&cgi).expect("network_pods");
        std::fs::write(
            cgi.join("ip"),
            "#!/bin/sh\necho Content-Type: text/plain\necho\necho $REMOTE_ADDR\n",
        )
        .expect("network_pods");
        let status = Command::new("chmod")
            .args(["+x"])
            .arg(cgi.join("ip"))
            .status()
            .expect("network_pods");
        assert!(status.success());
        let port = free_port_on(address);
        let child = Command::new(require_tool("busybox"))
            .args(["httpd", "-f", "-p", &format!("{address}:{port}"), "-h"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("network_pods");
        OutsideServer {
            child,
            url: format!("http://{address}:{port}/cgi-bin/ip"),
            _dir: dir,
        }
    }
}

impl Drop for OutsideServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn pods_on_every_host_reach_each_other_by_ip_with_their_own_source_address() {
    let mut c = bed_cluster();
    let pods = echo_pods_everywhere(&c);
    let n = pods.len();

    // Every pair, both ways; the server sees the client pod's own address.
    for (from, (from_pod, from_ip)) in pods.iter().enumerate() {
        for (to, (_, to_ip)) in pods.iter().enumerate().filter(|(to, _)| *to != from) {
            let url = format!("http://{to_ip}:8080/cgi-bin/ip");
            let seen = c.wait_for(
                secs(20),
                &format!("pod on host {from} → pod on host {to}"),
                || fetch(&c, from_pod, &url),
            );
            assert_eq!(
                remote_addr(&seen),
                *from_ip,
                "{from} → {to}: not the pod's address"
            );
        }
    }

    // host-gw inside segment A, VXLAN to and from the host behind the router.
    let vxlan_mac = |i: usize| -> String {
        let node = c
            .get(&format!("/api/v1/nodes/{}", c.node_name(i)))
            .expect("network_pods");
        node["metadata"]["annotations"]["network.berth.io/vtep-mac"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let routes_0 = agent_routes(&c, 0);
    assert_eq!(routes_0.len(), n - 1, "{routes_0:#?}");
    for peer in [1, 2] {
        let via = format!(
            "{} via {} dev eth0",
            pod_cidr(&c, peer),
            c.test_bed().host(peer).address
        );
        assert!(
            routes_0.iter().any(|r| r.starts_with(&via)),
            "{via} not in {routes_0:#?}"
        );
    }
    let far = pod_cidr(&c, BEHIND_ROUTER);
    assert!(
        routes_0
            .iter()
            .any(|r| r.starts_with(&far) && r.contains("dev berth.1") && r.contains("onlink")),
        "{far} not through berth.1 in {routes_0:#?}"
    );
    let fdb_0 = c
        .test_bed()
        .host_exec_ok(0, &["bridge", "fdb", "show", "dev", "berth.1"]);
    let far_entry = format!(
        "{} dst {}",
        vxlan_mac(BEHIND_ROUTER),
        c.test_bed().host(BEHIND_ROUTER).address
    );
    assert!(fdb_0.contains(&far_entry), "{far_entry} not in {fdb_0}");
    let routes_far = agent_routes(&c, BEHIND_ROUTER);
    assert_eq!(routes_far.len(), n - 1, "{routes_far:#?}");
    assert!(
        routes_far.iter().all(|r| r.contains("dev berth.1")),
        "{routes_far:#?}"
    );

    // Outside the cluster CIDR: masqueraded to the host's address, from either segment.
    let outside = OutsideServer::start(c.test_bed().gateway());
    for i in [0, BEHIND_ROUTER] {
        let seen = c.wait_for(secs(10), &format!("pod on host {i} → outside"), || {
            fetch(&c, &pods[i].0, &outside.url)
        });
        assert_eq!(
            remote_addr(&seen),
            c.test_bed().host(i).address.to_string(),
            "host {i}'s pod traffic to the outside is not masqueraded"
        );
    }

    // A node that goes away takes its route and its FDB entry off the other hosts.
    let gone_mac = vxlan_mac(BEHIND_ROUTER);
    c.agent_mut(BEHIND_ROUTER).kill9();
    c.kubectl()
        .ok(&["delete", "node", c.node_name(BEHIND_ROUTER)]);
    c.wait_for(
        secs(10),
        "the deleted node's route and FDB entry gone",
        || {
            let routes = agent_routes(&c, 0);
            let fdb = c
                .test_bed()
                .host_exec_ok(0, &["bridge", "fdb", "show", "dev", "berth.1"]);
            if routes.iter().any(|r| r.starts_with(&far)) || fdb.contains(&gone_mac) {
                Err(format!("{routes:#?}\n{fdb}"))
            } else {
                Ok(())
            }
        },
    );
    assert_eq!(agent_routes(&c, 0).len(), n - 2);
}

#[test]
fn routes_come_back_and_an_agent_restart_keeps_traffic_flowing() {
    let mut c = bed_cluster();
    let pods = echo_pods_everywhere(&c);
    let n = pods.len();
    let reach = |c: &Cluster, from: usize, to: usize| {
        let url = format!("http://{}:8080/", pods[to].1);
        c.wait_for(
            secs(20),
            &format!("pod on host {from} → pod on host {to}"),
            || fetch(c, &pods[from].0, &url),
        );
    };
    for to in 1..n {
        reach(&c, 0, to);
    }
    let before = agent_routes(&c, 1);
    assert_eq!(before.len(), n - 1, "{before:#?}");

    // Routes removed behind the agent's back are put back.
    host_ip(&c, 1, &["route", "flush", "proto", "98"]);
    c.wait_for(secs(10), "host 1's routes back", || {
        let now = agent_routes(&c, 1);
        ok_if(now == before, format!("{now:#?}"))
    });

    // Cut off and reconnected: traffic flows again, nothing doubled.
    c.test_bed().cut_off(1);
    c.test_bed().reconnect(1);
    reach(&c, 1, 0);
    reach(&c, 1, BEHIND_ROUTER);
    assert_eq!(agent_routes(&c, 1), before);

    // An agent restart: no packet between its pod and another host's is lost, and afterwards
    // routes and nat rules are what they were.
    let nat_rules = |c: &Cluster| -> Vec<String> {
        let mut rules: Vec<String> = c
            .test_bed()
            .host_exec_ok(1, &["iptables-save", "-t", "nat"])
            .lines()
            .filter(|l| l.starts_with("-A"))
            .map(str::to_string)
            .collect();
        rules.sort();
        rules
    };
    let rules_before = nat_rules(&c);
    // Host 0's pod pings host 1's through the restart (the exec goes through host 0's agent,
    // which stays up), started and answering before the agent goes.
    let mut ping = c.kubectl().spawn(&[
        "exec", "-n", "default", &pods[0].0, "--", "ping", "-c", "40", "-i", "0.2", &pods[1].1,
    ]);
    ping.expect_line(secs(20), "the first echo reply", |l| {
        l.contains("bytes from")
    });
    c.agent_mut(1).restart();
    c.wait_node_ready(1);
    let summary = ping.expect_line(secs(30), "ping's summary", |l| l.contains("packet loss"));
    assert!(summary.contains(" 0% packet loss"), "{}", ping.describe());
    reach(&c, 1, BEHIND_ROUTER);
    assert_eq!(agent_routes(&c, 1), before);
    let rules_after = nat_rules(&c);
    assert_eq!(
        rules_after, rules_before,
        "nat rules changed across the restart"
    );

    // Uninstalled (agent stopped, pods still running): nothing of the agent is left on host 1.
    c.agent_mut(1).kill9();
    let r = c.agent(1).uninstall();
    assert!(r.success(), "{}", r.describe());
    let bed = c.test_bed();
    let network = c.agent(1).network_name();
    let saved = bed.host_exec_ok(1, &["iptables-save"]);
    assert!(
        !saved.contains("berth:") && !saved.contains("BERTH-") && !saved.contains("CNI-"),
        "{saved}"
    );
    assert!(agent_routes(&c, 1).is_empty(), "{:#?}", agent_routes(&c, 1));
    let links = host_ip(&c, 1, &["-o", "link", "show"]);
    assert!(
        !links.contains("berth.1")
            && !links.contains(c.agent(1).bridge())
            && !links.contains("veth"),
        "{links}"
    );
    let netns = berth_tests::host::tool_ok("ip", &["netns", "list"]);
    assert!(!netns.contains(&format!("{network}-")), "{netns}");
    let left = c.containerd().clean_namespace(c.agent(1).namespace());
    assert!(left.is_empty(), "containers left: {left:?}");
}

#[test]
fn a_service_answers_from_every_host_with_pods_on_other_hosts() {
    let c = bed_cluster();
    let n = c.test_bed().hosts().len();
    let mut server = echo_pod("x", "x")["spec"]["containers"][0].clone();
    server["ports"] = json!([{"containerPort": 8080, "name": "http"}]);
    c.apply(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [server],
                                       "affinity": {"podAntiAffinity": {
                                           "requiredDuringSchedulingIgnoredDuringExecution": [{
                                               "labelSelector": {"matchLabels": {"app": "web"}},
                                               "topologyKey": "kubernetes.io/hostname"}]}}}}}}));
    c.apply(&json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "selector": {"app": "web"},
                 "ports": [{"port": 80, "targetPort": "http"}]}}));
    for i in 0..n {
        c.apply(&echo_pod(&format!("client-{i}"), c.node_name(i)));
    }
    for i in 0..n {
        c.wait_for_pod_ready("default", &format!("client-{i}"), secs(90));
    }
    let web_pods = |c: &Cluster| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = c
            .live_pods("default", "app%3Dweb")
            .iter()
            .filter(|p| is_ready(p))
            .map(|p| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    p["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let web = c.wait_for(secs(90), "three ready web pods on three hosts", || {
        let pods = web_pods(&c);
        let mut nodes: Vec<&String> = pods.iter().map(|(_, n)| n).collect();
        nodes.dedup();
        if pods.len() == 3 && nodes.len() == 3 {
            Ok(pods)
        } else {
            Err(format!("{pods:?}"))
        }
    });
    let names: Vec<String> = web.iter().map(|(n, _)| n.clone()).collect();
    let svc = c
        .get("/api/v1/namespaces/default/services/web")
        .expect("network_pods");
    let cluster_ip = svc["spec"]["clusterIP"]
        .as_str()
        .expect("network_pods")
        .to_string();
    let node_port = svc["spec"]["ports"][0]["nodePort"]
        .as_i64()
        .expect("network_pods");

    // 20 requests from each host's client: all three answer overall, every client gets answers.
    let answers = |c: &Cluster, client: usize, count: usize| -> Vec<String> {
        let script = format!(
            "for i in $(seq {count}); do timeout 2 wget -qO- http://{cluster_ip}/; done; true"
        );
        let out = c.exec_ok(
            "default",
            &format!("client-{client}"),
            None,
            &["sh", "-c", &script],
        );
        out.lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    c.wait_for(
        secs(20),
        "the cluster IP answering from every host with all three",
        || {
            let mut all: Vec<String> = Vec::new();
            for i in 0..n {
                let got = answers(&c, i, 20);
                if got.len() != 20 {
                    return Err(format!(
                        "client on host {i} got {} of 20 answers: {got:?}",
                        got.len()
                    ));
                }
                all.extend(got);
            }
            all.sort();
            all.dedup();
            ok_if(all == names, format!("{all:?}"))
        },
    );

    // By name, through each host's cluster DNS: short and fully qualified.
    for i in 0..n {
        for name in ["web.default", "web.default.svc.cluster.local"] {
            c.wait_for(secs(10), &format!("{name} from host {i}"), || {
                let got = fetch(&c, &format!("client-{i}"), &format!("http://{name}/"))?;
                ok_if(names.contains(&got.trim().to_string()), got)
            });
        }
    }

    // Hairpin: a web pod reaching the Service is sometimes sent to itself, and answers.
    let own = names[0].clone();
    c.wait_for(
        secs(20),
        "a web pod answering itself through the Service",
        || {
            let script = format!(
                "for i in $(seq 20); do timeout 2 wget -qO- http://{cluster_ip}/; done; true"
            );
            let out = c.exec_ok("default", &own, None, &["sh", "-c", &script]);
            ok_if(out.lines().any(|l| l.trim() == own), out)
        },
    );

    // The NodePort, from outside, on every host's address (the router's hop included).
    for (i, host) in c.test_bed().hosts().iter().enumerate() {
        let url = format!("http://{}:{node_port}/", host.address);
        let busybox = require_tool("busybox").to_string_lossy().into_owned();
        c.wait_for(secs(10), &format!("NodePort on host {i}"), || {
            let r = berth_tests::host::tool("timeout", &["3", &busybox, "wget", "-qO-", &url]);
            ok_if(
                r.success() && names.contains(&r.stdout.trim().to_string()),
                r.describe(),
            )
        });
    }

    // ClientIP affinity pins a client to one pod.
    c.kubectl().ok(&[
        "patch",
        "service",
        "web",
        "-p",
        r#"{"spec":{"sessionAffinity":"ClientIP"}}"#,
    ]);
    c.wait_for(secs(10), "one client pinned to one pod", || {
        let mut got = answers(&c, 0, 10);
        got.sort();
        got.dedup();
        ok_if(got.len() == 1, format!("{got:?}"))
    });
    c.kubectl().ok(&[
        "patch",
        "service",
        "web",
        "-p",
        r#"{"spec":{"sessionAffinity":"None","sessionAffinityConfig":null}}"#,
    ]);

    // Scaled to one: once the slice says so, within 2 s only that pod answers.
    c.kubectl()
        .ok(&["scale", "deployment", "web", "--replicas=1"]);
    let left = c.wait_for(secs(30), "one endpoint left in the slice", || {
        let list = c
            .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name%3Dweb")
            .ok_or("no list")?;
        let eps: Vec<&Value> = list["items"].as_array().into_iter().flatten()
            .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
            .filter(|e| e["conditions"]["ready"] == true)
            .collect();
        match eps.as_slice() {
            [one] => Ok(one["targetRef"]["name"].as_str().unwrap_or_default().to_string()),
            other => Err(format!("{} ready endpoints", other.len())),
        }
    });
    c.wait_for(secs(2), "only the remaining pod answering", || {
        let mut got = answers(&c, 1, 10);
        got.sort();
        got.dedup();
        ok_if(got == [left.clone()], format!("{got:?}"))
    });
}
