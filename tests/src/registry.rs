//! Debian's `docker-registry` on a free loopback port (or a free port on a test bed's A.1, where
//! agents in the bed's hosts reach it), storing under a temporary directory: the registry the
//! agents' `docker.io` and `quay.io` mirrors point at. Images go in with `skopeo
//! copy` from OCI layouts; a plain HTTP client checks what it serves.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::host::{TOOL_DEADLINE, free_port_on, require_tool};
use crate::http::{HttpResponse, http_request};
use crate::process::{LogTail, run};

/// How long the registry may take to answer `/v2/`.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// A running registry; killed by PID on drop.
pub struct Registry {
    tmp: Option<TempDir>,
    dir: PathBuf,
    addr: String,
    child: Option<Child>,
}

impl Registry {
    /// Starts a registry on `127.0.0.1:<free port>` and waits until `/v2/` answers 200.
    pub fn start() -> Registry {
        Registry::start_on(Ipv4Addr::LOCALHOST)
    }

    /// Starts a registry on `<ip>:<free port>` (an address of this machine's root netns) and
    /// waits until `/v2/` answers 200.
    pub fn start_on(ip: Ipv4Addr) -> Registry {
        let bin = require_tool("docker-registry");
        let tmp = tempfile::Builder::new()
            .prefix("berth-registry-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let dir = tmp.path().to_path_buf();
        let addr = format!("{ip}:{}", free_port_on(ip));
        let config = format!(
            "version: 0.1\n\
             log:\n  level: warn\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n\
             http:\n  addr: {addr}\n",
            data = dir.join("data").display(),
        );
        std::fs::write(dir.join("config.yml"), config)
            .unwrap_or_else(|e| panic!("cannot write the registry config: {e}"));
        let log = std::fs::File::create(dir.join("registry.log"))
            .unwrap_or_else(|e| panic!("cannot create the registry log: {e}"));
        let child = Command::new(bin)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start docker-registry: {e}"));
        let mut reg = Registry {
            tmp: Some(tmp),
            dir,
            addr,
            child: Some(child),
        };
        reg.wait_ready();
        reg
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "docker-registry exited with {status} during start\n{}",
                    self.logs().render()
                );
            }
            match self.get("/v2/") {
                Ok(r) if r.status == 200 => return,
                Ok(r) => {
                    if start.elapsed() > START_DEADLINE {
                        panic!(
                            "the registry answers /v2/ with {}\n{}",
                            r.status,
                            self.logs().render()
                        );
                    }
                }
                Err(e) => {
                    if start.elapsed() > START_DEADLINE {
                        panic!("the registry is not up: {e}\n{}", self.logs().render());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `127.0.0.1:PORT` (or `A.1:PORT` on a test bed)
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `http://127.0.0.1:PORT` (or `http://A.1:PORT`), as a mirror endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn logs(&self) -> LogTail {
        LogTail {
            files: vec![("registry".into(), self.dir.join("registry.log"))],
            lines: 20,
        }
    }

    /// A GET against the registry's API.
    pub fn get(&self, path: &str) -> Result<HttpResponse, String> {
        http_request(&self.addr, "GET", path, &[], Duration::from_secs(10))
    }

    /// Pushes `oci:<layout>:<reference>` to `<registry>/<repository>:<tag>` with skopeo
    /// (plain HTTP: `--dest-tls-verify=false`). Panics with skopeo's output on failure.
    pub fn push(&self, layout: &Path, reference: &str, repository: &str, tag: &str) {
        let mut cmd = Command::new(require_tool("skopeo"));
        cmd.args(["--insecure-policy", "copy", "--dest-tls-verify=false", "-q"])
            .arg(format!("oci:{}:{reference}", layout.display()))
            .arg(format!("docker://{}/{repository}:{tag}", self.addr));
        let r = run(cmd, None, TOOL_DEADLINE);
        if !r.success() {
            panic!(
                "skopeo push failed\n{}\n{}",
                r.describe(),
                self.logs().render()
            );
        }
    }

    /// Whether the registry serves a manifest for `repository:tag` (OCI or Docker schema 2).
    pub fn has_manifest(&self, repository: &str, tag: &str) -> bool {
        let accept = "application/vnd.oci.image.manifest.v1+json, \
                      application/vnd.oci.image.index.v1+json, \
                      application/vnd.docker.distribution.manifest.v2+json";
        http_request(
            &self.addr,
            "HEAD",
            &format!("/v2/{repository}/manifests/{tag}"),
            &[("Accept", accept)],
            Duration::from_secs(10),
        )
        .is_ok_and(|r| r.status == 200)
    }

    /// A k3s-style registries file sending `docker.io`, `quay.io` (the seed DaemonSet's
    /// registry) and `registry.k8s.io` (the seed StatefulSet's) to this registry.
    pub fn mirrors_yaml(&self) -> String {
        let url = self.url();
        format!(
            "mirrors:\n  \"docker.io\":\n    endpoint:\n      - \"{url}\"\n  \"quay.io\":\n    endpoint:\n      - \"{url}\"\n  \"registry.k8s.io\":\n    endpoint:\n      - \"{url}\"\n"
        )
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(tmp) = self.tmp.take()
            && std::env::var_os("BERTH_KEEP_TMP").is_some()
        {
            eprintln!("berth-tests: kept {}", tmp.keep().display());
        }
    }
}
