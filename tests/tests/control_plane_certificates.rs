//! Certificates that renew themselves, the controller's part (issue 31, acceptance 1): the
//! `certificates.k8s.io/v1` CertificateSigningRequest API through stock kubectl (create,
//! `get csr` columns, `certificate approve|deny`, the issued certificate carrying the requested
//! identity and verifying against the CA, upstream's validation errors); a node's renewal of
//! its own client certificate auto-approved and signed, a node asking for another node's
//! identity refused (403, nothing issued); with `--certificate-validity 1m` the serving
//! certificate renewed in place at least twice while a watch opened at the start keeps
//! working; `berth-controller certificate renew` replacing the admin kubeconfig's certificate.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use berth_tests::host::unique_suffix;
use berth_tests::join::join_locally;
use berth_tests::pki::{
    client_cert_user, current_context, parse_kubeconfig, presented_serial, write_kubeconfig,
};
use berth_tests::table::words;
use berth_tests::wait::ok_if;
use berth_tests::{Controller, Kubectl};
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// A certificate request (PEM) for CN `cn`, O `orgs`, with a new key; and the key (PEM).
fn csr_pem(cn: &str, orgs: &[&str]) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    // rcgen keeps one value per attribute type: one organization at most.
    if let Some(o) = orgs.first() {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    let pem = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .expect("csr");
    (pem, key.serialize_pem())
}

/// A CSR manifest.
fn manifest(name: &str, pem: &str, signer: &str, usages: &[&str], seconds: Option<i64>) -> String {
    let usages: Vec<String> = usages.iter().map(|u| format!("  - {u}")).collect();
    let expiration = seconds.map_or_else(String::new, |s| format!("  expirationSeconds: {s}\n"));
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: {signer}\n{expiration}  usages:\n{}\n",
        B64.encode(pem),
        usages.join("\n")
    )
}

fn json_of(k: &Kubectl, args: &[&str]) -> Value {
    let out = k.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// The issued certificate of CSR `name` (PEM), once there.
fn issued(c: &Controller, k: &Kubectl, name: &str) -> String {
    c.wait_for(
        Duration::from_secs(30),
        &format!("csr {name} issued"),
        || {
            let csr = json_of(k, &["get", "csr", name, "-o", "json"]);
            match csr.pointer("/status/certificate").and_then(Value::as_str) {
                Some(b64) if !b64.is_empty() => Ok(String::from_utf8_lossy(
                    &B64.decode(b64).expect("certificate is base64"),
                )
                .into_owned()),
                _ => Err(csr["status"].clone()),
            }
        },
    )
}

/// (CN, O, notAfter − notBefore in seconds) of a PEM certificate, after checking that the CA
/// signed it.
fn subject(cert_pem: &str, ca_pem: &[u8]) -> (String, Vec<String>, i64) {
    let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).expect("PEM");
    let cert = block.parse_x509().expect("certificate");
    let (_, ca_block) = x509_parser::pem::parse_x509_pem(ca_pem).expect("CA PEM");
    let ca = ca_block.parse_x509().expect("CA");
    cert.verify_signature(Some(ca.public_key()))
        .expect("signed by the cluster CA");
    let cn = cert
        .subject()
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .collect();
    let orgs = cert
        .subject()
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(String::from))
        .collect();
    let v = cert.validity();
    (cn, orgs, v.not_after.timestamp() - v.not_before.timestamp())
}

/// A kubectl that presents `identity` (cert + key PEM).
fn kubectl_as(c: &Controller, identity: &[u8], file: &str) -> Kubectl {
    let path = c.scratch().join(file);
    write_kubeconfig(&path, c.url(), &c.ca_pem(), client_cert_user(identity));
    c.kubectl().with_kubeconfig(&path)
}

