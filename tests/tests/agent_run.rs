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
    let (c, node) = Cluster::start_one();
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

    // Like nginx, the fixture stops on SIGTERM: deletion does not wait out the 30 s grace.
    let started = std::time::Instant::now();
    c.kubectl()
        .ok(&["delete", "pod", "nginx", "--wait=true", "--timeout=60s"]);
    let took = started.elapsed();
    assert!(took < secs(15), "deleting the nginx pod took {took:?}");
}

#[test]
fn logs_and_exec_reach_the_container() {
    let (c, node) = Cluster::start_one();
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

#[test]
fn logs_follow_keeps_every_line_across_log_rotation() {
    // 2 KiB log files: the 200 lines below rotate the file about ten times.
    let mut config = berth_tests::ClusterConfig::agents(1);
    config.agents[0].extra_args = vec!["--container-log-max-size".into(), "2Ki".into()];
    let c = Cluster::start_with(config);
    let node = c.node_name(0).to_string();
    let script = "while [ ! -e /tmp/go ]; do sleep 0.1; done; i=0; \
                  while [ $i -lt 200 ]; do i=$((i+1)); \
                  echo \"line $i ................................\"; sleep 0.02; done; \
                  echo finished; exec sleep 3600";
    c.apply(&sh_pod("chatty", &node, script));
    c.wait_for_pod_ready("default", "chatty", START);
    let mut follow = c.kubectl().spawn(&["logs", "-f", "chatty"]);
    c.exec_ok("default", "chatty", None, &["touch", "/tmp/go"]);
    follow.expect_line(secs(60), "the last line", |l| l == "finished");
    let numbers: Vec<u32> = follow
        .seen()
        .iter()
        .filter_map(|l| l.strip_prefix("line ")?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(
        numbers,
        (1..=200).collect::<Vec<u32>>(),
        "every line once, in order"
    );
    let dir = c.agent(0).log_dir();
    let rotated = walk_files(&dir)
        .iter()
        .filter(|p| {
            // Rotated files are `<n>.log.YYYYMMDD-hhmmss`, older ones gzipped.
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".log."))
        })
        .count();
    assert!(
        rotated >= 1,
        "the log was never rotated under {}",
        dir.display()
    );
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}
