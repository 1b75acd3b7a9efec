//! Test support for the runtime and image tests: a private containerd, a local registry and
//! busybox-based OCI image layouts built from the host's busybox-static.
//!
//! Each containerd holds the harness's host lock (shared: everything here is named per test
//! process; `berth_tests::host::sharing`), so no test that needs the host alone runs beside it.
//!
//! Everything is started per test and torn down by Drop guards that stop processes by PID,
//! kill leftover container processes and shims of the test's namespace, unmount leftovers and
//! remove the namespace's cgroups and runc state. A missing capability (not root, a binary not
//! installed) panics: these tests never pass silently.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use berth_agent::image::ImageService;
use berth_agent::image::RegistriesConfig;
use berth_agent::runtime::{ContainerConfig, ContainerId, ContainerImage, Runtime, RuntimeOptions};
use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn require(binary: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(binary).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{binary} is not installed: this test needs it (see .ci/run)"
    );
}

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (containerd, runc, cgroups)"
    );
}

/// Polls `check` until it is true or `limit` passes.
pub fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20)); // not ordering: the polling helper, checking until its deadline
    }
    check()
}

/// A private containerd: own root, state, socket; CRI disabled; a unique namespace.
pub struct Containerd {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub namespace: String,
    child: Child,
    /// Released last, after Drop removed everything.
    _host: berth_tests::host::HostLock,
}

fn spawn_containerd(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("containerd.log"))
        .expect("log");
    Command::new("containerd")
        .arg("--config")
        .arg(dir.join("config.toml"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn containerd")
}

impl Containerd {
    pub fn start() -> Containerd {
        require_root();
        require("containerd");
        require("runc");
        require("containerd-shim-runc-v2");
        let host = berth_tests::host::HostLock::acquire();
        let dir = tempfile::Builder::new()
            .prefix("berth-ctd-")
            .tempdir()
            .expect("tempdir");
        let d = dir.path();
        let socket = d.join("containerd.sock");
        let config = format!(
            "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{sock}\"\n\
             [ttrpc]\n  address = \"{sock}.ttrpc\"\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{opt}\"\n",
            root = d.join("root").display(),
            state = d.join("state").display(),
            sock = socket.display(),
            opt = d.join("opt").display(),
        );
        std::fs::write(d.join("config.toml"), config).expect("config");
        let child = spawn_containerd(d);
        let namespace = format!(
            "bt{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let ctd = Containerd {
            dir,
            socket,
            namespace,
            child,
            _host: host,
        };
        ctd.wait_for_socket();
        ctd
    }

    fn wait_for_socket(&self) {
        assert!(
            wait_until(Duration::from_secs(10), || UnixStream::connect(
                &self.socket
            )
            .is_ok()),
            "containerd does not answer on its socket; log:\n{}",
            self.log()
        );
    }

    fn stop_daemon(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if wait_until(Duration::from_secs(5), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops containerd (SIGTERM) and starts it again with the same config; shims and
    /// containers keep running meanwhile.
    pub fn restart(&mut self) {
        self.stop_daemon();
        let _ = std::fs::remove_file(&self.socket);
        self.child = spawn_containerd(self.dir.path());
        self.wait_for_socket();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    pub fn options(&self) -> RuntimeOptions {
        let mut opts = RuntimeOptions::new(&self.socket, &self.namespace);
        opts.state_dir = self.dir.path().join("fifo");
        opts
    }

    pub async fn runtime(&self) -> Runtime {
        Runtime::connect_with(self.options())
            .await
            .expect("connect to the test containerd")
    }

    fn kill_namespace_processes(&self) {
        // Container processes, found through the namespace's cgroups.
        let mut pids = Vec::new();
        collect_procs(
            &Path::new("/sys/fs/cgroup/pids").join(&self.namespace),
            &mut pids,
        );
        // Shims of this containerd (and the sockets they leave when killed).
        let sock = self.socket.display().to_string();
        let mut shim_sockets = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for e in entries.flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains("containerd-shim") && cmdline.contains(&sock) {
                    pids.push(pid);
                    shim_sockets.push(shim_socket(&cmdline));
                }
            }
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for socket in shim_sockets.into_iter().flatten() {
            let _ = std::fs::remove_file(socket);
        }
    }

    fn unmount_leftovers(&self) {
        let prefix = self.dir.path().display().to_string();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<&str> = mountinfo
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| p.starts_with(&prefix))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let _ = Command::new("umount").arg("-l").arg(p).status();
        }
    }

    fn remove_cgroups(&self) {
        if let Ok(ctrls) = std::fs::read_dir("/sys/fs/cgroup") {
            for c in ctrls.flatten() {
                remove_cgroup_tree(&c.path().join(&self.namespace));
            }
        }
        let _ = std::fs::remove_dir_all(Path::new("/run/containerd/runc").join(&self.namespace));
    }
}

/// The socket a runc v2 shim listens on: /run/containerd/s/<sha256(address/namespace/id)>.
fn shim_socket(cmdline: &str) -> Option<PathBuf> {
    let args: Vec<&str> = cmdline.split_whitespace().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1).copied())
    };
    let path = format!(
        "{}/{}/{}",
        arg("-address")?,
        arg("-namespace")?,
        arg("-id")?
    );
    let hex = sha256(path.as_bytes());
    Some(Path::new("/run/containerd/s").join(hex.trim_start_matches("sha256:")))
}

