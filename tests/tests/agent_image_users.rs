//! Issue 30, acceptance 1–3: images run as their authors built them. An image's `USER` (a
//! name, `name:group`, `uid:gid`, a uid) resolves against the image's own `/etc/passwd` and
//! `/etc/group` as the kubelet and containerd do, with its supplementary groups; a name the
//! image lacks is `CreateContainerConfigError`; `runAsNonRoot` is verified as the kubelet
//! verifies it, with no container made when it refuses; and a real service image built from
//! Debian's redis binary with `USER redis` answers `PING` through a Service.

use std::path::Path;
use std::time::Duration;

use berth_tests::fixtures::{
    Entry, PATH_ENV, RunConfig, binary_with_libraries, busybox_layer, write_layout,
};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
    nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n\
    appuser:x:1234:2345:app:/home/app:/bin/sh\n\
    redis:x:100:101::/var/lib/redis:/bin/false\n";
const GROUP: &str =
    "root:x:0:\nnogroup:x:65534:\napp:x:2345:\nextra:x:3456:appuser\nredis:x:101:\n";

/// Pushes busybox plus the users above as `users:<tag>` with `USER user`.
fn push_users_image(c: &Cluster, tag: &str, user: &str) {
    let users = vec![
        Entry::file("etc/passwd", PASSWD, 0o644),
        Entry::file("etc/group", GROUP, 0o644),
    ];
    let run = RunConfig {
        env: vec![PATH_ENV.into()],
        cmd: vec!["sh".into()],
        user: user.into(),
        ..RunConfig::default()
    };
    let dir = c.scratch().join(format!("users-{tag}"));
    let reference = format!("users-{tag}");
    write_layout(
        &dir,
        &[busybox_layer(), users],
        &run,
        &format!("docker.io/library/users:{tag}"),
        &reference,
    )
    .unwrap_or_else(|e| panic!("users:{tag}: {e}"));
    c.registry().push(&dir, &reference, "library/users", tag);
}

fn pod(node: &str, name: &str, tag: &str, pod_sc: Value, container_sc: Value) -> Value {
    bound_pod(
        name,
        node,
        json!({
            "securityContext": pod_sc,
            "containers": [{"name": "main", "image": format!("users:{tag}"),
                "command": ["sh", "-c", SLEEP_FOREVER], "securityContext": container_sc}],
        }),
    )
}

/// `uid gid groups…` of the running container, as `id` prints them.
fn ids(c: &Cluster, name: &str) -> String {
    c.wait_for_pod_ready("default", name, START);
    c.exec_ok(
        "default",
        name,
        None,
        &["sh", "-c", "echo $(id -u) $(id -g) $(id -G)"],
    )
    .trim()
    .to_string()
}

/// Waits for `CreateContainerConfigError` and returns its message.
fn config_error(c: &Cluster, name: &str) -> String {
    c.wait_waiting("default", name, "main", "CreateContainerConfigError", START)
}

#[test]
fn image_users_resolve_from_the_images_own_files_and_run_as_non_root_holds() {
    let (c, node) = Cluster::start_one();
    for (tag, user) in [
        ("named", "appuser"),
        ("nogroup", "nobody:nogroup"),
        ("ids", "1234:2345"),
        ("uid", "1234"),
        ("ghost", "ghost"),
        ("root", ""),
    ] {
        push_users_image(&c, tag, user);
    }
    let none = json!({});
    let cases = [
        ("named", "named", none.clone(), "1234 2345 2345 3456"),
        (
            "named-extra",
            "named",
            json!({"supplementalGroups": [4000]}),
            "1234 2345 2345 3456 4000",
        ),
        (
            "named-strict",
            "named",
            json!({"supplementalGroups": [4000], "supplementalGroupsPolicy": "Strict"}),
            "1234 2345 2345 4000",
        ),
        ("nogroup", "nogroup", none.clone(), "65534 65534 65534"),
        ("ids", "ids", none.clone(), "1234 2345 2345 3456"),
        ("uid", "uid", none.clone(), "1234 2345 2345 3456"),
        (
            "nonroot-uid",
            "named",
            json!({"runAsNonRoot": true, "runAsUser": 1000}),
            "1000 0 0",
        ),
    ];
    for (name, tag, sc, _) in &cases {
        c.apply(&pod(&node, name, tag, sc.clone(), none.clone()));
    }
    c.apply(&pod(&node, "ghost", "ghost", none.clone(), none.clone()));
    c.apply(&pod(
        &node,
        "nonroot-root",
        "root",
        json!({"runAsNonRoot": true}),
        none.clone(),
    ));
    c.apply(&pod(
        &node,
        "nonroot-named",
        "named",
        none.clone(),
        json!({"runAsNonRoot": true}),
    ));

    for (name, _, _, want) in &cases {
        assert_eq!(ids(&c, name), *want, "pod {name}");
    }

    let ghost = config_error(&c, "ghost");
    assert!(ghost.contains("unable to find user ghost"), "{ghost}");
    assert_eq!(
        c.pod_containers(0, "default", "ghost"),
        0,
        "no container for ghost"
    );

    let root = config_error(&c, "nonroot-root");
    assert!(
        root.starts_with(
            "container has runAsNonRoot and image will run as root (pod: \"nonroot-root_default("
        ),
        "{root}"
    );
    let named = config_error(&c, "nonroot-named");
    assert!(
        named.starts_with(
            "container has runAsNonRoot and image has non-numeric user (appuser), cannot verify user is non-root"
        ),
        "{named}"
    );
    for name in ["nonroot-root", "nonroot-named"] {
        assert_eq!(
            c.pod_containers(0, "default", name),
            0,
            "{name} has a container"
        );
        let events = c.pod_events("default", name);
        assert!(
            events.iter().any(|e| e["reason"] == "Failed"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("runAsNonRoot"))),
            "{name}: {events:?}"
        );
    }
}