#[test]
fn csrs_are_approved_denied_and_signed_as_upstream_through_kubectl() {
    let c = Controller::start();
    let k = c.kubectl();
    let name = format!("jane-{}", unique_suffix());
    let (pem, key) = csr_pem("jane", &["dev"]);
    let signer = "kubernetes.io/kube-apiserver-client";
    let body = manifest(
        &name,
        &pem,
        signer,
        &["client auth", "digital signature"],
        Some(3600),
    );
    k.ok_stdin(&["create", "-f", "-"], &body);

    // kubectl get csr: upstream's columns; the requestor is who created it.
    let table = k.ok(&["get", "csr", &name]);
    let mut lines = table.lines().map(words);
    let header = lines.next().unwrap_or_default();
    assert_eq!(
        header,
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{table}"
    );
    let row = lines.next().unwrap_or_default();
    assert_eq!(
        (row[0], row[2], row[3], row[4], row[5]),
        (name.as_str(), signer, "admin", "60m", "Pending"),
        "{table}"
    );
    let stored = json_of(&k, &["get", "csr", &name, "-o", "json"]);
    assert_eq!(stored["spec"]["username"], "admin", "{stored}");
    assert!(
        stored["spec"]["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "system:masters")),
        "{stored}"
    );

    k.ok(&["certificate", "approve", &name]);
    let cert = issued(&c, &k, &name);
    let (cn, orgs, life) = subject(&cert, &c.ca_pem());
    assert_eq!((cn.as_str(), orgs), ("jane", vec!["dev".to_string()]));
    assert!((3600..=3700).contains(&life), "lifetime {life}s");
    let approved = json_of(&k, &["get", "csr", &name, "-o", "json"]);
    let condition = &approved["status"]["conditions"][0];
    assert_eq!(
        (
            &condition["type"],
            &condition["status"],
            &condition["reason"]
        ),
        (
            &Value::from("Approved"),
            &Value::from("True"),
            &Value::from("KubectlApprove")
        ),
        "{approved}"
    );
    assert!(condition["lastUpdateTime"].is_string(), "{approved}");
    let table = k.ok(&["get", "csr", &name, "--no-headers"]);
    assert!(table.contains("Approved,Issued"), "{table}");

    // The certificate is a working identity.
    let identity = format!("{cert}{key}");
    let jane = kubectl_as(&c, identity.as_bytes(), "jane.kubeconfig");
    let whoami = jane.ok(&["auth", "whoami", "-o", "json"]);
    assert!(whoami.contains("\"username\": \"jane\""), "{whoami}");
    assert!(whoami.contains("\"dev\""), "{whoami}");

    // A denied request is never signed, and its decision cannot be taken back.
    let denied = format!("denied-{}", unique_suffix());
    let (pem, _) = csr_pem("joe", &[]);
    k.ok_stdin(
        &["create", "-f", "-"],
        &manifest(&denied, &pem, signer, &["client auth"], None),
    );
    k.ok(&["certificate", "deny", &denied]);
    berth_tests::wait::ensure_for(Duration::from_secs(3), "denied csr stays unsigned", || {
        let csr = json_of(&k, &["get", "csr", &denied, "-o", "json"]);
        match csr.pointer("/status/certificate") {
            None => Ok(()),
            Some(_) => Err(csr),
        }
    });
    let table = k.ok(&["get", "csr", &denied, "--no-headers"]);
    assert!(table.contains("Denied"), "{table}");
    let mut csr = json_of(&k, &["get", "csr", &denied, "-o", "json"]);
    csr["status"]["conditions"] = serde_json::json!([]);
    let put = c.admin_api().send(berth_tests::client::Req::put(
        format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{denied}/approval"),
        &csr,
    ));
    assert_eq!(put.status, 422, "{}", put.describe());
    put.assert_body_has("updates may not remove a condition of type \\\"Denied\\\"");
}

#[test]
fn invalid_requests_are_refused_with_upstreams_messages() {
    let c = Controller::start();
    let k = c.kubectl();
    let (pem, _) = csr_pem("jane", &[]);
    let cases: &[(String, &str)] = &[
        (
            manifest(
                "bad-pem",
                "not a request",
                "kubernetes.io/kube-apiserver-client",
                &["client auth"],
                None,
            ),
            "spec.request: Invalid value: PEM block type must be CERTIFICATE REQUEST",
        ),
        (
            manifest("bad-signer", &pem, "example", &["client auth"], None),
            "spec.signerName: Invalid value: \"example\": must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ),
        (
            manifest(
                "short",
                &pem,
                "kubernetes.io/kube-apiserver-client",
                &["client auth"],
                Some(60),
            ),
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)",
        ),
        (
            manifest(
                "bad-usage",
                &pem,
                "kubernetes.io/kube-apiserver-client",
                &["flying"],
                None,
            ),
            "spec.usages[0]: Unsupported value: \"flying\"",
        ),
    ];
    for (body, message) in cases {
        let run = k.fails_stdin(&["create", "-f", "-"], body);
        assert!(run.stderr.contains("is invalid"), "{}", run.describe());
        assert!(
            run.stderr.contains(message),
            "want {message:?}\n{}",
            run.describe()
        );
    }
    let (masters, _) = csr_pem("root", &["system:masters"]);
    let run = k.fails_stdin(
        &["create", "-f", "-"],
        &manifest(
            "root",
            &masters,
            "kubernetes.io/kube-apiserver-client",
            &["client auth"],
            None,
        ),
    );
    run.assert_stderr_has("use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed");
}

#[test]
fn a_node_renews_its_own_client_certificate_but_may_not_ask_for_another_nodes() {
    let c = Controller::start();
    let k = c.kubectl();
    let node = format!("renewer-{}", unique_suffix());
    let joined = join_locally(&c, &node, "secret");
    assert_eq!(joined.reply.status, 200, "{}", joined.reply.describe());
    let as_node = kubectl_as(&c, &joined.identity(), "node.kubeconfig");
    let signer = "kubernetes.io/kube-apiserver-client-kubelet";
    let usages = ["digital signature", "client auth"];

    let own = format!("own-{node}");
    let (pem, _) = csr_pem(&format!("system:node:{node}"), &["system:nodes"]);
    as_node.ok_stdin(
        &["create", "-f", "-"],
        &manifest(&own, &pem, signer, &usages, None),
    );
    let cert = issued(&c, &as_node, &own);
    let (cn, orgs, _) = subject(&cert, &c.ca_pem());
    assert_eq!(cn, format!("system:node:{node}"));
    assert_eq!(orgs, vec!["system:nodes".to_string()]);
    let csr = json_of(&k, &["get", "csr", &own, "-o", "json"]);
    let approved = &csr["status"]["conditions"][0];
    assert_eq!(approved["type"], "Approved", "{csr}");
    assert_eq!(approved["reason"], "AutoApproved", "{csr}");
    assert_eq!(
        approved["message"],
        "Auto approving self kubelet client certificate after SubjectAccessReview.",
        "{csr}"
    );
    assert_eq!(
        csr["spec"]["username"],
        format!("system:node:{node}"),
        "{csr}"
    );

    // Another node's identity: refused at create, so nothing exists to approve or sign.
    let other = format!("other-{node}");
    let (pem, _) = csr_pem("system:node:someone-else", &["system:nodes"]);
    let run = as_node.fails_stdin(
        &["create", "-f", "-"],
        &manifest(&other, &pem, signer, &usages, None),
    );
    assert!(
        run.stderr.contains("Forbidden") || run.stderr.contains("forbidden"),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr.contains(&format!(
            "node \"{node}\" may only request certificates for its own identity \"system:node:{node}\", not \"system:node:someone-else\""
        )),
        "{}",
        run.describe()
    );
    let absent = k.fails(&["get", "csr", &other]);
    assert!(
        absent.stderr.contains("NotFound") || absent.stderr.contains("not found"),
        "{}",
        absent.describe()
    );

    // A node may not approve its own requests either (this signer's are not auto-approved).
    let pending = format!("pending-{node}");
    let (pem, _) = csr_pem(&format!("system:node:{node}"), &[]);
    as_node.ok_stdin(
        &["create", "-f", "-"],
        &manifest(
            &pending,
            &pem,
            "kubernetes.io/kube-apiserver-client",
            &["client auth"],
            None,
        ),
    );
    let run = as_node.fails(&["certificate", "approve", &pending]);
    assert!(run.stderr.contains("forbidden"), "{}", run.describe());
}

fn admin_serial(c: &Controller) -> String {
    let text = std::fs::read_to_string(c.kubeconfig()).expect("admin kubeconfig");
    let ctx = current_context(&parse_kubeconfig(&text).expect("yaml")).expect("context");
    let (_, cert) = x509_parser::pem::parse_x509_pem(&ctx.client_cert_pem).expect("pem");
    cert.parse_x509().expect("cert").raw_serial_as_string()
}

#[test]
fn the_serving_certificate_renews_in_place_under_an_open_watch() {
    let c = Controller::start_with(&["--certificate-validity", "1m"]);
    let k = c.kubectl();
    let mut watch = k.spawn(&["get", "pods", "-w", "-o", "name"]);
    let first = format!("before-{}", unique_suffix());
    k.ok(&["run", &first, "--image=busybox:1.28", "--restart=Never"]);
    watch.expect_line(Duration::from_secs(30), "the first pod in the watch", |l| {
        l == format!("pod/{first}")
    });

    // Three serials: two renewals (each at 70–90% of a minute).
    let mut serials: Vec<String> = Vec::new();
    c.wait_for(
        Duration::from_secs(3 * 60),
        "two renewals of the serving certificate",
        || {
            if let Ok(s) = presented_serial(c.port(), &c.ca_pem())
                && serials.last() != Some(&s)
            {
                serials.push(s);
            }
            ok_if(
                serials.iter().collect::<BTreeSet<_>>().len() >= 3,
                serials.clone(),
            )
        },
    );
    // The watch opened at the start still delivers events: the open connection kept the
    // certificate it was given.
    let last = format!("after-{}", unique_suffix());
    k.ok(&["run", &last, "--image=busybox:1.28", "--restart=Never"]);
    watch.expect_line(
        Duration::from_secs(30),
        "a pod created after the renewals",
        |l| l == format!("pod/{last}"),
    );
    let metrics = c
        .admin_api()
        .send(berth_tests::client::Req::get("/metrics"))
        .body;
    let renewals = metrics
        .lines()
        .find_map(|l| l.strip_prefix("berth_apiserver_serving_certificate_renewals_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(renewals >= 2, "{metrics}");
    assert!(
        metrics.contains("berth_apiserver_serving_certificate_expiration_timestamp_seconds "),
        "{metrics}"
    );

    // `certificate renew`: a new admin certificate in the kubeconfig, which works, and a new
    // serving certificate the running controller serves.
    let before = admin_serial(&c);
    let served = presented_serial(c.port(), &c.ca_pem()).expect("serial");
    let run = c.subcommand(&["certificate", "renew", "--certificate-validity", "1m"]);
    assert!(run.success(), "{}", run.describe());
    assert_ne!(admin_serial(&c), before);
    k.ok(&["get", "pods"]);
    c.wait_for(
        Duration::from_secs(20),
        "the renewed serving certificate served",
        || match presented_serial(c.port(), &c.ca_pem()) {
            Ok(s) if s != served && !serials.contains(&s) => Ok(()),
            other => Err(other),
        },
    );
}
