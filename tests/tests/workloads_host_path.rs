//! hostPath volumes on real agents, as the kubelet and containerd's CRI treat them: the
//! Kubernetes website's DaemonSet example (`controllers/daemonset.yaml` as it was through
//! Kubernetes 1.26, fluentd mounting `/var/log` and, untyped, `/var/lib/docker/containers`)
//! runs on every node of a host without Docker, its missing directory made as containerd
//! makes it; typed volumes are made (`DirectoryOrCreate` 0755, `FileOrCreate` 0644) or
//! checked, and a failed check holds the pod in `ContainerCreating` with the kubelet's
//! `FailedMount` event. Every directory the tests cause on the host is removed afterwards
//! (and only those: what existed before stays).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_tests::Cluster;
use berth_tests::fixtures::NGINX_1_14_2;
use berth_tests::host::file_mode as mode;
use berth_tests::pod_reading::is_ready;
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container};
use berth_tests::wait::ok_if;
use serde_json::{Value, json};

const START: Duration = Duration::from_secs(90);
const REACT: Duration = Duration::from_secs(60);

/// The website's `controllers/daemonset.yaml` (kubernetes/website, Kubernetes 1.24–1.26
/// releases), verbatim.
const WEBSITE_DAEMON_SET: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  namespace: kube-system
  labels:
    k8s-app: fluentd-logging
spec:
  selector:
    matchLabels:
      name: fluentd-elasticsearch
  template:
    metadata:
      labels:
        name: fluentd-elasticsearch
    spec:
      tolerations:
      # these tolerations are to have the daemonset runnable on control plane nodes
      # remove them if your control plane nodes should not run pods
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      - key: node-role.kubernetes.io/master
        operator: Exists
        effect: NoSchedule
      containers:
      - name: fluentd-elasticsearch
        image: quay.io/fluentd_elasticsearch/fluentd:v2.5.2
        resources:
          limits:
            memory: 200Mi
          requests:
            cpu: 100m
            memory: 200Mi
        volumeMounts:
        - name: varlog
          mountPath: /var/log
        - name: varlibdockercontainers
          mountPath: /var/lib/docker/containers
          readOnly: true
      terminationGracePeriodSeconds: 30
      volumes:
      - name: varlog
        hostPath:
          path: /var/log
      - name: varlibdockercontainers
        hostPath:
          path: /var/lib/docker/containers
"#;

/// Directories on the host that did not exist when recorded, removed on drop if empty
/// (deepest first): a test declares it before its cluster, so the cluster's containers are gone
/// by then.
struct CreatedDirs(Vec<PathBuf>);

impl CreatedDirs {
    /// Records which of `path` and its ancestors are missing now.
    fn record(path: &Path) -> CreatedDirs {
        CreatedDirs(
            path.ancestors()
                .filter(|p| std::fs::symlink_metadata(p).is_err())
                .map(Path::to_path_buf)
                .collect(),
        )
    }
}

impl Drop for CreatedDirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => eprintln!("berth-tests: cannot remove {}: {e}", dir.display()),
            }
        }
    }
}

#[test]
fn the_websites_daemon_set_runs_on_every_node_of_a_host_without_docker() {
    let docker = Path::new("/var/lib/docker/containers");
    assert!(
        std::fs::symlink_metadata(docker).is_err(),
        "{} exists on this host: this test proves that a missing hostPath directory is made, \
         so it needs a host without it",
        docker.display()
    );
    let _made = CreatedDirs::record(docker);
    let c = Cluster::start(2);
    c.push_fixture(&NGINX_1_14_2, "fluentd_elasticsearch/fluentd", "v2.5.2");
    let file = tempfile::NamedTempFile::new().expect("a manifest file");
    std::fs::write(file.path(), WEBSITE_DAEMON_SET).expect("the manifest written");
    let out = c
        .kubectl()
        .ok(&["apply", "-f", &file.path().to_string_lossy()]);
    assert_eq!(out.trim(), "daemonset.apps/fluentd-elasticsearch created");

    let nodes = [c.node_name(0).to_string(), c.node_name(1).to_string()];
    c.wait_for(START, "a Ready fluentd pod on every node", || {
        let pods = c
            .get("/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dfluentd-elasticsearch")
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default();
        let mut ready: Vec<String> = pods
            .iter()
            .filter(|p| is_ready(p))
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
            .collect();
        ready.sort();
        if ready == nodes {
            Ok(())
        } else {
            let status: Vec<&Value> = pods.iter().map(|p| &p["status"]).collect();
            Err(json!({"ready on": ready, "status": status}))
        }
    });
    assert!(
        docker.is_dir(),
        "containerd's rule: a missing source is made"
    );
    assert_eq!(mode(docker), 0o755);
    assert_eq!(std::fs::metadata(docker).map(|m| m.uid()).ok(), Some(0));
}