fn collect_procs(dir: &Path, out: &mut Vec<i32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                collect_procs(&e.path(), out);
            }
        }
    }
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.kill_namespace_processes();
        self.stop_daemon();
        self.unmount_leftovers();
        self.remove_cgroups();
    }
}

/// Docker's registry on a free loopback port.
pub struct Registry {
    pub dir: tempfile::TempDir,
    pub addr: String,
    child: Child,
}

impl Registry {
    pub fn start() -> Registry {
        require("docker-registry");
        let dir = tempfile::Builder::new()
            .prefix("berth-reg-")
            .tempdir()
            .expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp: {{addr: {addr}}}\n",
            dir.path().join("data").display()
        );
        std::fs::write(dir.path().join("config.yml"), config).expect("config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn docker-registry");
        let reg = Registry { dir, addr, child };
        assert!(
            wait_until(Duration::from_secs(10), || reg
                .get("/v2/")
                .starts_with("HTTP/1.1 200")),
            "the registry did not come up; log:\n{}",
            std::fs::read_to_string(reg.dir.path().join("registry.log")).unwrap_or_default()
        );
        reg
    }

    /// A raw HTTP GET (status line and body).
    pub fn get(&self, path: &str) -> String {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        if s.write_all(req.as_bytes()).is_err() {
            return String::new();
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// Pushes `oci:<layout>:<tag>` to `<registry>/<repository>:<dest_tag>` with skopeo.
    pub fn push(&self, layout: &Path, tag: &str, repository: &str, dest_tag: &str) {
        require("skopeo");
        let out = Command::new("skopeo")
            .args([
                "--insecure-policy",
                "copy",
                "--all",
                "--dest-tls-verify=false",
                "-q",
            ])
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repository}:{dest_tag}", self.addr))
            .output()
            .expect("run skopeo");
        assert!(
            out.status.success(),
            "skopeo copy failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Builds `layers` as the layout `busybox:<tag>` in `dir` (with `with_index`, behind an
    /// image index) and pushes it here as `library/busybox:<tag>`.
    pub fn push_busybox(
        &self,
        dir: &Path,
        layers: &[Vec<Entry>],
        tag: &str,
        with_index: bool,
    ) -> Layout {
        let layout = build_layout(dir, layers, &format!("busybox:{tag}"), tag, with_index);
        self.push(&layout.dir, tag, "library/busybox", tag);
        layout
    }

    /// A registries file sending docker.io to this registry.
    pub fn mirror_config(&self) -> RegistriesConfig {
        RegistriesConfig::parse(&format!(
            "mirrors:\n  docker.io:\n    endpoint:\n      - \"http://{}\"\n",
            self.addr
        ))
        .expect("registries config")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// Image layouts

pub fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// One entry of a layer tar.
pub enum Entry {
    Dir(&'static str),
    File(String, Vec<u8>, u32),
    Symlink(String, String),
}

fn tar_of(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        match e {
            Entry::Dir(p) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, p, std::io::empty()).expect("tar dir");
            }
            Entry::File(p, data, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, p, data.as_slice()).expect("tar file");
            }
            Entry::Symlink(p, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, p, target).expect("tar link");
            }
        }
    }
    b.into_inner().expect("tar")
}

