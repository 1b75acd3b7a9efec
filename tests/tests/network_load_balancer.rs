//! Issue 35, LoadBalancer Services on bare metal, on the multi-host test bed (three cluster
//! hosts and a client host, all on segment A; real agents, containers and kubectl):
//! * with a pool on the segment (`--service-lb-pool A.200-A.209`), a LoadBalancer Service gets
//!   the pool's first free address, `ipMode: VIP`; a second one the next;
//! * from the client host (on the segment, not a cluster host) HTTP to `ADDR:80` answers from
//!   the Service's pods on two hosts; the address is on exactly one host's interface, and the
//!   client's neighbour entry for it is that host's MAC;
//! * the elected host's agent killed and its link cut, the address moves to another host and
//!   traffic resumes within the node-lifecycle grace period + 5 s; the host back, the address
//!   is on one host again;
//! * deleting the Service frees the address (the next Service gets it) and removes its rules
//!   and the address from every host; `berth-agent uninstall` removes them too.
//!
//! Without a pool (k3s ServiceLB's behaviour):
//! * the ingress lists the Ready nodes' addresses, and the Service answers there;
//! * `externalTrafficPolicy: Local`: the pod sees the client's own address, and the
//!   `healthCheckNodePort` answers 200 (with the count) only on the node with a local endpoint,
//!   503 elsewhere;
//! * `loadBalancerSourceRanges` refuses a client outside the ranges, and lets it in once a
//!   range holds it.

use std::time::Instant;

use berth_tests::cluster::SEGMENT_A;
use berth_tests::host::require_tool;
use berth_tests::pod_reading::is_ready;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

/// Serves `/` (the pod's hostname) and `/cgi-bin/ip` (the client's address as the pod sees
/// it) on port 8080.
const WEB_SERVER: &str = "mkdir -p /www/cgi-bin \
    && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip \
    && chmod +x /www/cgi-bin/ip && hostname > /www/index.html && httpd -p 8080 -h /www; \
    trap 'exit 0' TERM; while true; do sleep 1; done";
/// The node lifecycle's grace period here.
const GRACE_SECS: u64 = 15;
/// Hosts 0..3 run agents; host 3 is the client.
const AGENTS: usize = 3;
const CLIENT: usize = 3;

fn web_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.28",
                                 "command": ["sh", "-c", WEB_SERVER],
                                 "ports": [{"containerPort": 8080, "name": "http"}]}]}})
}

fn lb_service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                 "ports": [{"port": 80, "targetPort": "http"}]}})
}