/// A pod bound to `node` whose busybox container mounts each of `volumes` at `/v/<name>` and
/// runs `script`.
fn host_path_pod(name: &str, node: &str, volumes: &[(&str, Value)], script: &str) -> Value {
    let mut c = sh_container("main", script);
    c["volumeMounts"] = volumes
        .iter()
        .map(|(n, _)| json!({"name": n, "mountPath": format!("/v/{n}")}))
        .collect();
    bound_pod(
        name,
        node,
        json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [c],
            "volumes": volumes.iter()
                .map(|(n, h)| json!({"name": n, "hostPath": h}))
                .collect::<Vec<_>>(),
        }),
    )
}

/// The `FailedMount` event messages of pod `name`.
fn failed_mounts(c: &Cluster, name: &str) -> Vec<String> {
    c.get(&format!(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}"
    ))
    .and_then(|l| l["items"].as_array().cloned())
    .unwrap_or_default()
    .iter()
    .filter(|e| e["reason"] == "FailedMount" && e["type"] == "Warning")
    .filter_map(|e| e["message"].as_str().map(str::to_string))
    .collect()
}

#[test]
fn typed_host_paths_are_made_or_checked_and_a_failed_check_is_a_failed_mount() {
    // A unique directory of this test's own, removed with everything in it at the end.
    let base = tempfile::Builder::new()
        .prefix("berth-host-path-")
        .tempdir()
        .expect("a temp dir");
    let (c, node) = Cluster::start_one();
    let b = base.path();
    let made_dir = b.join("made/by/kubelet");
    let made_file = b.join("app.log");
    let untyped = b.join("untyped/missing");

    // Made: the *OrCreate types at set-up, the untyped one as containerd makes a bind source.
    c.apply(&host_path_pod(
        "maker",
        &node,
        &[
            ("d", json!({"path": made_dir, "type": "DirectoryOrCreate"})),
            ("f", json!({"path": made_file, "type": "FileOrCreate"})),
            ("u", json!({"path": untyped})),
        ],
        &format!("echo in > /v/d/x && echo log > /v/f && echo u > /v/u/x && {SLEEP_FOREVER}"),
    ));
    c.wait_for_pod_ready("default", "maker", START);
    assert!(made_dir.is_dir());
    assert_eq!(mode(&made_dir), 0o755);
    assert_eq!(mode(&b.join("made")), 0o755, "parents are made 0755 too");
    assert_eq!(mode(&made_file), 0o644);
    assert_eq!(mode(&untyped), 0o755);
    c.wait_for(REACT, "the pod's writes on the host", || {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        match (
            read(made_dir.join("x")),
            read(made_file.clone()),
            read(untyped.join("x")),
        ) {
            (d, f, u) if d == "in\n" && f == "log\n" && u == "u\n" => Ok(()),
            other => Err(other),
        }
    });

    // Checked: a file where a Directory is asked for holds the pod back with the kubelet's
    // FailedMount event; no container is made.
    // Pod `name` whose volume `volume` asks for `path` to be of `kind`, which it is not: waits
    // for its FailedMount saying so (`is not <what>`) and returns that message.
    let held_back = |name: &str, volume: &str, path: &Path, kind: &str, what: &str| {
        let source = json!({"path": path, "type": kind});
        c.apply(&host_path_pod(
            name,
            &node,
            &[(volume, source)],
            SLEEP_FOREVER,
        ));
        let want = format!(
            "MountVolume.SetUp failed for volume \"{volume}\" : hostPath type check failed: {} is not {what}",
            path.display()
        );
        c.wait_for(REACT, &format!("{name}'s FailedMount event"), || {
            let seen = failed_mounts(&c, name);
            ok_if(seen.contains(&want), seen)
        });
        want
    };
    let want = held_back("checked", "data", &made_file, "Directory", "a directory");
    // The event and the status are two writes: wait for the status to catch up.
    c.wait_for(REACT, "the checked pod's ContainerCreating status", || {
        let pod = c
            .get("/api/v1/namespaces/default/pods/checked")
            .unwrap_or_default();
        let status = &pod["status"];
        let waiting = &status["containerStatuses"][0]["state"]["waiting"]["reason"];
        ok_if(
            status["phase"] == "Pending" && waiting == "ContainerCreating",
            status.clone(),
        )
    });
    let out = c.kubectl().ok(&["describe", "pod", "checked"]);
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("Warning  FailedMount") && l.contains(&want)),
        "{out}"
    );

    // A Socket check on a directory, with its own words.
    held_back("socket", "s", &made_dir, "Socket", "a socket file");
    drop(c);
}

