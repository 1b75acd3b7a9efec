//! Certificates that renew themselves, seen from a running node (issue 31, acceptance 1): with
//! `--certificate-validity 1m`, the agent's client and serving certificates and the
//! controller's serving certificate are each renewed at least twice (their serials change)
//! while a pod keeps running untouched, a `kubectl get pods -w` opened at the start and the
//! agent's own watches stay open, and `kubectl exec` and `kubectl logs` (controller → agent,
//! verifying the agent's serving certificate) keep working; `kubectl get csr` lists the
//! node's approved requests of both signers. Then, on the same cluster, a restarted agent
//! takes up its renewed certificate again and one kept down past its expiry joins again with
//! its token, its pod adopted untouched. The controller-only checks (approval rules,
//! another node's identity refused, `certificate renew`) are in `control_plane_certificates`.

use berth_tests::pki::{presented_serial, write_kubeconfig};
use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, Kubectl};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the certificates live.
const VALIDITY: &str = "1m";
/// How long three serials of each may take: two renewals at ≤ 90 % of a minute, plus the
/// controller's and agent's start.
const GIVE_UP: Duration = Duration::from_secs(4 * 60);

/// The serial (hex) of a PEM certificate.
fn serial_of_pem(pem: &[u8]) -> Result<String, String> {
    let der = CertificateDer::pem_slice_iter(pem)
        .next()
        .ok_or("no certificate")?
        .map_err(|e| e.to_string())?;
    serial_of_der(&der)
}

fn serial_of_der(der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    Ok(cert.raw_serial_as_string())
}

/// The serials seen of one certificate, in the order first seen.
#[derive(Debug, Default)]
struct Serials {
    seen: Vec<String>,
}

impl Serials {
    fn saw(&mut self, serial: Result<String, String>) {
        if let Ok(s) = serial
            && self.seen.last() != Some(&s)
        {
            self.seen.push(s);
        }
    }

    /// Renewals seen: distinct serials after the first.
    fn renewals(&self) -> usize {
        self.seen
            .iter()
            .collect::<BTreeSet<_>>()
            .len()
            .saturating_sub(1)
    }
}

