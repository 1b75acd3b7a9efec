//! Agent acceptance: attaching to containers and debugging pods with the WebSocket kubectls
//! (1.33 and 1.31, `v5.channel.k8s.io`). `kubectl attach` sees a container's output and feeds
//! its stdin (`stdinOnce` closes it when the client's input ends); `kubectl run -i --rm` prints
//! the container's answer, exits 0 and leaves no pod; `kubectl debug --target` runs an
//! ephemeral container in the target's PID namespace, whose status the agent reports beside
//! (not among) the pod's containers; `kubectl exec -it` through a terminal keeps the exit code
//! every time.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container, sh_pod};
use berth_tests::process::{Run, run};
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

/// The WebSocket kubectls (≤1.29 speak SPDY).
const KUBECTLS: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.31",
];

/// First start of a pod on a fresh node: image pull, unpack, network, container.
const START: Duration = secs(90);

fn version(bin: &str) -> &str {
    bin.rsplit('.').next().unwrap_or("x")
}

/// A pod whose container echoes each line it reads, with stdin open once.
fn echo_pod(name: &str, node: &str) -> Value {
    let mut c = sh_container(
        "echo",
        "while read line; do echo \"echo:$line\"; done; echo input-ended",
    );
    c["stdin"] = json!(true);
    c["stdinOnce"] = json!(true);
    let mut pod = bound_pod(name, node, json!({"containers": [c]}));
    pod["spec"]["restartPolicy"] = json!("Never");
    pod
}

fn state_of<'a>(statuses: &'a Value, name: &str) -> Option<&'a Value> {
    statuses
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| &s["state"])
}

/// Asserts that a kubectl session succeeded; the failure shows it and the cluster's logs.
#[track_caller]
fn succeeded(c: &Cluster, r: &Run) {
    assert!(r.success(), "{}\n{}", r.describe(), c.logs().render());
}

/// Asserts that the session with pod `name` succeeded and printed `want`, and that the pod
/// (run with `--rm`) is then deleted.
fn answered_then_gone(c: &Cluster, r: &Run, want: &str, name: &str) {
    succeeded(c, r);
    r.assert_stdout_has(want);
    c.wait_pod_gone("default", name, secs(30));
}

#[test]
fn attach_streams_output_and_forwards_stdin_until_stdin_once_closes_it() {
    let (c, node) = Cluster::start_one();
    let tick = "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 1; done";
    c.apply(&sh_pod("ticker", &node, tick));
    c.wait_for_pod_ready("default", "ticker", START);

    for bin in KUBECTLS {
        let k = c.kubectl().with_binary(Path::new(bin));
        let v = version(bin);

        // Output from now on.
        let mut attached = k.spawn(&["attach", "ticker"]);
        attached.expect_line(secs(20), "a tick through attach", |l| {
            l.starts_with("tick-")
        });
        drop(attached);

        // A container without stdin takes no input.
        let refused = k.fails_stdin(&["attach", "-i", "ticker"], "hello\n");
        assert!(
            refused.stderr.contains("stdin"),
            "kubectl {v}: {}",
            refused.describe()
        );

        // stdin reaches the process; the end of the client's input closes it (stdinOnce).
        let name = format!("echo-{v}");
        c.apply(&echo_pod(&name, &node));
        c.wait_for_pod_ready("default", &name, START);
        let out = k.ok_stdin(&["attach", "-i", &name], "hello\nworld\n");
        assert!(
            out.contains("echo:hello") && out.contains("echo:world"),
            "kubectl {v}: {out}"
        );
        let pod = c.wait_for_pod_phase("default", &name, "Succeeded", secs(30));
        let state = state_of(&pod["status"]["containerStatuses"], "echo");
        assert_eq!(
            state.map(|s| s["terminated"]["exitCode"].clone()),
            Some(json!(0)),
            "{pod:#}"
        );
        let logs = c.logs_of("default", &name, None, &[]);
        assert!(logs.stdout.contains("input-ended"), "{}", logs.describe());
    }
}

#[test]
fn run_i_rm_prints_the_answer_exits_zero_and_removes_the_pod() {
    let c = Cluster::start(1);
    for bin in KUBECTLS {
        let k = c.kubectl().with_binary(Path::new(bin)).with_deadline(START);
        let name = format!("asker-{}", version(bin));
        let r = k.run_stdin(
            &[
                "run",
                "-i",
                "--rm",
                "--restart=Never",
                "--image=busybox:1.28",
                &name,
                "--",
                "sh",
                "-c",
                "read x; echo got-$x",
            ],
            "hello\n",
        );
        answered_then_gone(&c, &r, "got-hello", &name);
    }
}

