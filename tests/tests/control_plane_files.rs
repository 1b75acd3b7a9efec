//! Issue 9, files: the controller's data dir is 0700, its store, PKI, join token, kubeconfig
//! and node password records 0600, so a Secret's value in the store cannot be read by another
//! user of the host; modes someone loosened are tightened at the next start, with a warning.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use berth_tests::host::{file_mode as mode, require_root, require_tool, tool, unique_suffix};
use berth_tests::join::join_locally;
use berth_tests::{Controller, Req};
use serde_json::json;

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Everything that must be private, with the mode it must have.
fn private_paths(c: &Controller) -> Vec<(PathBuf, u32)> {
    let data = c.data_dir();
    let mut out = vec![
        (data.clone(), 0o700),
        (data.join("pki"), 0o700),
        (data.join("token"), 0o600),
        (data.join("admin.kubeconfig"), 0o600),
    ];
    // On etcd the objects and the node password records are not in the data dir.
    let mut dirs = vec!["pki"];
    if !berth_tests::controller::on_etcd() {
        out.push((data.join("store.redb"), 0o600));
        out.push((data.join("node-passwords"), 0o700));
        dirs.push("node-passwords");
    }
    for dir in dirs {
        let entries = std::fs::read_dir(data.join(dir))
            .unwrap_or_else(|e| panic!("{}: {e}", data.join(dir).display()));
        for entry in entries.flatten() {
            out.push((entry.path(), 0o600));
        }
    }
    out
}

fn assert_private(c: &Controller) {
    let wrong: Vec<String> = private_paths(c)
        .iter()
        .filter(|(p, want)| mode(p) != *want)
        .map(|(p, want)| format!("{} is {:04o}, want {want:04o}", p.display(), mode(p)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Starts a controller and joins one node, so that every kind of private file exists.
fn controller_with_a_node() -> Controller {
    let c = Controller::start();
    let name = format!("files-{}", unique_suffix());
    let a = join_locally(&c, &name, "s");
    assert_eq!(a.reply.status, 200, "{}", a.reply.describe());
    c
}

#[test]
fn the_data_dir_store_and_pki_are_private_and_a_secret_is_unreadable_by_other_users() {
    if berth_tests::controller::on_etcd() {
        // About the embedded store's file; etcd's data is etcd's to protect.
        return;
    }
    require_root();
    require_tool("setpriv");
    let c = controller_with_a_node();
    // The harness made the data dir with the default umask (0755): fixed at start.
    assert_private(&c);
    for key in ["ca.key", "server.key", "admin.key", "agent-client.key"] {
        assert!(c.pki(key).is_file(), "{} missing", c.pki(key).display());
    }

    let canary = format!("canary-{}", unique_suffix());
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "canary"}, "stringData": {"value": canary}});
    let created = c
        .admin_api()
        .send(Req::post("/api/v1/namespaces/default/secrets", &secret));
    assert_eq!(created.status, 201, "{}", created.describe());

    let store = c.data_dir().join("store.redb");
    // The value is in the file (root can read it there), which is why the file must be private.
    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&canary)
    };
    let bytes = std::fs::read(&store).unwrap_or_else(|e| panic!("{}: {e}", store.display()));
    assert!(
        bytes
            .windows(encoded.len())
            .any(|w| w == encoded.as_bytes()),
        "the canary is not in {}: the check below would prove nothing",
        store.display()
    );
    // The data dir's parent is open to everyone, as /var/lib/berth is on a host (the harness's
    // temporary directory is not): only the data dir's own modes keep other users out.
    set_mode(c.scratch(), 0o755);
    let store_path = store.display().to_string();
    let as_nobody = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "cat",
        store_path.as_str(),
    ];
    let r = tool("setpriv", &as_nobody);
    assert!(
        !r.success() && r.stderr.contains("Permission denied"),
        "user 65534 read the store: {}",
        r.describe()
    );
    // Even with the file's own mode loosened, the data dir keeps other users out.
    set_mode(&store, 0o644);
    let r = tool("setpriv", &as_nobody);
    assert!(!r.success(), "user 65534 read the store: {}", r.describe());
}

#[test]
fn loosened_modes_are_tightened_at_the_next_start_with_a_warning() {
    let mut c = controller_with_a_node();
    assert_private(&c);
    let loosened: Vec<PathBuf> = private_paths(&c)
        .into_iter()
        .map(|(path, want)| {
            set_mode(&path, if want == 0o700 { 0o755 } else { 0o644 });
            path
        })
        .collect();
    let serving_cert = std::fs::read(c.pki("server.crt")).unwrap_or_default();
    c.restart();
    assert_private(&c);
    // The serving certificate is issued anew (fresh, private files, nothing to warn about)
    // when the host's addresses changed in between: other tests' pod bridges come and go.
    let reissued = std::fs::read(c.pki("server.crt")).unwrap_or_default() != serving_cert;
    let log = std::fs::read_to_string(c.stderr_log()).unwrap_or_default();
    let start = log
        .rfind("controller start #2")
        .unwrap_or_else(|| panic!("no second start in the log:\n{log}"));
    let warnings: Vec<&str> = log[start..]
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("tightened"))
        .collect();
    for path in &loosened {
        let shown = path.display().to_string();
        let serving = ["server.crt", "server.key", "server.sans"]
            .iter()
            .any(|f| path.ends_with(f));
        if reissued && serving {
            continue;
        }
        assert!(
            warnings.iter().any(|w| w.contains(&shown)),
            "no warning for {shown}:\n{}",
            warnings.join("\n")
        );
    }
}