/// busybox, Debian's redis server binary (`redis-check-rdb` is the same program; redis picks
/// its mode from its name) with its libraries, and `USER redis`.
fn push_redis_image(c: &Cluster) {
    let mut redis = binary_with_libraries(
        Path::new("/usr/bin/redis-check-rdb"),
        "usr/bin/redis-server",
        "redis-tools",
    );
    redis.push(Entry::file("etc/passwd", PASSWD, 0o644));
    redis.push(Entry::file("etc/group", GROUP, 0o644));
    let run = RunConfig {
        env: vec![PATH_ENV.into()],
        entrypoint: vec!["redis-server".into()],
        cmd: ["--protected-mode", "no", "--save", "", "--appendonly", "no"]
            .map(String::from)
            .to_vec(),
        exposed_ports: vec!["6379/tcp".into()],
        user: "redis".into(),
        ..RunConfig::default()
    };
    let dir = c.scratch().join("redis-layout");
    write_layout(
        &dir,
        &[busybox_layer(), redis],
        &run,
        "docker.io/library/redis:7.0",
        "redis-7.0",
    )
    .unwrap_or_else(|e| panic!("redis: {e}"));
    c.registry().push(&dir, "redis-7.0", "library/redis", "7.0");
}

#[test]
fn a_redis_image_with_user_redis_runs_as_redis_and_answers_ping_through_a_service() {
    let (c, node) = Cluster::start_one();
    push_redis_image(&c);
    let mut server = bound_pod(
        "redis",
        &node,
        json!({"containers": [{"name": "main", "image": "redis:7.0",
            "ports": [{"containerPort": 6379}]}]}),
    );
    server["metadata"]["labels"] = json!({"app": "redis"});
    c.apply(&server);
    c.apply(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "redis", "namespace": "default"},
        "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]},
    }));
    c.apply(&bound_pod(
        "client",
        &node,
        json!({"containers": [{"name": "main", "image": "busybox:1.28",
            "command": ["sh", "-c", SLEEP_FOREVER]}]}),
    ));
    c.wait_for_pod_ready("default", "redis", START);
    let status = c.exec_ok("default", "redis", None, &["cat", "/proc/1/status"]);
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|v| v.split_whitespace().collect::<Vec<_>>())
        .unwrap_or_default();
    assert_eq!(uid, vec!["100"; 4], "redis runs as uid 100: {status}");
    let gid = status
        .lines()
        .find_map(|l| l.strip_prefix("Gid:"))
        .map(|v| v.split_whitespace().next().unwrap_or_default().to_string());
    assert_eq!(gid.as_deref(), Some("101"), "{status}");

    c.wait_for_pod_ready("default", "client", START);
    let ip = c
        .get("/api/v1/namespaces/default/services/redis")
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(String::from))
        .expect("a cluster IP");
    let script = format!("printf 'PING\\r\\n' | nc -w 2 {ip} 6379");
    c.wait_for(secs(30), "+PONG through the Service", || {
        let r = c.exec("default", "client", None, &["sh", "-c", &script]);
        ok_if(r.stdout.contains("+PONG"), r.describe())
    });
}