/// The base layer: /bin/busybox with its applets, /etc/passwd and group, /www/index.html.
pub fn busybox_entries() -> Vec<Entry> {
    require("busybox");
    let busybox = std::fs::read("/bin/busybox").expect("read /bin/busybox (busybox-static)");
    let list = Command::new("/bin/busybox")
        .arg("--list")
        .output()
        .expect("busybox --list");
    let mut entries = vec![
        Entry::Dir("bin"),
        Entry::Dir("etc"),
        Entry::Dir("tmp"),
        Entry::Dir("www"),
        Entry::Dir("proc"),
        Entry::Dir("sys"),
        Entry::Dir("dev"),
        Entry::File("bin/busybox".into(), busybox, 0o755),
        Entry::File(
            "etc/passwd".into(),
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n".to_vec(),
            0o644,
        ),
        Entry::File(
            "etc/group".into(),
            b"root:x:0:\nnobody:x:65534:\n".to_vec(),
            0o644,
        ),
        Entry::File("www/index.html".into(), b"hello from pod\n".to_vec(), 0o644),
    ];
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let applet = applet.trim();
        if !applet.is_empty() && applet != "busybox" {
            entries.push(Entry::Symlink(format!("bin/{applet}"), "busybox".into()));
        }
    }
    entries
}

/// A built OCI image layout.
pub struct Layout {
    pub dir: PathBuf,
    pub manifest_digest: String,
    /// The digest index.json points at (an index when `with_index`).
    pub top_digest: String,
    pub diff_ids: Vec<String>,
    /// Uncompressed layer tars (for docker-save archives).
    pub layer_tars: Vec<Vec<u8>>,
    pub config: Vec<u8>,
}

fn write_blob(dir: &Path, bytes: &[u8]) -> (String, i64) {
    let digest = sha256(bytes);
    let hex = digest.trim_start_matches("sha256:");
    std::fs::write(dir.join("blobs/sha256").join(hex), bytes).expect("write blob");
    (digest, bytes.len() as i64)
}

/// Builds an OCI layout in `dir` with the given layers (gzipped), named `name` (containerd
/// annotation) and `tag` (ref.name). With `with_index`, index.json points at an image index
/// holding a linux/amd64 entry and a fake linux/arm64 entry.
pub fn build_layout(
    dir: &Path,
    layers: &[Vec<Entry>],
    name: &str,
    tag: &str,
    with_index: bool,
) -> Layout {
    std::fs::create_dir_all(dir.join("blobs/sha256")).expect("layout dir");
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("oci-layout");
    let mut diff_ids = Vec::new();
    let mut layer_descs = Vec::new();
    let mut layer_tars = Vec::new();
    for entries in layers {
        let tar = tar_of(entries);
        diff_ids.push(sha256(&tar));
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&tar).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let (digest, size) = write_blob(dir, &gz);
        layer_descs.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": digest, "size": size,
        }));
        layer_tars.push(tar);
    }
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .expect("config");
    let (config_digest, config_size) = write_blob(dir, &config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config_size},
        "layers": layer_descs,
    }))
    .expect("manifest");
    let (manifest_digest, manifest_size) = write_blob(dir, &manifest);
    let annotations = serde_json::json!({
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    });
    let (top_media, top_digest, top_size) = if with_index {
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "digest": manifest_digest, "size": manifest_size,
                 "platform": {"architecture": "arm64", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "digest": manifest_digest, "size": manifest_size,
                 "platform": {"architecture": "amd64", "os": "linux"}},
            ],
        }))
        .expect("index");
        let (d, s) = write_blob(dir, &index);
        ("application/vnd.oci.image.index.v1+json", d, s)
    } else {
        (
            "application/vnd.oci.image.manifest.v1+json",
            manifest_digest.clone(),
            manifest_size,
        )
    };
    let index_json = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": top_media, "digest": top_digest, "size": top_size,
                       "annotations": annotations}],
    });
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&index_json).expect("index.json"),
    )
    .expect("write index.json");
    Layout {
        dir: dir.to_path_buf(),
        manifest_digest,
        top_digest,
        diff_ids,
        layer_tars,
        config,
    }
}

