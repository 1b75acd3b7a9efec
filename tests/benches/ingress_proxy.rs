//! Ingress proxy benchmark (prints figures, never fails on them): requests/s and latency
//! percentiles of small responses over N keep-alive connections for a fixed time, through the
//! agent's built-in ingress proxy and, in the same run, through Debian's nginx configured as a
//! reverse proxy (upstream keepalive, the same forwarded headers, an access log) to the same
//! backend; the backend alone is the third row. The backend is a second nginx serving a
//! 3-byte body on this host (`return 200`), reached by the agent through a selector-less
//! Service whose EndpointSlice names it, so no container's start or cgroup is measured. The
//! CPU time each row's server used during its run is printed per 1,000 requests (the agent's
//! whole process; nginx's master and workers), since the load generator shares the cores.
//! The agent's extra RSS is its resident set after the load less before it.
//!
//! Needs Debian's nginx (`apt-get install nginx-light`); without it the bench says so and
//! exits. `BERTH_BENCH_CONNECTIONS` (default 32), `BERTH_BENCH_SECONDS` (default 10) per run.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_tests::agent::agent_binary;
use berth_tests::bench::{built, env_usize};
use berth_tests::stats::{Samples, megabytes, process_cpu};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};
use serde_json::json;

const NGINX: &str = "/usr/sbin/nginx";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// The host's own (non-loopback) address: an EndpointSlice may not name loopback.
fn host_address() -> Ipv4Addr {
    let out = Command::new("ip")
        .args(["-4", "route", "get", "1.1.1.1"])
        .output()
        .expect("ip route get");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace()
        .skip_while(|w| *w != "src")
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no source address in {text:?}"))
}

/// An nginx running `conf` from `dir`; stopped on drop.
struct Nginx(Child);

impl Nginx {
    fn start(dir: &Path, name: &str, conf: &str) -> Nginx {
        let prefix = dir.join(name);
        std::fs::create_dir_all(prefix.join("logs")).expect("nginx dir");
        let file = prefix.join("nginx.conf");
        std::fs::write(&file, conf).expect("nginx.conf");
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&file)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nginx");
        Nginx(child)
    }
}

