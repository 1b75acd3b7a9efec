//! Issue 30, acceptance 4 and the sysctl half of 5: containers run under the seccomp profile
//! they ask for — containerd's default profile for `RuntimeDefault` and, with the agent's
//! `--seccomp-default` (on by default), for containers that ask for nothing; a `Localhost`
//! profile from `<root-dir>/seccomp`; none for `Unconfined` and privileged containers — and
//! pods' sysctls are admitted as the kubelet admits them (the safe set, plus the agent's
//! `--allowed-unsafe-sysctls`) and set inside the pod.
//!
//! busybox has no `keyctl` applet; `unshare --user` (unshare(2) with CLONE_NEWUSER, which needs
//! no capability but is outside the default profile) and `mount` are the syscalls shown to be
//! refused with EPERM.

use std::time::Duration;

use berth_tests::pod_reading::phase;
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

/// A pod on `node` running busybox forever, with these security contexts.
fn pod(name: &str, node: &str, pod_sc: Value, container_sc: Value) -> Value {
    let mut c = sh_container("main", SLEEP_FOREVER);
    c["securityContext"] = container_sc;
    bound_pod(
        name,
        node,
        json!({"securityContext": pod_sc, "containers": [c], "terminationGracePeriodSeconds": 1}),
    )
}

/// The `Seccomp:` mode of a process in the running pod (0 none, 2 filter).
fn seccomp_mode(c: &Cluster, name: &str) -> String {
    let status = c.exec_ok("default", name, None, &["cat", "/proc/self/status"]);
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no Seccomp line in {status}"))
}

/// Runs `script` in the pod; `Ok(stdout)` or `Err(stderr)`.
fn run(c: &Cluster, name: &str, script: &str) -> Result<String, String> {
    let r = c.exec("default", name, None, &["sh", "-c", script]);
    if r.success() {
        Ok(r.stdout)
    } else {
        Err(format!("{}{}", r.stdout, r.stderr))
    }
}

fn refused(c: &Cluster, name: &str, script: &str) {
    let err = run(c, name, script).expect_err(&format!("{name}: {script} should fail"));
    let lower = err.to_lowercase();
    assert!(
        lower.contains("operation not permitted") || lower.contains("permission denied"),
        "{name}: {script} failed otherwise than with EPERM: {err}"
    );
}

fn allowed(c: &Cluster, name: &str, script: &str) {
    if let Err(e) = run(c, name, script) {
        panic!("{name}: {script} should succeed: {e}");
    }
}

const UNSHARE: &str = "unshare --user true";
const MOUNT: &str = "mkdir -p /mnt/t && mount -t tmpfs tmpfs /mnt/t";

#[test]
fn seccomp_profiles_confine_containers_as_asked() {
    let (c, node) = Cluster::start_one();
    let seccomp_dir = c.agent(0).root_dir().join("seccomp");
    std::fs::create_dir_all(&seccomp_dir).expect("the seccomp profile dir");
    std::fs::write(
        seccomp_dir.join("deny-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#,
    )
    .expect("writing the profile");

    let runtime_default = json!({"seccompProfile": {"type": "RuntimeDefault"}});
    let unconfined = json!({"seccompProfile": {"type": "Unconfined"}});
    let localhost =
        json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "deny-mkdir.json"}});
    let pods = [
        ("default", json!({}), json!({})),
        ("runtime-default", runtime_default.clone(), json!({})),
        // The container's field wins over the pod's.
        ("unconfined", runtime_default.clone(), unconfined.clone()),
        (
            "privileged",
            runtime_default.clone(),
            json!({"privileged": true}),
        ),
        (
            "sys-admin",
            runtime_default.clone(),
            json!({"capabilities": {"add": ["SYS_ADMIN"]}}),
        ),
        ("localhost", json!({}), localhost),
        (
            "missing",
            json!({}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "nope.json"}}),
        ),
    ];
    for (name, psc, csc) in &pods {
        c.apply(&pod(name, &node, psc.clone(), csc.clone()));
    }
    for (name, ..) in pods.iter().filter(|(n, ..)| *n != "missing") {
        c.wait_for_pod_ready("default", name, START);
    }

    // RuntimeDefault, asked for or by default: a filter, no user namespaces, no mounts.
    for name in ["default", "runtime-default"] {
        assert_eq!(seccomp_mode(&c, name), "2", "{name}");
        refused(&c, name, UNSHARE);
        refused(&c, name, MOUNT);
        allowed(&c, name, "mkdir /tmp/ok");
    }
    // Unconfined: no filter; user namespaces need no capability.
    assert_eq!(seccomp_mode(&c, "unconfined"), "0");
    allowed(&c, "unconfined", UNSHARE);
    // Privileged containers run unconfined, as with containerd's CRI.
    assert_eq!(seccomp_mode(&c, "privileged"), "0");
    allowed(&c, "privileged", MOUNT);
    // The default profile grants mount(2) and unshare(2) with CAP_SYS_ADMIN.
    assert_eq!(seccomp_mode(&c, "sys-admin"), "2");
    allowed(&c, "sys-admin", MOUNT);
    // A Localhost profile from <root-dir>/seccomp.
    assert_eq!(seccomp_mode(&c, "localhost"), "2");
    refused(&c, "localhost", "mkdir /tmp/nope");
    allowed(&c, "localhost", UNSHARE);

    // A profile file that is not there: CreateContainerConfigError, no container.
    let message = c.wait_waiting(
        "default",
        "missing",
        "main",
        "CreateContainerConfigError",
        START,
    );
    let path = seccomp_dir.join("nope.json");
    assert_eq!(
        message,
        format!(
            "cannot load seccomp profile \"{0}\": open {0}: no such file or directory",
            path.display()
        )
    );
    assert_eq!(
        c.pod_containers(0, "default", "missing"),
        0,
        "a container was made for the pod with a missing profile"
    );
    assert!(
        c.pod_event_reasons("default", "missing")
            .iter()
            .any(|r| r == "Failed"),
        "no Failed event: {}",
        c.event_lines("default", "missing")
    );
}

