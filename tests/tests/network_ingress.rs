//! Issue 35, the built-in Ingress, on the multi-host test bed (two cluster hosts and a client
//! host on segment A; real agents, containers and kubectl). Every agent serves ingress on its
//! host's ports 80 and 443; the client reaches them with `curl --resolve`:
//! * an Ingress with two hosts routes by host, `Prefix` and `Exact` paths to Services whose
//!   pods run on either host, through either host's proxy; `spec.defaultBackend` answers
//!   unmatched hosts; HTTP/2 in clear text is served as HTTP/1.1 is;
//! * TLS with SNI from a `kubernetes.io/tls` Secret: curl verifies the Secret's certificate
//!   (with its CA only); a name no Secret covers gets the default self-signed certificate;
//! * a WebSocket upgrade (101, then bytes both ways) passes through the proxy;
//! * a new path added to the Ingress takes effect (the time it took is printed) while a client
//!   loops on requests over keep-alive connections: none fails;
//! * `status.loadBalancer.ingress` lists both hosts, and `kubectl get ingress` shows them;
//! * the access log line and the request counter are on the agent's log and `/metrics`;
//! * a stopped agent leaves nothing behind: its ports are free and no rule is its.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Instant;

use berth_tests::host::require_tool;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

/// Debian's interpreter (not a shim on the PATH), for the WebSocket client.
const PYTHON: &str = "/usr/bin/python3.11";
/// Hosts 0 and 1 run agents; host 2 is the client.
const AGENTS: usize = 2;
const CLIENT: usize = 2;

/// Serves, on port 8080, the same files under every path the tests ask for, each saying which
/// Service the pod backs (`NAME`) and which pod answered.
fn web_server(name: &str) -> String {
    format!(
        "mkdir -p /www/api /www/new && for f in index.html exact exactly api/v1 new/page; do \
         echo \"{name} $(hostname)\" > /www/$f; done && httpd -p 8080 -h /www; \
         trap 'exit 0' TERM; while true; do sleep 1; done"
    )
}

/// A WebSocket endpoint on port 8080: answers the upgrade with 101, then echoes bytes.
const WS_SERVER: &str = r#"cat > /ws.sh <<'EOF'
#!/bin/sh
cr=$(printf '\r')
while IFS= read -r line; do
  case "$line" in ""|"$cr") break;; esac
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n'
exec cat
EOF
chmod +x /ws.sh && nc -ll -p 8080 -e /ws.sh &
trap 'exit 0' TERM; while true; do sleep 1; done"#;

fn pod(name: &str, app: &str, node: &str, script: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.28",
                                 "command": ["sh", "-c", script],
                                 "ports": [{"containerPort": 8080, "name": "web"}]}]}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": name},
                 "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}})
}

fn backend(service: &str) -> Value {
    json!({"service": {"name": service, "port": {"number": 80}}})
}

fn path(p: &str, kind: &str, service: &str) -> Value {
    json!({"path": p, "pathType": kind, "backend": backend(service)})
}

/// The Ingress: `shop.test` by paths, `secure.test` over TLS, the rest to `fallback`.
fn shop_ingress(extra_paths: &[Value]) -> Value {
    let mut shop = vec![
        path("/", "Prefix", "app"),
        json!({"path": "/api", "pathType": "Prefix",
               "backend": {"service": {"name": "api", "port": {"name": "http"}}}}),
        path("/exact", "Exact", "exact"),
        path("/ws", "Prefix", "ws"),
    ];
    shop.extend(extra_paths.iter().cloned());
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
    "metadata": {"name": "shop"},
    "spec": {"ingressClassName": "berth",
             "defaultBackend": backend("fallback"),
             "tls": [{"hosts": ["secure.test"], "secretName": "secure-tls"}],
             "rules": [
                 {"host": "shop.test", "http": {"paths": shop}},
                 {"host": "secure.test", "http": {"paths": [path("/", "Prefix", "api")]}},
             ]}})
}

