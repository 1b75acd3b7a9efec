//! Issue 12, cluster DNS on one host: the agent serves `cluster.local` on its pod gateway (on
//! a bridge it made itself, before any pod) and pods are pointed at it. The StatefulSet
//! page's headless `nginx` Service with pods `web-0` and `web-1` (made by hand with
//! `hostname`/`subdomain: nginx`): `nslookup nginx` from a busybox pod returns the ready pods'
//! IPs and follows readiness; `web-0.nginx.default.svc.cluster.local` is web-0's IP (and
//! `web-1.nginx` web-1's, through the search path); SRV and PTR answer. A ClusterIP Service
//! resolves as `<svc>` and, in `wget http://<svc>.<ns>/` (which reaches a pod through the
//! service proxy), as `<svc>.<ns>`; an unknown name is NXDOMAIN; an outside name gets the host
//! resolver's verdict; a deleted Service's name is gone within a few seconds.

use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

/// A busybox httpd pod of the StatefulSet's shape: label `app: nginx`, `hostname` = its name,
/// `subdomain: nginx`, ready once `/tmp/ready` exists (created at start when `ready`).
fn web_pod(name: &str, node: &str, ready: bool) -> Value {
    let touch = if ready { "touch /tmp/ready; " } else { "" };
    let script = format!(
        "mkdir -p /www && hostname > /www/index.html && httpd -p 80 -h /www; {touch}{SLEEP_FOREVER}"
    );
    let mut pod = bound_pod(
        name,
        node,
        json!({
            "hostname": name,
            "subdomain": "nginx",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "nginx",
                "image": "busybox:1.28",
                "command": ["sh", "-c", script],
                "ports": [{"containerPort": 80, "name": "web"}],
                "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]},
                                   "periodSeconds": 1, "failureThreshold": 1},
            }],
        }),
    );
    pod["metadata"]["labels"] = json!({"app": "nginx"});
    pod
}