#[test]
fn run_it_rm_ends_when_the_shell_exits() {
    let c = Cluster::start(1);
    let kubeconfig = c.controller().kubeconfig();
    for bin in KUBECTLS {
        let name = format!("shell-{}", version(bin));
        // A terminal for kubectl: `script` runs it on a pty and returns its exit code. What is
        // typed reaches the interactive shell, which answers (the sum tells its answer from
        // the terminal's echo of the typing) and exits.
        let line = format!(
            "{bin} --kubeconfig {} run -it --rm --restart=Never --image=busybox:1.28 {name} -- sh",
            kubeconfig.display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"]);
        let r = run(cmd, Some(b"echo got-$((40+2)); exit\n"), START);
        answered_then_gone(&c, &r, "got-42", &name);
    }
}

#[test]
fn debug_with_a_target_sees_its_processes_and_reports_the_ephemeral_status() {
    let (c, node) = Cluster::start_one();
    let pod = bound_pod(
        "target",
        &node,
        json!({"containers": [sh_container("app", SLEEP_FOREVER)]}),
    );
    c.apply(&pod);
    c.wait_for_pod_ready("default", "target", START);

    for bin in KUBECTLS {
        let v = version(bin);
        let k = c.kubectl().with_binary(Path::new(bin)).with_deadline(START);
        let debugger = format!("dbg-{v}");
        // The debugger waits for a line on stdin, so its output comes after kubectl attached.
        let r = k.run_stdin(
            &[
                "debug",
                "-i",
                "target",
                "--image=busybox:1.28",
                "--target=app",
                &format!("--container={debugger}"),
                "--",
                "sh",
                "-c",
                "read x; ps",
            ],
            "go\n",
        );
        succeeded(&c, &r);
        assert!(
            r.stdout.contains("while true"),
            "kubectl {v}: ps in the debugger does not show the target's shell\n{}",
            r.describe()
        );

        let pod = c.wait_pod("default", "target", secs(30), "debugger terminated", |p| {
            let state = state_of(&p["status"]["ephemeralContainerStatuses"], &debugger);
            match state.map(|s| &s["terminated"]) {
                Some(t) if t.is_object() => Ok(p.clone()),
                _ => Err(format!("{debugger} not terminated yet")),
            }
        });
        let statuses = &pod["status"]["ephemeralContainerStatuses"];
        let status = statuses
            .as_array()
            .and_then(|l| l.iter().find(|s| s["name"] == debugger.as_str()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(status["state"]["terminated"]["exitCode"], 0, "{status:#}");
        assert_eq!(status["ready"], false, "{status:#}");
        assert_eq!(status["restartCount"], 0, "{status:#}");
        assert_eq!(pod["status"]["phase"], "Running", "{pod:#}");
        let apps = pod["status"]["containerStatuses"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(apps, 1, "the debugger is not an app container: {pod:#}");
        let ready = pod["status"]["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["status"].clone());
        assert_eq!(ready, Some(json!("True")), "{pod:#}");
        // Its log, as for any container.
        let logs = k.ok(&["logs", "target", "-c", &debugger]);
        assert!(logs.contains("while true"), "kubectl {v}: {logs}");
    }
    // A debugger left running is reachable by exec like any container.
    let k = c.kubectl().with_binary(Path::new(KUBECTLS[0]));
    k.ok(&[
        "debug",
        "target",
        "--image=busybox:1.28",
        "--target=app",
        "--container=live",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait_pod(
        "default",
        "target",
        secs(30),
        "debugger live running",
        |p| {
            let state = state_of(&p["status"]["ephemeralContainerStatuses"], "live");
            match state.map(|s| &s["running"]) {
                Some(r) if r.is_object() => Ok(()),
                _ => Err("live not running yet".to_string()),
            }
        },
    );
    let ps = k.ok(&["exec", "target", "-c", "live", "--", "ps"]);
    assert!(
        ps.contains("while true") && ps.contains("sleep 3600"),
        "{ps}"
    );
    // Never restarted: both debuggers stay terminated with one attempt each.
    let pod = c.pod("default", "target").unwrap_or_default();
    for s in pod["status"]["ephemeralContainerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(s["restartCount"], 0, "{s:#}");
    }
}

#[test]
fn exec_with_a_terminal_keeps_the_exit_code_every_time() {
    let (c, node) = Cluster::start_one();
    c.apply(&sh_pod("shell", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "shell", START);
    let kubeconfig = c.controller().kubeconfig();
    for bin in KUBECTLS {
        let line = format!(
            "{bin} --kubeconfig {} exec -it shell -- sh -c 'exit 3'",
            kubeconfig.display()
        );
        for i in 0..20 {
            let mut cmd = Command::new("script");
            cmd.args(["-qec", &line, "/dev/null"]);
            let r = run(cmd, None, secs(60));
            assert_eq!(
                r.status.and_then(|s| s.code()),
                Some(3),
                "kubectl {} run {i}: {}\n{}",
                version(bin),
                r.describe(),
                c.logs().render()
            );
        }
    }
}

#[test]
fn debug_copy_to_and_node_debugging_attach_to_their_new_pods() {
    let (c, node) = Cluster::start_one();
    c.apply(&sh_pod("original", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "original", START);
    let kubeconfig = c.controller().kubeconfig();
    let host_init = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
    for bin in KUBECTLS {
        let v = version(bin);
        // A copy of the pod with a debugging container, attached through a terminal.
        let copy = format!("copy-{v}");
        let line = format!(
            "{bin} --kubeconfig {} debug original -it --copy-to={copy} --image=busybox:1.28 \
             --container=dbg -- sh -c 'read x; echo copy-$x'",
            kubeconfig.display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"]);
        let r = run(cmd, Some(b"typed\n"), START);
        succeeded(&c, &r);
        r.assert_stdout_has("copy-typed");
        let pod = c.pod("default", &copy).unwrap_or_default();
        let names: Vec<&str> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, vec!["main", "dbg"], "{pod:#}");

        // A pod in the host's namespaces with the host's root at /host.
        let k = c.kubectl().with_binary(Path::new(bin)).with_deadline(START);
        let r = k.run_stdin(
            &[
                "debug",
                &format!("node/{node}"),
                "-i",
                "--image=busybox:1.28",
                "--",
                "sh",
                "-c",
                "read x; echo pid1=$(cat /proc/1/comm); echo host=$(cat /host/proc/1/comm)",
            ],
            "go\n",
        );
        succeeded(&c, &r);
        let want = host_init.trim();
        assert!(
            r.stdout.contains(&format!("pid1={want}"))
                && r.stdout.contains(&format!("host={want}")),
            "kubectl {v}: the node debugger does not see the host's PID 1 ({want})\n{}",
            r.describe()
        );
    }
}