/// The Service's ingress entries once it has any.
fn wait_ingress(c: &Cluster, name: &str) -> Vec<Value> {
    c.wait_for(secs(30), &format!("an ingress address for {name}"), || {
        let svc = c
            .get(&format!("/api/v1/namespaces/default/services/{name}"))
            .ok_or("no service")?;
        let ingress = svc["status"]["loadBalancer"]["ingress"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        ok_if(!ingress.is_empty(), svc["status"].to_string()).map(|()| ingress)
    })
}

/// `busybox wget` of `url` from the client host: the body.
fn fetch_from_client(c: &Cluster, url: &str) -> Result<String, String> {
    let busybox = require_tool("busybox").to_string_lossy().into_owned();
    let r = c
        .test_bed()
        .host_exec(CLIENT, &["timeout", "3", &busybox, "wget", "-qO-", url]);
    if r.success() {
        Ok(r.stdout.trim().to_string())
    } else {
        Err(r.describe())
    }
}

/// The agent hosts whose interfaces hold `addr`.
fn holders(c: &Cluster, addr: &str, alive: &[usize]) -> Vec<usize> {
    alive
        .iter()
        .copied()
        .filter(|&i| {
            c.test_bed()
                .host_exec_ok(i, &["ip", "-4", "-o", "addr", "show"])
                .contains(&format!(" {addr}/32 "))
        })
        .collect()
}

/// Host `i`'s eth0 MAC.
fn mac_of(c: &Cluster, i: usize) -> String {
    let out = c
        .test_bed()
        .host_exec_ok(i, &["ip", "-o", "link", "show", "eth0"]);
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_load_balancer_address_from_the_pool_answers_on_the_segment_and_fails_over() {
    let mut c = Cluster::start_with(ClusterConfig {
        hosts: Some(TestBedLayout::new(AGENTS + 1, 0)),
        controller_args: vec![
            "--service-lb-pool".into(),
            format!("{SEGMENT_A}.200-{SEGMENT_A}.209"),
            "--node-monitor-grace-period".into(),
            format!("{GRACE_SECS}s"),
        ],
        ..ClusterConfig::agents(AGENTS)
    });
    let pool_first = c.test_bed().subnet(berth_tests::Segment::A).host(200);
    let addr = pool_first.to_string();
    let next = c
        .test_bed()
        .subnet(berth_tests::Segment::A)
        .host(201)
        .to_string();

    for i in 0..2 {
        c.apply(&web_pod(&format!("web-{i}"), c.node_name(i)));
    }
    let mut web_names = Vec::new();
    for i in 0..2 {
        let pod = c.wait_for_pod_ready("default", &format!("web-{i}"), secs(90));
        assert!(is_ready(&pod));
        web_names.push(format!("web-{i}"));
    }
    c.apply(&lb_service("web"));
    let ingress = wait_ingress(&c, "web");
    assert_eq!(
        ingress,
        [json!({"ip": addr, "ipMode": "VIP"})],
        "the pool's first address"
    );
    c.apply(&lb_service("second"));
    assert_eq!(wait_ingress(&c, "second")[0]["ip"], next.as_str());

    // From the client on the segment, both pods answer (on two hosts).
    let url = format!("http://{addr}/");
    let mut seen = std::collections::BTreeSet::new();
    c.wait_for(secs(30), "both web pods answer at the address", || {
        let body = fetch_from_client(&c, &url)?;
        seen.insert(body);
        ok_if(
            web_names.iter().all(|n| seen.contains(n)),
            format!("{seen:?}"),
        )
    });

    // The address is on exactly one host, and the client's neighbour entry is its MAC.
    let all: Vec<usize> = (0..AGENTS).collect();
    let elected = c.wait_for(secs(10), "the address on exactly one host", || {
        let h = holders(&c, &addr, &all);
        ok_if(h.len() == 1, format!("{h:?}")).map(|()| h[0])
    });
    c.ensure_for(secs(3), "the address stays on one host", || {
        let h = holders(&c, &addr, &all);
        ok_if(h == [elected], format!("{h:?}"))
    });
    let neigh = c
        .test_bed()
        .host_exec_ok(CLIENT, &["ip", "neigh", "show", &addr]);
    assert!(
        neigh.contains(&mac_of(&c, elected)),
        "client's neighbour entry {neigh:?}, host {elected}'s MAC {}",
        mac_of(&c, elected)
    );
    let nat = c
        .test_bed()
        .host_exec_ok(elected, &["iptables-save", "-t", "nat"]);
    assert!(nat.contains(&format!("-d {addr}/32")), "{nat}");

    // Failover: the elected host's agent dies and its link is cut; another host takes the
    // address (the node lifecycle marks the node within the grace period) and traffic resumes.
    c.kill9_agent(elected);
    c.test_bed().cut_off(elected);
    let cut = Instant::now();
    let alive: Vec<usize> = all.iter().copied().filter(|&i| i != elected).collect();
    let taken_over = c.wait_for(
        secs(GRACE_SECS + 30),
        "another host takes the address",
        || {
            let h = holders(&c, &addr, &alive);
            ok_if(h.len() == 1, format!("{h:?}")).map(|()| h[0])
        },
    );
    c.wait_for(secs(30), "traffic resumes at the address", || {
        fetch_from_client(&c, &url)
    });
    let resumed = cut.elapsed();
    eprintln!(
        "failover: host {elected} → host {taken_over}, traffic resumed {:.1} s after the cut \
         (grace period {GRACE_SECS} s)",
        resumed.as_secs_f64()
    );
    assert!(
        resumed.as_secs() <= GRACE_SECS + 5 + 10,
        "traffic resumed only after {resumed:?}"
    );
    let neigh = c
        .test_bed()
        .host_exec_ok(CLIENT, &["ip", "neigh", "show", &addr]);
    assert!(
        neigh.contains(&mac_of(&c, taken_over)),
        "after failover the client's entry is {neigh:?}, not host {taken_over}'s MAC (no gratuitous ARP?)"
    );

    // The host comes back: its agent runs again and the address is on one host.
    c.test_bed().reconnect(elected);
    c.restart_agent(elected);
    c.wait_for(secs(60), "the address on exactly one host again", || {
        let h = holders(&c, &addr, &all);
        ok_if(h.len() == 1, format!("{h:?}"))
    });

    // Deleting the Service frees the address and removes its rules and the address.
    c.kubectl().ok(&["delete", "service", "web"]);
    c.wait_for(
        secs(20),
        "the address and its rules gone from every host",
        || {
            let h = holders(&c, &addr, &all);
            let with_rules: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| {
                    c.test_bed()
                        .host_exec_ok(i, &["iptables-save", "-t", "nat"])
                        .contains(&format!("-d {addr}/32"))
                })
                .collect();
            ok_if(
                h.is_empty() && with_rules.is_empty(),
                format!("address on {h:?}, rules on {with_rules:?}"),
            )
        },
    );
    c.apply(&lb_service("third"));
    assert_eq!(
        wait_ingress(&c, "third")[0]["ip"],
        addr.as_str(),
        "the freed address is the first free one again"
    );

    // `berth-agent uninstall` on the host announcing it removes the address and the rules.
    let holder = c.wait_for(secs(20), "the third's address on one host", || {
        let h = holders(&c, &addr, &all);
        ok_if(h.len() == 1, format!("{h:?}")).map(|()| h[0])
    });
    c.agent_mut(holder).terminate();
    let r = c.agent(holder).uninstall();
    assert!(r.success(), "{}", r.describe());
    assert!(holders(&c, &addr, &[holder]).is_empty(), "{}", r.stdout);
    let left = c.test_bed().host_exec_ok(holder, &["iptables-save"]);
    assert!(
        !left.contains(&format!("{addr}/32")) && !left.contains("BERTH-PROXY-FW-"),
        "left by uninstall:\n{left}"
    );
}

/// The address in a CGI `REMOTE_ADDR` (IPv4-mapped when httpd listens on IPv6).
fn remote_addr(body: &str) -> String {
    body.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("::ffff:")
        .to_string()
}

#[test]
fn without_a_pool_the_nodes_answer_with_local_policy_health_checks_and_source_ranges() {
    let c = Cluster::start_with(ClusterConfig {
        hosts: Some(TestBedLayout::new(AGENTS + 1, 0)),
        ..ClusterConfig::agents(AGENTS)
    });
    let bed = c.test_bed();
    let node_addrs: Vec<String> = (0..AGENTS)
        .map(|i| bed.host(i).address.to_string())
        .collect();
    let client_addr = bed.host(CLIENT).address.to_string();
    for i in 0..2 {
        c.apply(&web_pod(&format!("web-{i}"), c.node_name(i)));
    }
    for i in 0..2 {
        c.wait_for_pod_ready("default", &format!("web-{i}"), secs(90));
    }

    // The ingress is the Ready nodes' addresses, and each answers.
    c.apply(&lb_service("web"));
    let c_ref = &c;
    c.wait_for(secs(30), "every node address in the ingress", || {
        let mut ips: Vec<String> = wait_ingress(c_ref, "web")
            .iter()
            .filter_map(|i| i["ip"].as_str().map(str::to_string))
            .collect();
        ips.sort();
        let mut want = node_addrs.clone();
        want.sort();
        ok_if(ips == want, format!("{ips:?}"))
    });
    for a in &node_addrs {
        c.wait_for(secs(30), &format!("the Service answers at {a}"), || {
            fetch_from_client(&c, &format!("http://{a}/"))
        });
    }

    // externalTrafficPolicy: Local keeps the client's address; the health check node port
    // says where the local endpoints are.
    let mut local = lb_service("local");
    local["spec"]["externalTrafficPolicy"] = json!("Local");
    local["spec"]["selector"] = json!({"app": "web"});
    local["spec"]["ports"] = json!([{"port": 81, "targetPort": "http"}]);
    c.apply(&local);
    wait_ingress(&c, "local");
    let svc = c
        .get("/api/v1/namespaces/default/services/local")
        .expect("network_load_balancer");
    let hc = svc["spec"]["healthCheckNodePort"]
        .as_i64()
        .expect("a health check node port for a Local LoadBalancer");
    let on_host0 = format!("http://{}:81/cgi-bin/ip", node_addrs[0]);
    let seen = c.wait_for(secs(30), "the Local Service answers on host 0", || {
        fetch_from_client(&c, &on_host0)
    });
    assert_eq!(remote_addr(&seen), client_addr, "the client's own address");
    let health = |i: usize| fetch_from_client(&c, &format!("http://{}:{hc}/", node_addrs[i]));
    let body = c.wait_for(secs(20), "the health check answers 200 on host 0", || {
        health(0)
    });
    let v: Value = serde_json::from_str(&body).expect("JSON health check body");
    assert_eq!(
        v["service"],
        json!({"namespace": "default", "name": "local"})
    );
    assert_eq!(v["localEndpoints"], 1);
    c.wait_for(
        secs(20),
        "the health check answers 503 on host 2",
        || match health(2) {
            Ok(body) => Err(format!("200: {body}")),
            Err(e) => ok_if(e.contains("503"), e),
        },
    );

    // loadBalancerSourceRanges: a client outside the ranges is refused, inside is let in.
    let mut ranged = lb_service("ranged");
    ranged["spec"]["ports"] = json!([{"port": 82, "targetPort": "http"}]);
    ranged["spec"]["loadBalancerSourceRanges"] = json!(["192.0.2.0/24"]);
    c.apply(&ranged);
    wait_ingress(&c, "ranged");
    let url = format!("http://{}:82/", node_addrs[1]);
    // The rules are written once the proxy sees the Service: wait for its FW chain, then check
    // that the client stays refused.
    c.wait_for(secs(20), "the source-range chain on host 1", || {
        let nat = c
            .test_bed()
            .host_exec_ok(1, &["iptables-save", "-t", "nat"]);
        ok_if(
            nat.lines()
                .any(|l| l.starts_with("-A BERTH-FW-") && l.contains("-s 192.0.2.0/24")),
            "no FW rule yet",
        )
    });
    c.ensure_for(
        secs(3),
        "a client outside the ranges is refused",
        || match fetch_from_client(&c, &url) {
            Ok(body) => Err(format!("answered: {body}")),
            Err(_) => Ok(()),
        },
    );
    ranged["spec"]["loadBalancerSourceRanges"] = json!([format!("{client_addr}/32")]);
    c.apply(&ranged);
    c.wait_for(secs(20), "the client let in once a range holds it", || {
        fetch_from_client(&c, &url)
    });
}