impl Nginx {
    /// CPU time of the master and its workers so far.
    fn cpu(&self) -> Duration {
        let master = self.0.id();
        let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
            .unwrap_or_default();
        let workers = children.split_whitespace().filter_map(|p| p.parse().ok());
        std::iter::once(master)
            .chain(workers)
            .map(process_cpu)
            .sum()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The nginx settings both instances share: the prefix's logs and temp paths, run as root.
fn common(prefix: &Path, workers: &str) -> String {
    let p = prefix.display();
    format!(
        "user root; worker_processes {workers}; pid {p}/nginx.pid; error_log {p}/error.log;\n\
         events {{ worker_connections 4096; }}\n"
    )
}

/// `GET url` with `Host: bench.test` over `connections` keep-alive connections for `length`:
/// requests per second and the latencies.
async fn load(url: &str, connections: usize, length: Duration) -> (f64, Samples, usize) {
    let client = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(connections)
        .build()
        .expect("client");
    let end = Instant::now() + length;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (client, url) = (client.clone(), url.to_string());
        tasks.push(tokio::spawn(async move {
            let (mut samples, mut errors) = (Samples::new(), 0usize);
            while Instant::now() < end {
                let start = Instant::now();
                let ok = match client.get(&url).header("host", "bench.test").send().await {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if ok {
                    samples.push(start.elapsed());
                } else {
                    errors += 1;
                }
            }
            (samples, errors)
        }));
    }
    let mut all = Samples::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((s, e)) = t.await {
            all.extend(s);
            errors += e;
        }
    }
    (all.len() as f64 / length.as_secs_f64(), all, errors)
}

fn main() {
    let connections = env_usize("BERTH_BENCH_CONNECTIONS", 32).max(1);
    let seconds = env_usize("BERTH_BENCH_SECONDS", 10).max(1) as u64;
    if !Path::new(NGINX).exists() {
        println!(
            "ingress proxy bench: skipped: Debian's nginx is not installed \
             (apt-get install nginx-light), and the bench compares against it"
        );
        return;
    }
    let bin = agent_binary();
    println!(
        "ingress proxy bench: agent {}, {connections} keep-alive connections, {seconds} s per run",
        built(&bin)
    );
    let (backend_port, proxy_port, ingress_port) = (free_port(), free_port(), free_port());
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: vec![
                "--ingress-http-port".into(),
                ingress_port.to_string(),
                "--ingress-https-port".into(),
                "0".into(),
            ],
            ..AgentOptions::default()
        }],
        ..ClusterConfig::agents(1)
    });
    let dir: PathBuf = c.scratch().to_path_buf();
    let addr = host_address();
    let backend_dir = dir.join("backend");
    let backend = Nginx::start(
        &dir,
        "backend",
        &format!(
            "{}http {{ access_log off; server {{ listen {addr}:{backend_port} backlog=4096; \
             keepalive_requests 1000000; location / {{ return 200 \"ok\\n\"; }} }} }}\n",
            common(&backend_dir, "1")
        ),
    );
    let proxy_dir = dir.join("proxy");
    let proxy = Nginx::start(
        &dir,
        "proxy",
        &format!(
            "{}http {{ access_log {}/access.log;\n\
             upstream backend {{ server {addr}:{backend_port}; keepalive 256; }}\n\
             server {{ listen 127.0.0.1:{proxy_port} backlog=4096; keepalive_requests 1000000;\n\
             location / {{ proxy_pass http://backend; proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\"; proxy_set_header Host $host;\n\
             proxy_set_header X-Real-IP $remote_addr;\n\
             proxy_set_header X-Forwarded-For $remote_addr;\n\
             proxy_set_header X-Forwarded-Host $host;\n\
             proxy_set_header X-Forwarded-Port $server_port;\n\
             proxy_set_header X-Forwarded-Proto $scheme; }} }} }}\n",
            common(&proxy_dir, "auto"),
            proxy_dir.display()
        ),
    );

    // The backend as a selector-less Service, routed by a host-less Ingress.
    c.apply(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "backend"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": backend_port}]}}),
    );
    c.apply(
        &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "backend-1", "labels": {"kubernetes.io/service-name": "backend"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": backend_port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [addr.to_string()], "conditions": {"ready": true}}]}),
    );
    c.apply(
        &json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "bench"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "backend", "port": {"number": 80}}}}]}}]}}),
    );

    let ingress_url = format!("http://127.0.0.1:{ingress_port}/");
    let proxy_url = format!("http://127.0.0.1:{proxy_port}/");
    let backend_url = format!("http://{}/", SocketAddr::from((addr, backend_port)));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for (what, url) in [
        ("the agent's ingress", &ingress_url),
        ("nginx", &proxy_url),
        ("the backend", &backend_url),
    ] {
        c.wait_for(secs(60), &format!("{what} answers"), || {
            let body = runtime.block_on(async {
                let r = reqwest::Client::new()
                    .get(url.as_str())
                    .header("host", "bench.test")
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                r.text().await.map_err(|e| e.to_string())
            });
            match body {
                Ok(b) => ok_if(b == "ok\n", b),
                Err(e) => Err(e),
            }
        });
    }

    let length = Duration::from_secs(seconds);
    let warm = Duration::from_secs(2);
    let rss_before = c.agent(0).rss_kib();
    let agent_pid = c.agent(0).pid().unwrap_or_default();
    let agent_cpu = || process_cpu(agent_pid);
    let proxy_cpu = || proxy.cpu();
    let backend_cpu = || backend.cpu();
    let mut rows = Vec::new();
    let runs: [(&str, &String, &dyn Fn() -> Duration); 3] = [
        ("agent ingress", &ingress_url, &agent_cpu),
        ("nginx reverse proxy", &proxy_url, &proxy_cpu),
        ("backend directly", &backend_url, &backend_cpu),
    ];
    for (what, url, cpu) in runs {
        runtime.block_on(load(url, connections, warm));
        let before = cpu();
        let (rps, mut samples, errors) = runtime.block_on(load(url, connections, length));
        let used = cpu().saturating_sub(before);
        let per_k = used.as_secs_f64() * 1e3 / (rps * length.as_secs_f64() / 1e3).max(1e-9);
        rows.push(format!(
            "| {what} | {rps:.0} | {} | {per_k:.1} | {errors} |",
            samples.p50_p99_ms()
        ));
    }
    let rss_after = c.agent(0).rss_kib();
    println!();
    println!(
        "| path ({connections} keep-alive connections, 3-byte responses) | requests/s | latency ms | its CPU ms per 1k requests | errors |"
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!(
        "| agent RSS before → after the load, MB | {} → {} | | | |",
        megabytes(rss_before),
        megabytes(rss_after)
    );
}
