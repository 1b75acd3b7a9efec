//! Debian's `docker-registry` on a free loopback port (or a free port on a test bed's A.1, where
//! agents in the bed's hosts reach it), storing under a temporary directory: the registry the
//! agents' `docker.io` and `quay.io` mirrors point at. Images go in with `skopeo
//! copy` from OCI layouts; a plain HTTP client checks what it serves.
//!
//! [`Registry::start_with_login`] starts one that requires a login (htpasswd) over TLS, for
//! pull secret tests; its CA is under its directory for the agents' registries file.

mod auth;

pub use auth::RegistryLogin;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::host::{TOOL_DEADLINE, free_port_on, require_tool};
use crate::http::{HttpResponse, http_request};
use crate::process::{LogTail, run};
use crate::raw_tls::RawTls;

/// How long the registry may take to answer `/v2/`.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// A running registry; killed by PID on drop.
pub struct Registry {
    tmp: Option<TempDir>,
    dir: PathBuf,
    addr: String,
    child: Option<Child>,
    login: Option<RegistryLogin>,
}

impl Registry {
    /// Starts a registry on `127.0.0.1:<free port>` and waits until `/v2/` answers 200.
    pub fn start() -> Registry {
        Registry::start_on(Ipv4Addr::LOCALHOST)
    }

    /// Starts a registry on `<ip>:<free port>` (an address of this machine's root netns) and
    /// waits until `/v2/` answers 200.
    pub fn start_on(ip: Ipv4Addr) -> Registry {
        Registry::launch(ip, None)
    }

    /// Starts a registry on `127.0.0.1:<free port>` that serves HTTPS only (a certificate for
    /// 127.0.0.1 from a CA of its own) and answers 401 to any request without the login
    /// `username`/`password`; waits until `/v2/` answers 401.
    pub fn start_with_login(username: &str, password: &str) -> Registry {
        Registry::launch(Ipv4Addr::LOCALHOST, Some((username, password)))
    }

    fn launch(ip: Ipv4Addr, login: Option<(&str, &str)>) -> Registry {
        let bin = require_tool("docker-registry");
        let tmp = tempfile::Builder::new()
            .prefix("berth-registry-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let dir = tmp.path().to_path_buf();
        let addr = format!("{ip}:{}", free_port_on(ip));
        let (login, auth, tls) = match login {
            Some((u, p)) => {
                let (login, auth, tls) = auth::prepare(&dir, ip, u, p);
                (Some(login), auth, tls)
            }
            None => (None, String::new(), String::new()),
        };
        let config = format!(
            "version: 0.1\n\
             log:\n  level: warn\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n\
             {auth}\
             http:\n  addr: {addr}\n{tls}",
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
            login,
        };
        reg.wait_ready();
        reg
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if let Some(status) = crate::process::exited(&mut self.child) {
                panic!(
                    "docker-registry exited with {status} during start\n{}",
                    self.logs().render()
                );
            }
            let probe = match &self.login {
                Some(_) => self.tls_status("/v2/"),
                None => self.get("/v2/").map(|r| r.status),
            };
            let ready = if self.login.is_some() { 401 } else { 200 };
            match probe {
                Ok(status) if status == ready => return,
                Ok(status) => {
                    if start.elapsed() > START_DEADLINE {
                        panic!(
                            "the registry answers /v2/ with {status}\n{}",
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

    /// The login a [`Registry::start_with_login`] registry requires.
    pub fn login(&self) -> Option<&RegistryLogin> {
        self.login.as_ref()
    }

    /// The status of an unauthenticated GET over TLS (a login registry).
    fn tls_status(&self, path: &str) -> Result<u16, String> {
        let ca = self
            .login
            .as_ref()
            .map(|l| l.ca_pem.clone())
            .unwrap_or_default();
        let port = self
            .addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .ok_or_else(|| format!("no port in {}", self.addr))?;
        let mut conn = RawTls::connect(port, &ca, Duration::from_secs(5))?;
        conn.send(
            format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.addr
            )
            .as_bytes(),
        )?;
        conn.read_answer(Duration::from_secs(5))
            .map(|(status, _, _)| status)
    }

    /// A GET against the registry's API.
    pub fn get(&self, path: &str) -> Result<HttpResponse, String> {
        http_request(&self.addr, "GET", path, &[], Duration::from_secs(10))
    }

    /// Pushes `oci:<layout>:<reference>` to `<registry>/<repository>:<tag>` with skopeo
    /// (plain HTTP: `--dest-tls-verify=false`). Panics with skopeo's output on failure.
    pub fn push(&self, layout: &Path, reference: &str, repository: &str, tag: &str) {
        let mut cmd = Command::new(require_tool("skopeo"));
        cmd.args(["--insecure-policy", "copy", "--dest-tls-verify=false", "-q"]);
        if let Some(login) = &self.login {
            cmd.arg("--dest-creds")
                .arg(format!("{}:{}", login.username, login.password));
        }
        cmd.arg(format!("oci:{}:{reference}", layout.display()))
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
        crate::process::kill_and_reap(&mut self.child);
        crate::process::drop_or_keep(self.tmp.take());
    }
}
