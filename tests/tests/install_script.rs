//! Issue 14, installing more hosts: `scripts/install.sh` run against a scratch root (`--root`,
//! which touches no service) writes exactly the files it documents with their modes, the
//! agent's environment file carries the server and flags in a form a shell and systemd read
//! back, a second run converges to the same files (a given registries.yaml is kept), the
//! units pass `systemd-analyze verify`, and `uninstall` removes every file it wrote.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn install(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .args(args)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "install.sh {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `root`: path (from the root) → (mode, contents).
fn files(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                let mode = meta.permissions().mode() & 0o7777;
                out.insert(
                    format!("/{rel}"),
                    (mode, std::fs::read(&path).unwrap_or_default()),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Fake binaries to install.
fn bin_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for name in ["berth-agent", "berth-controller"] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name}\n")).expect("writes");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    bin
}

#[test]
fn install_writes_its_documented_files_converges_and_uninstalls_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = bin_dir(dir.path());
    let root = dir.path().join("root");
    let token = dir.path().join("token");
    std::fs::write(&token, "K10abc::node:s3cret\n").expect("writes");
    let (root_s, bin_s, token_s) = (
        root.to_string_lossy().into_owned(),
        bin.to_string_lossy().into_owned(),
        token.to_string_lossy().into_owned(),
    );
    let agent = [
        "agent",
        "--server",
        "https://10.0.0.1:6443",
        "--token-file",
        &token_s,
        "--node-name",
        "node-1",
        "--agent-args",
        "--node-ip 10.0.0.5 --node-labels a=\"b\"",
        "--root",
        &root_s,
        "--bin-dir",
        &bin_s,
    ];
    let said = install(&agent);
    assert!(said.contains("no service touched"), "{said}");
    install(&[
        "controller",
        "--controller-args",
        "--tls-san berth.example",
        "--root",
        &root_s,
        "--bin-dir",
        &bin_s,
    ]);

    let first = files(&root);
    let modes: BTreeMap<&str, u32> = first.iter().map(|(p, (m, _))| (p.as_str(), *m)).collect();
    assert_eq!(
        modes,
        BTreeMap::from([
            ("/etc/berth/agent.env", 0o600),
            ("/etc/berth/controller.env", 0o600),
            ("/etc/berth/registries.yaml", 0o600),
            ("/etc/berth/token", 0o600),
            ("/etc/systemd/system/berth-agent.service", 0o644),
            ("/etc/systemd/system/berth-controller.service", 0o644),
            ("/usr/local/bin/berth-agent", 0o755),
            ("/usr/local/bin/berth-controller", 0o755),
        ])
    );
    let etc_mode = std::fs::metadata(root.join("etc/berth"))
        .expect("etc/berth")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(etc_mode, 0o700);
    assert_eq!(first["/etc/berth/token"].1, b"K10abc::node:s3cret\n");
    assert_eq!(
        first["/etc/systemd/system/berth-agent.service"].1,
        std::fs::read(repo().join("systemd/berth-agent.service")).expect("unit")
    );

    // The environment file reads back as written, in a shell (and so in systemd, whose
    // EnvironmentFile takes the same double-quoted form).
    let env = root.join("etc/berth/agent.env");
    let read = Command::new("sh")
        .arg("-c")
        .arg(format!(
            ". '{}'; printf '%s|%s' \"$BERTH_SERVER\" \"$BERTH_AGENT_ARGS\"",
            env.display()
        ))
        .output()
        .expect("sh");
    assert_eq!(
        String::from_utf8_lossy(&read.stdout),
        "https://10.0.0.1:6443|--node-name node-1 --node-ip 10.0.0.5 --node-labels a=\"b\""
    );

    // Again: the same files. A registries.yaml given once is kept by later runs.
    install(&agent);
    assert_eq!(files(&root), first);
    let registries = dir.path().join("registries.yaml");
    std::fs::write(
        &registries,
        "mirrors:\n  docker.io:\n    endpoint: [\"http://10.0.0.2:5000\"]\n",
    )
    .expect("writes");
    let reg_s = registries.to_string_lossy().into_owned();
    install(&[&agent[..], &["--registries", &reg_s]].concat());
    install(&agent);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/berth/registries.yaml")).unwrap_or_default(),
        std::fs::read_to_string(&registries).unwrap_or_default()
    );

    // The units pass systemd-analyze verify (with ExecStart pointed at the installed
    // binaries); a broken copy does not, so the check can fail.
    let units = dir.path().join("units");
    std::fs::create_dir_all(&units).expect("mkdir");
    let bin_root = root.join("usr/local/bin").to_string_lossy().into_owned();
    for unit in ["berth-agent.service", "berth-controller.service"] {
        let text =
            std::fs::read_to_string(root.join("etc/systemd/system").join(unit)).expect("unit");
        std::fs::write(units.join(unit), text.replace("/usr/local/bin", &bin_root))
            .expect("writes");
    }
    let verify = |paths: &[PathBuf]| {
        Command::new("systemd-analyze")
            .arg("verify")
            .args(paths)
            .output()
            .expect("systemd-analyze runs")
    };
    let out = verify(&[
        units.join("berth-agent.service"),
        units.join("berth-controller.service"),
    ]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let broken = units.join("broken.service");
    let text = std::fs::read_to_string(units.join("berth-agent.service")).expect("unit");
    std::fs::write(&broken, text.replace("Restart=always", "Restart=sometimes")).expect("writes");
    assert!(
        !verify(&[broken]).stderr.is_empty(),
        "a broken unit is reported"
    );

    install(&["uninstall", "all", "--root", &root_s]);
    assert_eq!(files(&root), BTreeMap::new());
}

#[test]
fn the_agent_needs_a_server_and_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = bin_dir(dir.path());
    let root = dir.path().join("root");
    let out = Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .args(["agent", "--root"])
        .arg(&root)
        .arg("--bin-dir")
        .arg(&bin)
        .output()
        .expect("bash runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server"));
    assert!(files(&root).is_empty(), "nothing written");
}