/// busybox (with `/www/index.html`) as an OCI layout `docker.io/library/busybox:local` (tag
/// `local`) in `dir`; with `with_index`, behind an image index.
pub fn local_busybox(dir: &Path, with_index: bool) -> Layout {
    build_layout(
        dir,
        &[busybox_entries()],
        "docker.io/library/busybox:local",
        "local",
        with_index,
    )
}

/// A `docker save`-style tarball of `layout`'s image tagged `repo_tag`.
pub fn docker_save_tar(layout: &Layout, repo_tag: &str, out: &Path) {
    let config_name = format!(
        "{}.json",
        sha256(&layout.config).trim_start_matches("sha256:")
    );
    let mut entries = vec![Entry::File(
        config_name.clone(),
        layout.config.clone(),
        0o644,
    )];
    let mut layer_names = Vec::new();
    for (i, tar) in layout.layer_tars.iter().enumerate() {
        let name = format!("layer{i}/layer.tar");
        entries.push(Entry::File(name.clone(), tar.clone(), 0o644));
        layer_names.push(name);
    }
    let manifest = serde_json::to_vec(&serde_json::json!([
        {"Config": config_name, "RepoTags": [repo_tag], "Layers": layer_names}
    ]))
    .expect("manifest.json");
    entries.push(Entry::File("manifest.json".into(), manifest, 0o644));
    std::fs::write(out, tar_of(&entries)).expect("write docker save tar");
}

/// A tar of a whole directory (an OCI layout archive).
pub fn tar_dir(dir: &Path, out: &Path) {
    let file = std::fs::File::create(out).expect("create tar");
    let mut b = tar::Builder::new(file);
    b.append_dir_all(".", dir).expect("tar dir");
    b.finish().expect("finish tar");
}

/// An image service on `rt` with no registries configured.
pub fn images(rt: &Runtime) -> ImageService {
    ImageService::new(rt.clone(), RegistriesConfig::default())
}

/// A container config running `args` in `image`, logging to `log`.
pub fn container(id: &str, image: ContainerImage, args: &[&str], log: PathBuf) -> ContainerConfig {
    ContainerConfig {
        command: args.iter().map(|s| s.to_string()).collect(),
        env: vec![("GREETING".into(), "hello".into())],
        labels: BTreeMap::from([("io.berth.container.name".to_string(), id.to_string())]),
        ..ContainerConfig::new(ContainerId::new(id).expect("container id"), image, log)
    }
}

/// Parses CRI log lines into (stream, tag, text).
pub fn cri_lines(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let ts = parts.next().unwrap_or_default();
            assert!(
                ts.len() == 30 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
                "bad CRI timestamp in {l:?}"
            );
            (
                parts.next().unwrap_or_default().to_string(),
                parts.next().unwrap_or_default().to_string(),
                parts.next().unwrap_or_default().to_string(),
            )
        })
        .collect()
}
