//! Agent acceptance 1: a pod bound to a node runs. The seeds' nginx pod (image `nginx:1.14.2`,
//! pulled through the `docker.io` mirror) reaches Running and Ready, its page answers at
//! `status.podIP:80` from the host, and `kubectl get pod -o wide` shows its IP and node; a
//! busybox pod's output reaches `kubectl logs`, and `kubectl exec` passes exit codes through and
//! runs inside the pod (hostname = pod name).

use std::time::Duration;

use berth_tests::fixtures::nginx_marker;
use berth_tests::pod_reading::{container_status, ipv4_in_cidr, pod_ip};
use berth_tests::pod_specs::{nginx_pod, sh_pod};
use berth_tests::{Cluster, Table, http_get, secs};

/// First start of a pod on a fresh node: image pull, unpack, network, container.
const START: Duration = secs(90);

#[test]
fn the_nginx_pod_serves_its_page_at_the_pod_ip() {
    let c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    c.apply(&nginx_pod("nginx", &node, "nginx:1.14.2"));
    let pod = c.wait_for_pod_ready("default", "nginx", START);

    let ip = pod_ip(&pod).expect("a Ready pod has a podIP").to_string();
    let node_obj = c.get(&format!("/api/v1/nodes/{node}")).unwrap();
    let pod_cidr = node_obj["spec"]["podCIDR"].as_str().unwrap();
    assert!(
        ipv4_in_cidr(&ip, pod_cidr),
        "pod IP {ip} outside the node's {pod_cidr}"
    );
    assert_eq!(pod["status"]["hostIP"], "127.0.0.1", "{pod:#}");
    let nginx = container_status(&pod, "nginx").unwrap();
    assert_eq!(nginx["ready"], true);
    assert_eq!(nginx["restartCount"], 0);
    assert!(
        nginx["imageID"].as_str().is_some_and(|i| !i.is_empty()),
        "{nginx:#}"
    );

    let page = c.wait_for(
        secs(20),
        &format!("http://{ip}:80/ to answer"),
        || match http_get(&ip, 80, "/") {
            Ok(r) if r.status == 200 => Ok(r.body),
            other => Err(other),
        },
    );
    assert!(page.contains(&nginx_marker("1.14.2")), "{page}");

    let wide = c.kubectl().ok(&["get", "pod", "nginx", "-o", "wide"]);
    let table = Table::parse(&wide).unwrap();
    assert_eq!(table.cell("nginx", "IP"), Some(ip.as_str()), "{wide}");
    assert_eq!(table.cell("nginx", "NODE"), Some(node.as_str()), "{wide}");
    assert_eq!(table.cell("nginx", "STATUS"), Some("Running"), "{wide}");
    assert_eq!(table.cell("nginx", "READY"), Some("1/1"), "{wide}");
}

#[test]
fn logs_and_exec_reach_the_container() {
    let c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    let script = "echo started; echo to-stderr >&2; \
                  mkdir -p /www; echo hello-from-busybox > /www/index.html; \
                  exec httpd -f -p 8080 -h /www";
    c.apply(&sh_pod("shell", &node, script));
    let pod = c.wait_for_pod_ready("default", "shell", START);
    let ip = pod_ip(&pod).unwrap().to_string();
    let page = c.wait_for(secs(20), "httpd on 8080", || {
        match http_get(&ip, 8080, "/") {
            Ok(r) if r.status == 200 => Ok(r.body),
            other => Err(other),
        }
    });
    assert_eq!(page, "hello-from-busybox\n");

    let logs = c.wait_for(secs(20), "kubectl logs to show the output", || {
        let r = c.logs_of("default", "shell", None, &[]);
        if r.success() && r.stdout.contains("started") && r.stdout.contains("to-stderr") {
            Ok(r.stdout)
        } else {
            Err(r.describe())
        }
    });
    // stdout and stderr are separate pipes: like the kubelet, the agent keeps each stream's
    // order but not the order between them.
    let mut lines: Vec<&str> = logs.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["started", "to-stderr"], "{logs}");

    let r = c.exec("default", "shell", None, &["sh", "-c", "exit 3"]);
    assert_eq!(r.status.and_then(|s| s.code()), Some(3), "{}", r.describe());
    let hostname = c.exec_ok("default", "shell", None, &["cat", "/etc/hostname"]);
    assert_eq!(hostname.trim(), "shell");
    let out = c.exec_ok(
        "default",
        "shell",
        Some("main"),
        &["sh", "-c", "echo out; echo err >&2"],
    );
    assert_eq!(out, "out\n");
    // The exec runs in the pod's network namespace: its own httpd answers on loopback.
    let local = c.exec_ok(
        "default",
        "shell",
        None,
        &["wget", "-qO-", "http://127.0.0.1:8080/"],
    );
    assert_eq!(local, "hello-from-busybox\n");
}