/// `curl` from the client host; the body (or the failure).
fn curl(c: &Cluster, args: &[&str]) -> Result<String, String> {
    let curl = require_tool("curl").to_string_lossy().into_owned();
    let mut all = vec![
        "timeout",
        "10",
        curl.as_str(),
        "-sS",
        "--fail",
        "--max-time",
        "5",
    ];
    all.extend_from_slice(args);
    let r = c.test_bed().host_exec(CLIENT, &all);
    if r.success() {
        Ok(r.stdout)
    } else {
        Err(r.describe())
    }
}

/// The Service that answered `http://HOST/PATH` through host `via`'s proxy.
fn served_by(c: &Cluster, via: usize, host: &str, path: &str) -> Result<String, String> {
    let addr = c.test_bed().host(via).address.to_string();
    let body = curl(
        c,
        &[
            "--resolve",
            &format!("{host}:80:{addr}"),
            &format!("http://{host}{path}"),
        ],
    )?;
    Ok(body
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// A WebSocket handshake and an echoed message through host `via`'s proxy, by a Python client
/// on the client host: the status line, then what came back.
const WS_CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=5)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: shop.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
head, _, rest = buf.partition(b"\r\n\r\n")
print(head.decode().splitlines()[0] if head else "no response")
s.sendall(b"ping-through-berth\n")
while b"ping-through-berth" not in rest:
    d = s.recv(4096)
    if not d:
        break
    rest += d
print(rest.decode().strip())
"#;

/// The client's request loop; killed if the test fails before it stops the loop.
struct ClientLoop(std::process::Child);

impl Drop for ClientLoop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn an_ingress_routes_hosts_and_paths_terminates_tls_upgrades_and_updates_live() {
    let mut c = Cluster::start_with(ClusterConfig {
        hosts: Some(TestBedLayout::new(AGENTS + 1, 0)),
        ..ClusterConfig::agents(AGENTS)
    });
    let bed = c.test_bed();
    let addrs: Vec<String> = (0..AGENTS)
        .map(|i| bed.host(i).address.to_string())
        .collect();

    // Backends across both hosts.
    let backends = [
        ("app", 0),
        ("api", 1),
        ("exact", 1),
        ("fallback", 0),
        ("newsvc", 1),
    ];
    for (name, host) in backends {
        c.apply(&pod(
            &format!("{name}-0"),
            name,
            c.node_name(host),
            &web_server(name),
        ));
        c.apply(&service(name));
    }
    c.apply(&pod("ws-0", "ws", c.node_name(0), WS_SERVER));
    c.apply(&service("ws"));
    for (name, _) in backends.iter().chain([&("ws", 0)]) {
        c.wait_for_pod_ready("default", &format!("{name}-0"), secs(90));
    }

    // The TLS Secret for secure.test, from a CA of the test's own.
    let tls = berth_tests::pki::serving_certificate("ingress-test-ca", &["secure.test"]);
    let dir = c.scratch();
    let (crt, key, ca) = (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&crt, &tls.cert_pem).expect("tls.crt");
    std::fs::write(&key, &tls.key_pem).expect("tls.key");
    std::fs::write(&ca, &tls.ca_pem).expect("ca.crt");
    c.kubectl().ok(&[
        "create",
        "secret",
        "tls",
        "secure-tls",
        &format!("--cert={}", crt.display()),
        &format!("--key={}", key.display()),
    ]);

    // The controller made the default class.
    let class = c
        .get("/apis/networking.k8s.io/v1/ingressclasses/berth")
        .expect("the berth IngressClass");
    assert_eq!(class["spec"]["controller"], "berth.io/ingress");
    assert_eq!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );

    c.apply(&shop_ingress(&[]));
    let started = Instant::now();
    c.wait_for(secs(30), "shop.test/ routed to app through host 0", || {
        let got = served_by(&c, 0, "shop.test", "/")?;
        ok_if(got == "app", got)
    });
    eprintln!(
        "ingress: first route served {:.2} s after the apply",
        started.elapsed().as_secs_f64()
    );

    // Hosts and paths, through either host's proxy (backends on both hosts).
    for via in 0..AGENTS {
        for (host, p, want) in [
            ("shop.test", "/", "app"),
            ("shop.test", "/exactly", "app"),
            ("shop.test", "/exact", "exact"),
            ("shop.test", "/api/v1", "api"),
            ("SHOP.test", "/api/v1", "api"),
            ("other.test", "/", "fallback"),
            ("secure.test", "/", "api"),
        ] {
            let got = c.wait_for(secs(20), &format!("{host}{p} via host {via}"), || {
                served_by(&c, via, host, p)
            });
            assert_eq!(got, want, "{host}{p} through host {via}");
        }
    }

    // HTTP/2 in clear text (prior knowledge) is served too.
    let h2c = curl(
        &c,
        &[
            "--http2-prior-knowledge",
            "-w",
            " %{http_version}",
            "--resolve",
            &format!("shop.test:80:{}", addrs[0]),
            "http://shop.test/api/v1",
        ],
    )
    .expect("HTTP/2 in clear text");
    assert!(
        h2c.starts_with("api ") && h2c.trim_end().ends_with(" 2"),
        "{h2c}"
    );

    // TLS: the Secret's certificate for secure.test (verified with its CA alone), over h2.
    let https = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "--resolve".to_string(),
            format!("{name}:443:{}", addrs[1]),
            "-w".to_string(),
            " %{http_version}".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(format!("https://{name}/"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&c, &args)
    };
    let ca_path = ca.display().to_string();
    let ca_arg = ["--cacert", ca_path.as_str()];
    let body = c.wait_for(
        secs(30),
        "secure.test over TLS with the Secret's certificate",
        || https("secure.test", &ca_arg),
    );
    assert!(body.starts_with("api "), "{body}");
    assert!(body.trim_end().ends_with(" 2"), "HTTP/2 by ALPN: {body}");
    let h1 = https("secure.test", &[ca_arg[0], ca_arg[1], "--http1.1"]).expect("HTTP/1.1 over TLS");
    assert!(h1.trim_end().ends_with(" 1.1"), "{h1}");
    // A name no Secret covers: the default certificate, which the CA does not sign.
    assert!(https("shop.test", &ca_arg).is_err());
    let verbose = c.test_bed().host_exec(
        CLIENT,
        &[
            "curl",
            "-sk",
            "-v",
            "--resolve",
            &format!("shop.test:443:{}", addrs[0]),
            "https://shop.test/",
        ],
    );
    assert!(
        verbose.stderr.contains("Berth Ingress Default Certificate"),
        "{}",
        verbose.describe()
    );
    assert!(verbose.stdout.starts_with("app "), "{}", verbose.describe());

    // A WebSocket upgrade through host 0's proxy.
    let ws = c.test_bed().host_exec(
        CLIENT,
        &["timeout", "20", PYTHON, "-c", WS_CLIENT, &addrs[0]],
    );
    assert!(ws.success(), "{}", ws.describe());
    let mut lines = ws.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("HTTP/1.1 101 Switching Protocols"),
        "{}",
        ws.stdout
    );
    assert_eq!(lines.next(), Some("ping-through-berth"), "{}", ws.stdout);

    // A live change: a client loops on shop.test/ (five requests per keep-alive connection)
    // while a path is added; the new path answers, and no request of the loop failed.
    let stop = dir.join("stop-loop");
    let curl_bin = require_tool("curl").to_string_lossy().into_owned();
    let url = "http://shop.test/";
    let five = format!("-o /dev/null {url} ").repeat(5);
    let loop_script = format!(
        "while [ ! -e {stop} ]; do {curl_bin} -s --max-time 5 -w '%{{http_code}}\\n' \
         --resolve shop.test:80:{addr} {five} || echo curl-failed; done",
        stop = stop.display(),
        addr = addrs[0],
    );
    let mut looping = ClientLoop(
        Command::new("nsenter")
            .arg(format!("--net={}", bed.host(CLIENT).netns_path().display()))
            .args(["sh", "-c", &loop_script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the client loop"),
    );
    let out = looping.0.stdout.take().expect("the loop's stdout");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = seen.clone();
    let counter = std::thread::spawn(move || {
        let (mut ok, mut failed) = (0u64, Vec::new());
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.trim() == "200" {
                ok += 1;
            } else {
                failed.push(line);
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (ok, failed)
    });
    let answered = || seen.load(std::sync::atomic::Ordering::Relaxed);
    c.wait_for(secs(10), "the loop's first 20 requests", || {
        ok_if(answered() >= 20, answered())
    });
    c.apply(&shop_ingress(&[path("/new", "Prefix", "newsvc")]));
    let changed = Instant::now();
    for via in 0..AGENTS {
        c.wait_for(
            secs(20),
            &format!("shop.test/new/page via host {via}"),
            || {
                let got = served_by(&c, via, "shop.test", "/new/page")?;
                ok_if(got == "newsvc", got)
            },
        );
    }
    eprintln!(
        "ingress: the new path answered on both hosts {:.2} s after the apply",
        changed.elapsed().as_secs_f64()
    );
    let at_change = answered();
    c.wait_for(
        secs(10),
        "20 more requests of the loop after the change",
        || ok_if(answered() >= at_change + 20, answered()),
    );
    std::fs::write(&stop, "").expect("stop file");
    let _ = looping.0.wait();
    let (ok, failed) = counter.join().expect("the counter");
    eprintln!("ingress: the client loop made {ok} requests during the change");
    assert!(ok > 0, "the loop made no request");
    assert!(
        failed.is_empty(),
        "failed requests during the change: {failed:?}"
    );

    // The status lists both hosts, and kubectl shows them.
    let mut want = addrs.clone();
    want.sort();
    c.wait_for(secs(30), "both hosts in the Ingress status", || {
        let ing = c
            .get("/apis/networking.k8s.io/v1/namespaces/default/ingresses/shop")
            .ok_or("no ingress")?;
        let mut ips: Vec<String> = ing["status"]["loadBalancer"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["ip"].as_str().map(str::to_string))
            .collect();
        ips.sort();
        ok_if(ips == want, ing["status"].to_string())
    });
    let table = c.kubectl().ok(&["get", "ingress", "shop"]);
    assert!(
        addrs.iter().all(|a| table.contains(a.as_str())),
        "kubectl get ingress:\n{table}"
    );

    // The access log line and the request counter.
    let log = std::fs::read_to_string(c.agent(0).stderr_log()).unwrap_or_default()
        + &std::fs::read_to_string(c.agent(0).stdout_log()).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("\"GET /exact HTTP/1.1\" 200")
                && l.contains("host=shop.test ingress=default/shop service=exact:80 upstream=")),
        "no access log line for /exact in agent 0's log"
    );
    let metrics = c.kubectl().ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{}/proxy/metrics", c.node_name(0)),
    ]);
    assert!(
        metrics.contains(
            "berth_ingress_requests_total{namespace=\"default\",ingress=\"shop\",service=\"app:80\",code=\"200\"}"
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("ingress"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Nothing of the proxy outlives its agent: the ports are free, no rule is its.
    c.agent_mut(0).terminate();
    let listening = c.test_bed().host_exec_ok(0, &["ss", "-Hltn"]);
    assert!(
        !listening.contains(":80 ") && !listening.contains(":443 "),
        "{listening}"
    );
    let rules = c.test_bed().host_exec_ok(0, &["iptables-save"]);
    // (The service proxy's ClusterIP rules stay, by design; none catches the node's ports.)
    let node_dest = format!("-d {}/32", addrs[0]);
    assert!(
        !rules
            .lines()
            .any(|l| l.contains(&node_dest)
                && (l.contains("--dport 80 ") || l.contains("--dport 443 "))),
        "{rules}"
    );
}
