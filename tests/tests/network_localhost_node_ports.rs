//! Localhost NodePorts, as kube-proxy's iptables mode serves them: on a two-host test bed (each
//! agent in a network namespace of its own, so the sysctl it sets is that host's), a NodePort
//! answers on 127.0.0.1 from the node's own namespace where the agent runs with the default
//! `--iptables-localhost-nodeports` (`route_localnet` set to 1, the localnet firewall chain in
//! filter INPUT and OUTPUT), for `externalTrafficPolicy` Cluster and Local alike; where the
//! agent runs with `--iptables-localhost-nodeports=false` it answers on the node's address but
//! not on 127.0.0.1, and `route_localnet` stays 0. `berth-agent uninstall` writes the sysctl
//! back and removes the firewall chain.

use berth_tests::host::require_tool;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

/// Serves `/` (the pod's hostname) on port 8080.
const ECHO_SERVER: &str = "mkdir -p /www && hostname > /www/index.html && httpd -p 8080 -h /www; \
    trap 'exit 0' TERM; while true; do sleep 1; done";

const ON: usize = 0;
const OFF: usize = 1;

fn echo_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "echo"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.28",
                                 "command": ["sh", "-c", ECHO_SERVER],
                                 "readinessProbe": {"tcpSocket": {"port": 8080},
                                                    "periodSeconds": 1}}]}})
}

fn node_port_service(name: &str, external_policy: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": "echo"},
                 "externalTrafficPolicy": external_policy,
                 "ports": [{"port": 80, "targetPort": 8080}]}})
}

/// `busybox wget -qO- URL` in host `i`'s netns, bounded by `timeout`.
fn fetch_on_host(c: &Cluster, i: usize, url: &str) -> Result<String, String> {
    let busybox = require_tool("busybox").to_string_lossy().into_owned();
    let r = c
        .test_bed()
        .host_exec(i, &["timeout", "3", &busybox, "wget", "-qO-", url]);
    if r.success() {
        Ok(r.stdout.trim().to_string())
    } else {
        Err(r.describe())
    }
}

fn route_localnet(c: &Cluster, i: usize) -> String {
    c.test_bed()
        .host_exec_ok(i, &["cat", "/proc/sys/net/ipv4/conf/all/route_localnet"])
        .trim()
        .to_string()
}

fn filter_rules(c: &Cluster, i: usize) -> String {
    c.test_bed()
        .host_exec_ok(i, &["iptables-save", "-t", "filter"])
}

#[test]
fn a_node_port_answers_on_localhost_unless_the_flag_turns_it_off() {
    let mut config = ClusterConfig::on_test_bed(TestBedLayout::new(2, 0));
    config.agents[OFF]
        .extra_args
        .push("--iptables-localhost-nodeports=false".to_string());
    let mut c = Cluster::start_with(config);
    let names = ["echo-0".to_string(), "echo-1".to_string()];
    for (i, name) in names.iter().enumerate() {
        c.apply(&echo_pod(name, c.node_name(i)));
    }
    for name in &names {
        c.wait_for_pod_ready("default", name, secs(90));
    }
    let mut ports = Vec::new();
    for (svc, policy) in [("cluster", "Cluster"), ("local", "Local")] {
        c.apply(&node_port_service(svc, policy));
        let got = c
            .get(&format!("/api/v1/namespaces/default/services/{svc}"))
            .and_then(|s| s["spec"]["ports"][0]["nodePort"].as_u64())
            .unwrap_or_else(|| panic!("service {svc} has no nodePort"));
        ports.push(got);
    }

    // The default: 127.0.0.1 answers on the node, for both traffic policies.
    for port in &ports {
        let url = format!("http://127.0.0.1:{port}/");
        c.wait_for(secs(30), &format!("{url} on host {ON}"), || {
            fetch_on_host(&c, ON, &url).and_then(|body| ok_if(names.contains(&body), body))
        });
    }
    assert_eq!(route_localnet(&c, ON), "1");
    let network = c.agent(ON).network_name();
    let rules = filter_rules(&c, ON);
    assert!(
        rules.lines().any(|l| l.contains(&format!(
            "berth:{network} block incoming localnet connections"
        )) && l.contains("! -s 127.0.0.0/8 -d 127.0.0.0/8")
            && l.ends_with("-j DROP")),
        "{rules}"
    );
    for from in ["INPUT", "OUTPUT"] {
        assert!(
            rules.lines().any(|l| l.starts_with(&format!("-A {from} "))
                && l.contains(&format!("berth:{network} localnet firewall"))),
            "{from}: {rules}"
        );
    }

    // Turned off: the node's own address answers, 127.0.0.1 does not, the sysctl is untouched.
    let address = c.test_bed().host(OFF).address;
    let url = format!("http://{address}:{}/", ports[0]);
    c.wait_for(secs(30), &format!("{url} on host {OFF}"), || {
        fetch_on_host(&c, OFF, &url)
    });
    for port in &ports {
        let url = format!("http://127.0.0.1:{port}/");
        c.ensure_for(
            secs(3),
            &format!("{url} refused on host {OFF}"),
            || match fetch_on_host(&c, OFF, &url) {
                Ok(body) => Err(format!("answered: {body}")),
                Err(_) => Ok(()),
            },
        );
    }
    assert_eq!(route_localnet(&c, OFF), "0");
    assert!(
        !filter_rules(&c, OFF).contains("localnet"),
        "no localnet firewall where the flag is off"
    );

    // Uninstalled: the sysctl written back, the firewall chain gone.
    c.agent_mut(ON).kill9();
    let r = c.agent(ON).uninstall();
    assert!(r.success(), "{}", r.describe());
    assert!(
        r.stdout.contains("route_localnet written back"),
        "{}",
        r.stdout
    );
    assert_eq!(route_localnet(&c, ON), "0");
    let rules = filter_rules(&c, ON);
    assert!(
        !rules.contains("BERTH-FIREWALL-") && !rules.contains("localnet"),
        "{rules}"
    );
}