/// A tmpfs the test mounts on the host (`shared` or private), unmounted with whatever was
/// mounted below it when the test ends, passing or not.
struct HostMount(PathBuf);

impl HostMount {
    fn tmpfs(at: &Path, shared: bool) -> HostMount {
        std::fs::create_dir_all(at).expect("mount point");
        run_ok("mount", &["-t", "tmpfs", "tmpfs", &at.to_string_lossy()]);
        let propagation = if shared {
            "--make-shared"
        } else {
            "--make-private"
        };
        run_ok("mount", &[propagation, &at.to_string_lossy()]);
        HostMount(at.to_path_buf())
    }
}

impl Drop for HostMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .args(["-R", "-l"])
            .arg(&self.0)
            .status();
    }
}

fn run_ok(cmd: &str, args: &[&str]) {
    let status = std::process::Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(status.success(), "{cmd} {args:?}: {status}");
}

/// `mountPropagation` as the kubelet and containerd's CRI honour it: a `HostToContainer`
/// mount sees what the host mounts below it after the container started (a private one
/// does not), and a source on a private host mount is refused with containerd's words
/// rather than silently not propagating.
#[test]
fn host_to_container_mounts_see_later_host_mounts_and_need_a_propagating_source() {
    let (c, node) = Cluster::start_one();
    let shared_dir = c.scratch().join("propagating");
    let _shared = HostMount::tmpfs(&shared_dir, true);
    let private_dir = c.scratch().join("private");
    let _private = HostMount::tmpfs(&private_dir, false);
    let volume = |dir: &Path| json!({"path": dir.to_string_lossy(), "type": "Directory"});
    let with_propagation = |name: &str, dir: &Path, mode: Option<&str>| {
        let mut pod = host_path_pod(name, &node, &[("data", volume(dir))], SLEEP_FOREVER);
        if let Some(mode) = mode {
            pod["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = json!(mode);
        }
        pod
    };
    c.apply(&with_propagation(
        "slave",
        &shared_dir,
        Some("HostToContainer"),
    ));
    c.apply(&with_propagation("private", &shared_dir, None));
    c.apply(&with_propagation(
        "refused",
        &private_dir,
        Some("HostToContainer"),
    ));
    c.wait_for_pod_ready("default", "slave", START);
    c.wait_for_pod_ready("default", "private", START);

    let later = shared_dir.join("later");
    let _later = HostMount::tmpfs(&later, false);
    std::fs::write(later.join("hello"), "from the host").expect("write");
    let read = |pod: &str| {
        c.exec("default", pod, None, &["cat", "/v/data/later/hello"])
            .stdout
    };
    c.wait_for(
        REACT,
        "the host's later mount inside the HostToContainer pod",
        || {
            let got = read("slave");
            ok_if(got == "from the host", got)
        },
    );
    assert_eq!(
        read("private"),
        "",
        "a private mount must not see the host's later mount"
    );

    let message = c.wait_waiting("default", "refused", "main", "CreateContainerError", START);
    assert!(
        message.contains("but it is not a shared or slave mount"),
        "{message}"
    );
}