fn json_of(k: &Kubectl, args: &[&str]) -> Value {
    let out = k.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// The pod's containers as (name, containerID, restartCount).
fn containers(k: &Kubectl, pod: &str) -> Vec<(String, String, i64)> {
    let p = json_of(k, &["get", "pod", pod, "-o", "json"]);
    p.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_string(),
                        c["containerID"].as_str().unwrap_or_default().to_string(),
                        c["restartCount"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn wait_running(k: &Kubectl, pod: &str, within: Duration) -> Duration {
    let start = Instant::now();
    berth_tests::wait::wait_for(within, &format!("pod {pod} Running"), || {
        let phase = k.run(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"]);
        ok_if(phase.stdout.trim() == "Running", phase.stdout.clone())
    });
    start.elapsed()
}

/// A metric's value in the Prometheus text, by its full sample name (with labels).
fn metric(text: &str, sample: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| match v.trim() {
            "+Inf" => Some(f64::INFINITY),
            v => v.parse().ok(),
        })
}

/// A cluster whose certificates live [`VALIDITY`], and kubectl for it. kubectl authenticates
/// with a token: the admin certificate lives a minute too, and its renewal is the
/// controller's business (`certificate renew`), not these tests'.
fn short_lived_cluster() -> (Cluster, Kubectl, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "ops-token,ops,1000,\"system:masters\"\n").expect("tokens file");
    let mut config = ClusterConfig::agents(1);
    config.controller_args = vec![
        "--certificate-validity".to_string(),
        VALIDITY.to_string(),
        "--token-auth-file".to_string(),
        tokens.display().to_string(),
    ];
    let c = Cluster::start_with(config);
    let kubeconfig = dir.path().join("ops.kubeconfig");
    write_kubeconfig(
        &kubeconfig,
        c.controller().url(),
        &c.controller().ca_pem(),
        json!({"token": "ops-token"}),
    );
    let k = Kubectl::new(c.controller())
        .with_kubeconfig(&kubeconfig)
        .with_logs(c.logs());
    (c, k, dir)
}

#[test]
fn node_certificates_renew_in_place_without_breaking_watches_pods_or_exec() {
    let (mut c, k, _dir) = short_lived_cluster();
    let node = c.node_name(0).to_string();
    let ca = c.controller().ca_pem();

    let mut watch = k.spawn(&["get", "pods", "-w", "-o", "name"]);
    let ticker = sh_container(
        "ticker",
        "i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done",
    );
    k.apply_stdin(
        &bound_pod(
            "steady",
            &node,
            json!({"containers": [ticker], "terminationGracePeriodSeconds": 0}),
        )
        .to_string(),
    );
    wait_running(&k, "steady", Duration::from_secs(90));
    watch.expect_line(Duration::from_secs(30), "the watch shows pod/steady", |l| {
        l == "pod/steady"
    });
    let before = containers(&k, "steady");
    assert_eq!(before.len(), 1, "{before:?}");
    let port: u16 = k
        .ok(&[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}",
        ])
        .trim()
        .parse()
        .expect("the agent's port");

    let (mut agent_client, mut agent_serving, mut controller_serving) =
        (Serials::default(), Serials::default(), Serials::default());
    let client_pem = c.agent(0).pki("kubelet-client-current.pem");
    let node_crt = c.agent(0).pki("node.crt");
    let mut last_exec = Instant::now() - Duration::from_secs(60);
    let (mut execs, mut logs) = (0, 0);
    let started = Instant::now();
    c.wait_for(
        GIVE_UP,
        "two renewals each of the agent's client and serving and the controller's serving certificates",
        || {
            agent_client.saw(
                std::fs::read(&client_pem)
                    .or_else(|_| std::fs::read(&node_crt))
                    .map_err(|e| e.to_string())
                    .and_then(|pem| serial_of_pem(&pem)),
            );
            agent_serving.saw(presented_serial(port, &ca));
            controller_serving.saw(presented_serial(c.controller().port(), &ca));
            // exec and logs go controller → agent over a new connection each time, so each
            // verifies the serving certificate the agent presents then.
            if last_exec.elapsed() >= Duration::from_secs(4) {
                last_exec = Instant::now();
                let word = format!("hello-{execs}");
                let out = k.ok(&["exec", "steady", "--", "echo", &word]);
                assert_eq!(out.trim(), word, "kubectl exec after {:?}", started.elapsed());
                execs += 1;
                let out = k.ok(&["logs", "steady", "--tail=1"]);
                assert!(out.starts_with("tick "), "kubectl logs: {out:?}");
                logs += 1;
            }
            let done = [&agent_client, &agent_serving, &controller_serving]
                .iter()
                .all(|s| s.renewals() >= 2);
            if done {
                Ok(())
            } else {
                Err(format!(
                    "client {:?}, serving {:?}, controller {:?}",
                    agent_client.seen, agent_serving.seen, controller_serving.seen
                ))
            }
        },
    );
    eprintln!(
        "renewed in {:.0?}: agent client {:?}, agent serving {:?}, controller serving {:?}; {execs} execs, {logs} logs",
        started.elapsed(),
        agent_client.seen,
        agent_serving.seen,
        controller_serving.seen
    );

    // The running pod was never touched.
    assert_eq!(
        containers(&k, "steady"),
        before,
        "the pod's containers changed"
    );
    assert!(before.iter().all(|(_, _, restarts)| *restarts == 0));

    // The watch opened at the start is still open: it shows a pod created now, which the
    // agent (over its own watch, never relisted) starts promptly.
    k.apply_stdin(
        &bound_pod(
            "late",
            &node,
            json!({"containers": [sh_container("c", "sleep 3600")], "terminationGracePeriodSeconds": 0}),
        )
        .to_string(),
    );
    watch.expect_line(
        Duration::from_secs(30),
        "the first watch shows pod/late",
        |l| l == "pod/late",
    );
    let took = wait_running(&k, "late", Duration::from_secs(60));
    eprintln!("a pod created after the renewals ran in {took:.1?}");
    let agent_log = std::fs::read_to_string(c.agent(0).stderr_log()).unwrap_or_default()
        + &std::fs::read_to_string(c.agent(0).stdout_log()).unwrap_or_default();
    for broken in ["watch broke", "relisting", "cannot resume"] {
        let hits: Vec<&str> = agent_log.lines().filter(|l| l.contains(broken)).collect();
        assert!(hits.is_empty(), "the agent's watches broke: {hits:#?}");
    }
    assert!(
        agent_log.contains("certificate renewed"),
        "the agent logs its renewals"
    );

    // The agent's approved requests, as `kubectl get csr` lists them.
    let table = k.ok(&["get", "csr"]);
    let requestor = format!("system:node:{node}");
    for signer in [
        "kubernetes.io/kube-apiserver-client-kubelet",
        "kubernetes.io/kubelet-serving",
    ] {
        let approved = table
            .lines()
            .filter(|l| {
                l.contains(signer) && l.contains(&requestor) && l.contains("Approved,Issued")
            })
            .count();
        assert!(
            approved >= 2,
            "{signer}: {approved} approved requests of {requestor}\n{table}"
        );
    }

    // The agent reports its certificates' remaining life and its renewals.
    let text = k.ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/metrics"),
    ]);
    for gauge in [
        "kubelet_certificate_manager_client_ttl_seconds",
        "kubelet_certificate_manager_server_ttl_seconds",
    ] {
        let ttl = metric(&text, gauge).unwrap_or_else(|| panic!("no {gauge}"));
        assert!(ttl > 0.0 && ttl <= 60.0, "{gauge} = {ttl}");
    }
    for kind in ["client", "serving"] {
        let n = metric(
            &text,
            &format!("berth_agent_certificate_renewals_total{{kind=\"{kind}\"}}"),
        )
        .unwrap_or(0.0);
        assert!(n >= 2.0, "{kind} renewals: {n}");
    }
    assert!(
        metric(
            &text,
            "kubelet_certificate_manager_client_expiration_renew_errors"
        )
        .is_some()
    );

    // On the same cluster (a second one would wait for renewals again): restarts.
    restarts_reuse_a_valid_certificate_and_rejoin_after_expiry(&mut c, &k, &before);
}