/// What a busybox nslookup printed: the answers' addresses (or names, for a reverse lookup),
/// sorted. Busybox prints the server first ("Server:" / "Address: <ip>:53"), then a blank
/// line, then "Name:"/"Address:" pairs (or "<ip>.in-addr.arpa name = <name>").
fn answers(out: &str) -> Vec<String> {
    let mut found: Vec<String> = out
        .split_once("\n\n")
        .map_or("", |(_, answers)| answers)
        .lines()
        .filter_map(|l| {
            if let Some(a) = l.strip_prefix("Address:") {
                Some(a.trim().to_string())
            } else {
                l.split_once("name = ").map(|(_, n)| n.trim().to_string())
            }
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// busybox's nslookup in the client pod: its answers, or `Err` with the output when it found
/// nothing.
fn nslookup(c: &Cluster, args: &[&str]) -> Result<Vec<String>, String> {
    let mut cmd = vec!["timeout", "5", "nslookup"];
    cmd.extend(args);
    let r = c.exec("default", "client", None, &cmd);
    let found = answers(&r.stdout);
    if found.is_empty() {
        Err(r.describe())
    } else {
        Ok(found)
    }
}

/// A command on the host (the agent's network namespace), with a deadline.
fn on_host(program: &str, args: &[&str]) -> berth_tests::Run {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    berth_tests::process::run(cmd, None, secs(10))
}

/// `http://<host>/` fetched from the client with busybox's wget: the address it connected to
/// (from its "Connecting to <host> (<ip>:80)" line) and the body.
fn fetch(c: &Cluster, host: &str) -> Result<(String, String), String> {
    // Not `wget -T`: Debian's busybox-static wget segfaults with it.
    let url = format!("http://{host}/");
    let r = c.exec(
        "default",
        "client",
        None,
        &["timeout", "3", "wget", "-O-", &url],
    );
    let prefix = format!("Connecting to {host} (");
    let ip = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split_once(':'))
        .map(|(ip, _)| ip.to_string());
    match ip {
        Some(ip) if r.success() => Ok((ip, r.stdout.trim().to_string())),
        _ => Err(r.describe()),
    }
}

/// A pod's IP once it has one.
fn pod_ip(c: &Cluster, name: &str) -> String {
    c.wait_for(secs(60), &format!("{name}'s IP"), || {
        c.pod("default", name)
            .and_then(|p| p["status"]["podIP"].as_str().map(str::to_string))
            .ok_or("no IP yet")
    })
}

/// The host resolver's verdict on a name: `NXDOMAIN`, `answered`, or `None` when it gave none
/// (no resolver reachable, a timeout).
fn verdict(output: &str) -> Option<&'static str> {
    if output.contains("NXDOMAIN") {
        Some("NXDOMAIN")
    } else if output
        .split_once("\n\n")
        .is_some_and(|(_, a)| a.contains("Address:"))
    {
        Some("answered")
    } else {
        None
    }
}

#[test]
fn pods_resolve_services_and_stateful_names_through_the_agents_dns() {
    let (c, node) = Cluster::start_one();
    let cidr = c.wait_for(secs(30), "the node's podCIDR", || {
        c.get(&format!("/api/v1/nodes/{node}"))
            .and_then(|n| n["spec"]["podCIDR"].as_str().map(str::to_string))
            .ok_or("no podCIDR yet")
    });
    let (net, prefix) = cidr.split_once('/').expect("ADDRESS/PREFIX");
    let net: std::net::Ipv4Addr = net.parse().expect("an IPv4 podCIDR");
    let gateway = std::net::Ipv4Addr::from(u32::from(net) + 1).to_string();

    // Before any pod (so before the CNI plugin made the bridge), the agent has made the bridge
    // with the gateway address and answers there: the `kubernetes` Service, from the host.
    let kubernetes = c
        .get("/api/v1/namespaces/default/services/kubernetes")
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .expect("the kubernetes Service's cluster IP");
    c.wait_for(secs(10), "the agent's DNS on the pod gateway", || {
        let r = on_host(
            "busybox",
            &["nslookup", "kubernetes.default.svc.cluster.local", &gateway],
        );
        ok_if(answers(&r.stdout) == [kubernetes.clone()], r.describe())
    });
    let bridge = on_host(
        "ip",
        &["-4", "-o", "addr", "show", "dev", c.agent(0).bridge()],
    );
    bridge.assert_stdout_has(&format!("inet {gateway}/{prefix} "));
    assert!(c.netns(0).is_empty(), "{:?}", c.netns(0));

    c.apply(&json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "nginx", "labels": {"app": "nginx"}},
        "spec": {"ports": [{"port": 80, "name": "web"}], "clusterIP": "None",
                 "selector": {"app": "nginx"}}}));
    c.apply(&json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "front"},
        "spec": {"ports": [{"port": 80, "name": "http"}], "selector": {"app": "nginx"}}}));
    c.apply(&web_pod("web-0", &node, true));
    c.apply(&web_pod("web-1", &node, false));
    c.apply(&sh_pod("client", &node, SLEEP_FOREVER));
    c.wait_for_pod_phase("default", "client", "Running", secs(60));
    let ip0 = pod_ip(&c, "web-0");
    let ip1 = pod_ip(&c, "web-1");

    // The pod is pointed at its node's pod gateway, with the kubelet's search path.
    let resolv = c.exec_ok("default", "client", None, &["cat", "/etc/resolv.conf"]);
    assert!(
        resolv.lines().any(|l| l == format!("nameserver {gateway}")),
        "{resolv}"
    );
    assert!(
        resolv
            .lines()
            .any(|l| l
                .starts_with("search default.svc.cluster.local svc.cluster.local cluster.local")),
        "{resolv}"
    );

    // The headless Service: the ready pod only, then both once web-1 is ready.
    c.wait_for(
        secs(30),
        "nginx resolving to web-0 alone",
        || match nslookup(&c, &["nginx"]) {
            Ok(ips) if ips == [ip0.clone()] => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let r = c.exec("default", "web-1", None, &["touch", "/tmp/ready"]);
    assert!(r.success(), "{}", r.describe());
    let mut both = vec![ip0.clone(), ip1.clone()];
    both.sort();
    c.wait_for(
        secs(30),
        "nginx resolving to both pods",
        || match nslookup(&c, &["nginx"]) {
            Ok(ips) if ips == both => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    assert_eq!(
        nslookup(&c, &["web-0.nginx.default.svc.cluster.local"]),
        Ok(vec![ip0.clone()])
    );
    // Busybox's nslookup applies the search path to dotless names only; its wget resolves
    // through the C library, which applies it as `ndots:5` says.
    assert_eq!(
        fetch(&c, "web-1.nginx"),
        Ok((ip1.clone(), "web-1".to_string()))
    );
    // One name per Service the address serves (`front` gives it the dashed name), as CoreDNS.
    let names = nslookup(&c, &[&ip0]);
    let dashed = format!("{}.front.default.svc.cluster.local", ip0.replace('.', "-"));
    assert_eq!(
        names,
        Ok(vec![
            dashed,
            "web-0.nginx.default.svc.cluster.local".to_string()
        ])
    );
    let srv = c.exec_ok(
        "default",
        "client",
        None,
        &[
            "nslookup",
            "-type=srv",
            "_web._tcp.nginx.default.svc.cluster.local",
        ],
    );
    for host in ["web-0", "web-1"] {
        assert!(
            srv.contains(&format!("80 {host}.nginx.default.svc.cluster.local")),
            "{srv}"
        );
    }

    // The ClusterIP Service by its short names, and over HTTP by name.
    let front = c
        .get("/api/v1/namespaces/default/services/front")
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .expect("front's cluster IP");
    assert_eq!(nslookup(&c, &["front"]), Ok(vec![front.clone()]));
    c.wait_for(secs(10), "front answering by name", || {
        match fetch(&c, "front.default") {
            Ok((ip, body)) if ip == front && (body == "web-0" || body == "web-1") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });

    // Unknown names do not exist; outside names get the host resolver's verdict.
    let r = c.exec("default", "client", None, &["nslookup", "nope"]);
    assert!(!r.success(), "{}", r.describe());
    assert!(r.stdout.contains("NXDOMAIN"), "{}", r.describe());
    let host = on_host("busybox", &["nslookup", "example.com"]);
    if let Some(want) = verdict(&host.stdout) {
        let pod = c.exec("default", "client", None, &["nslookup", "example.com"]);
        assert_eq!(
            verdict(&pod.stdout),
            Some(want),
            "host:\n{}\npod:\n{}",
            host.describe(),
            pod.describe()
        );
    }

    // A deleted Service's name goes away within a few seconds.
    c.kubectl().ok(&["delete", "service", "front"]);
    c.wait_for(secs(5), "front gone from DNS", || {
        match nslookup(&c, &["front"]) {
            Err(out) if out.contains("NXDOMAIN") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}