fn sysctl_pod(name: &str, node: &str, sysctls: &[(&str, &str)]) -> Value {
    let sysctls: Vec<Value> = sysctls
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    pod(name, node, json!({"sysctls": sysctls}), json!({}))
}

#[test]
fn sysctls_are_admitted_as_the_kubelet_admits_them_and_set_in_the_pod() {
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![
            AgentOptions::default(),
            AgentOptions {
                extra_args: vec!["--allowed-unsafe-sysctls=kernel.msg*".into()],
                ..AgentOptions::default()
            },
        ],
        ..ClusterConfig::default()
    });
    let (strict, lenient) = (c.node_name(0).to_string(), c.node_name(1).to_string());

    c.apply(&sysctl_pod(
        "safe",
        &strict,
        &[("net.ipv4.ip_unprivileged_port_start", "0")],
    ));
    c.apply(&sysctl_pod("unsafe", &strict, &[("kernel.msgmax", "9000")]));
    c.apply(&sysctl_pod(
        "unsafe-allowed",
        &lenient,
        &[("kernel.msgmax", "9000")],
    ));

    c.wait_for_pod_ready("default", "safe", START);
    let sysctl = |pod: &str, path: &str| c.exec_ok("default", pod, None, &["cat", path]);
    let port_start = sysctl("safe", "/proc/sys/net/ipv4/ip_unprivileged_port_start");
    assert_eq!(port_start.trim(), "0");

    let failed = c.wait_for_pod_phase("default", "unsafe", "Failed", START);
    assert_eq!(failed["status"]["reason"], "SysctlForbidden");
    assert_eq!(
        failed["status"]["message"],
        r#"Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted"#
    );
    let events = c.pod_events("default", "unsafe");
    assert!(
        events.iter().any(|e| e["reason"] == "SysctlForbidden"
            && e["type"] == "Warning"
            && e["message"] == r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#),
        "no SysctlForbidden event: {}",
        c.event_lines("default", "unsafe")
    );
    assert_eq!(
        c.pod_containers(0, "default", "unsafe"),
        0,
        "the rejected pod has containers"
    );
    c.ensure_for(secs(3), "the rejected pod stays Failed", || {
        let p = c.pod("default", "unsafe").expect("the pod");
        ok_if(phase(&p) == "Failed", phase(&p).to_string())
    });

    c.wait_for_pod_ready("default", "unsafe-allowed", START);
    let msgmax = sysctl("unsafe-allowed", "/proc/sys/kernel/msgmax");
    assert_eq!(msgmax.trim(), "9000");
    let host = std::fs::read_to_string("/proc/sys/kernel/msgmax").expect("the host's msgmax");
    assert_ne!(host.trim(), "9000", "the host's own value changed");
}