/// The agent's client certificate now: its serial as the agent logs it (hex, no colons) and
/// when it expires.
fn client_certificate(c: &Cluster) -> (String, SystemTime) {
    let pem = std::fs::read(c.agent(0).pki("node.crt")).expect("node.crt");
    let der = CertificateDer::pem_slice_iter(&pem)
        .next()
        .expect("a certificate")
        .expect("PEM");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("X.509");
    let expires = UNIX_EPOCH + Duration::from_secs(cert.validity().not_after.timestamp() as u64);
    (cert.raw_serial_as_string().replace(':', ""), expires)
}

/// The serial the agent's latest start took its client certificate with (its log's
/// "certificate in use" line).
/// Restarts agent 0 and waits for the serial of the client certificate it then uses (after
/// `starts_before` earlier starts).
fn restarted_serial(
    c: &mut Cluster,
    starts_before: usize,
    timeout: Duration,
    what: &str,
) -> String {
    c.restart_agent(0);
    c.wait_for(timeout, what, || serial_in_use(c, starts_before))
}

fn serial_in_use(c: &Cluster, starts_before: usize) -> Result<String, String> {
    let log = std::fs::read_to_string(c.agent(0).stderr_log()).unwrap_or_default()
        + &std::fs::read_to_string(c.agent(0).stdout_log()).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("certificate in use") && l.contains("kind=\"client\""))
        .nth(starts_before)
        .and_then(|l| l.split("serial=").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .map(str::to_string)
        .ok_or_else(|| "no \"certificate in use\" line for this start yet".to_string())
}

/// Restarts of the agent of `c` (whose client certificate has been renewed and whose pod
/// `steady` has the containers `before`): restarted while the certificate is valid it takes it
/// up again, no join; down past its expiry it joins again with its token at start, and the
/// pod is adopted untouched.
fn restarts_reuse_a_valid_certificate_and_rejoin_after_expiry(
    c: &mut Cluster,
    k: &Kubectl,
    before: &[(String, String, i64)],
) {
    let (renewed, _) = client_certificate(c);
    // Restarted while it is valid: the renewed certificate is taken up again, no join.
    let used = restarted_serial(
        c,
        1,
        Duration::from_secs(30),
        "the restarted agent's certificate",
    );
    assert_eq!(
        used, renewed,
        "a valid renewed certificate is reused at restart"
    );

    // Down past its expiry: the agent joins again with its token at start.
    c.kill9_agent(0);
    let (last, expires) = client_certificate(c);
    c.wait_for(
        Duration::from_secs(150),
        "the client certificate to expire",
        || {
            ok_if(
                SystemTime::now() > expires + Duration::from_secs(1),
                format!("{last} expires at {expires:?}"),
            )
        },
    );
    let rejoined = restarted_serial(
        c,
        2,
        Duration::from_secs(60),
        "the rejoined agent's certificate",
    );
    assert_ne!(
        rejoined, last,
        "an expired certificate is replaced at start"
    );
    // It works: the node reports, exec reaches its server, the pod was adopted untouched.
    c.wait_for(
        Duration::from_secs(60),
        "kubectl exec through the rejoined agent",
        || {
            let run = k.run(&["exec", "steady", "--", "echo", "back"]);
            ok_if(run.success() && run.stdout.trim() == "back", run.describe())
        },
    );
    assert_eq!(
        containers(k, "steady"),
        before,
        "the pod's containers changed"
    );
}
