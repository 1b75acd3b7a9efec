//! Issue 14, streaming over SPDY/3.1: `kubectl port-forward` (SPDY with every kubectl; 1.31
//! and later first try SPDY tunnelled in a WebSocket, which the agent serves too:
//! `agent_port_forward_ws`) reaches a server that
//! listens only on the pod's loopback, for several connections through one forward, and a
//! port nothing listens on is reported in the kubelet's words. kubectl 1.29 and 1.27 speak
//! SPDY for `exec` (and `cp`, which is `exec tar`): exit codes, stdin and stderr pass through.
//! Real agent, containerd and kubectl binaries.

use std::path::Path;
use std::time::Duration;

use berth_tests::kubectl::assert_forwards;
use berth_tests::pod_specs::sh_pod;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, http_get, secs};

const START: Duration = secs(90);
const BIN: &str = "/usr/lib/google-cloud-sdk/bin/kubectl";

/// A pod whose httpd answers on its loopback only.
const LOOPBACK_HTTPD: &str =
    "mkdir -p /www; echo forwarded-ok > /www/index.html; exec httpd -f -p 127.0.0.1:8080 -h /www";

#[test]
fn port_forward_reaches_the_pods_loopback_with_every_kubectl() {
    let (c, node) = Cluster::start_one();
    c.apply(&sh_pod("web", &node, LOOPBACK_HTTPD));
    c.wait_for_pod_ready("default", "web", START);
    for version in ["1.33", "1.31", "1.29", "1.27"] {
        let k = c
            .kubectl()
            .with_binary(Path::new(&format!("{BIN}.{version}")));
        let (forward, port) = k.port_forward(&["pod/web", ":8080"]);
        assert_forwards(
            &forward,
            port,
            "forwarded-ok\n",
            &format!("kubectl {version}"),
        );
        drop(forward);
    }

    // Nothing listens on 9090 in the pod: the connection fails and kubectl says why.
    let k = c.kubectl().with_binary(Path::new(&format!("{BIN}.1.33")));
    let (forward, port) = k.port_forward(&["pod/web", ":9090"]);
    assert!(!matches!(http_get("127.0.0.1", port, "/"), Ok(r) if r.status == 200));
    c.wait_for(secs(20), "kubectl to report the refused connection", || {
        let d = forward.describe();
        ok_if(
            d.contains("error forwarding port 9090 to pod web") && d.contains("connection refused"),
            d,
        )
    });
}

#[test]
fn exec_and_cp_over_spdy_keep_exit_codes_stdin_and_stderr() {
    let (c, node) = Cluster::start_one();
    c.apply(&sh_pod("shell", &node, "exec sleep 3600"));
    c.wait_for_pod_ready("default", "shell", START);
    let dir = tempfile::tempdir().expect("tempdir");
    for version in ["1.29", "1.27"] {
        let k = c
            .kubectl()
            .with_binary(Path::new(&format!("{BIN}.{version}")));
        let r = k.run(&["exec", "shell", "--", "sh", "-c", "exit 3"]);
        assert_eq!(
            r.status.and_then(|s| s.code()),
            Some(3),
            "kubectl {version}: {}",
            r.describe()
        );
        let r = k.run_stdin(
            &[
                "exec",
                "-i",
                "shell",
                "--",
                "sh",
                "-c",
                "cat; echo to-stderr >&2",
            ],
            "from stdin\n",
        );
        assert!(r.success(), "kubectl {version}: {}", r.describe());
        assert_eq!(r.stdout, "from stdin\n", "kubectl {version}");
        assert!(
            r.stderr.contains("to-stderr"),
            "kubectl {version}: {}",
            r.describe()
        );

        let local = dir.path().join(format!("file-{version}"));
        std::fs::write(&local, format!("copied by {version}\n")).expect("writes");
        let local = local.to_string_lossy().into_owned();
        k.ok(&["cp", &local, &format!("shell:/tmp/file-{version}")]);
        let back = k.ok(&[
            "exec",
            "shell",
            "--",
            "cat",
            &format!("/tmp/file-{version}"),
        ]);
        assert_eq!(back, format!("copied by {version}\n"));
    }
}
