//! Acceptance area 1: from an empty data dir the controller starts, prints its address, writes
//! its PKI and a 0600 admin kubeconfig, and the stock kubectl can talk to it (`version`,
//! `api-resources`, `get ns`). Also: restarts keep the CA, SIGTERM/SIGINT stop it cleanly,
//! `--write-kubeconfig` and `--tls-san` do what they say.

use berth_tests::client::Endpoint;
use berth_tests::host::file_mode as mode;
use berth_tests::kinds::KINDS;
use berth_tests::pki::{current_context, parse_kubeconfig};
use berth_tests::{Api, Controller, Credentials, Req, Table};

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn first_start_prints_its_address_and_writes_the_pki() {
    let c = Controller::start();
    let url = c.url().to_string();
    let port = url
        .strip_prefix("https://127.0.0.1:")
        .and_then(|p| p.parse::<u16>().ok());
    assert!(
        port.is_some_and(|p| p != 0),
        "listen-address is {url:?}, want https://127.0.0.1:PORT"
    );

    let stdout = read(&c.stdout_log());
    assert!(
        stdout
            .lines()
            .any(|l| l.trim() == format!("listening on {url}")),
        "stdout has no line `listening on {url}`:\n{stdout}\n{}",
        c.log_tail()
    );
    assert_eq!(read(&c.data_dir().join("listen-address")).trim(), url);

    for (file, marker) in [
        ("ca.crt", "-----BEGIN CERTIFICATE-----"),
        ("server.crt", "-----BEGIN CERTIFICATE-----"),
        ("admin.crt", "-----BEGIN CERTIFICATE-----"),
        ("ca.key", "PRIVATE KEY-----"),
        ("server.key", "PRIVATE KEY-----"),
        ("admin.key", "PRIVATE KEY-----"),
    ] {
        let text = read(&c.pki(file));
        assert!(
            text.contains(marker),
            "pki/{file} does not look like PEM ({marker}):\n{text}"
        );
    }
}

#[test]
fn the_admin_kubeconfig_is_private_and_embeds_the_ca_and_admin_credentials() {
    let c = Controller::start();
    let path = c.kubeconfig();
    assert_eq!(mode(&path), 0o600, "{} must be mode 0600", path.display());
    let text = read(&path);
    let config = parse_kubeconfig(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    let ctx = current_context(&config).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(ctx.server, c.url(), "current context's server");
    assert_eq!(
        String::from_utf8_lossy(&ctx.ca_pem).trim(),
        read(&c.pki("ca.crt")).trim(),
        "certificate-authority-data must be pki/ca.crt"
    );
    assert_eq!(
        String::from_utf8_lossy(&ctx.client_cert_pem).trim(),
        read(&c.pki("admin.crt")).trim(),
        "client-certificate-data must be pki/admin.crt"
    );
    assert!(
        String::from_utf8_lossy(&ctx.client_key_pem).contains("PRIVATE KEY-----"),
        "client-key-data must hold a private key"
    );
}

#[test]
fn kubectl_version_shows_the_1_34_api_level() {
    let c = Controller::start();
    let out = c.kubectl_ok(&["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    let server = &v["serverVersion"];
    let git = server["gitVersion"].as_str().unwrap_or_default();
    assert!(
        git.starts_with("v1.34.") && git.contains("+berth"),
        "server gitVersion {git:?}:\n{out}"
    );
    assert_eq!(server["major"], "1", "{out}");
    assert_eq!(server["minor"], "34", "{out}");
    let plain = c.kubectl_ok(&["version"]);
    assert!(plain.contains(&format!("Server Version: {git}")), "{plain}");
}

#[test]
fn api_resources_lists_every_served_resource_with_its_short_name() {
    let c = Controller::start();
    let out = c.kubectl_ok(&["api-resources"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        table.headers,
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{out}"
    );
    for k in KINDS {
        let row = table
            .rows
            .iter()
            .find(|r| r[0] == k.plural && r[2] == k.api_version)
            .unwrap_or_else(|| {
                panic!(
                    "api-resources has no {} ({}):\n{out}",
                    k.plural, k.api_version
                )
            });
        let shorts: Vec<&str> = row[1].split(',').filter(|s| !s.is_empty()).collect();
        if let Some(short) = k.short {
            assert!(
                shorts.contains(&short),
                "{} should have short name {short}: {row:?}",
                k.plural
            );
        }
        assert_eq!(
            row[3],
            k.namespaced.to_string(),
            "{} NAMESPACED: {row:?}",
            k.plural
        );
        assert_eq!(row[4], k.kind, "{} KIND: {row:?}", k.plural);
    }
    // Short names work as resource names too.
    for short in [
        "deploy", "rs", "ds", "sts", "cj", "po", "no", "ns", "ev", "cm", "rc", "pdb",
    ] {
        c.kubectl_ok(&["get", short, "-A"]);
    }
}

#[test]
fn get_ns_shows_the_four_initial_namespaces_as_active() {
    let c = Controller::start();
    let out = c.kubectl_ok(&["get", "ns"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(table.headers, ["NAME", "STATUS", "AGE"], "{out}");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(
            table.cell(ns, "STATUS"),
            Some("Active"),
            "namespace {ns}:\n{out}"
        );
    }
}

#[test]
fn a_restart_keeps_the_ca_and_the_admin_kubeconfig_working() {
    let mut c = Controller::start();
    let ca = read(&c.pki("ca.crt"));
    let admin = read(&c.pki("admin.crt"));
    c.kubectl_ok(&[
        "create",
        "configmap",
        "before-restart",
        "--from-literal=k=v",
    ]);
    c.restart();
    assert_eq!(read(&c.pki("ca.crt")), ca, "the CA must survive a restart");
    assert_eq!(
        read(&c.pki("admin.crt")),
        admin,
        "the admin certificate must survive a restart"
    );
    let out = c.kubectl_ok(&[
        "get",
        "configmap",
        "before-restart",
        "-o",
        "jsonpath={.data.k}",
    ]);
    assert_eq!(out, "v");
}

#[test]
fn sigterm_and_sigint_shut_down_cleanly() {
    let mut c = Controller::start();
    let status = c.terminate();
    assert!(
        status.success(),
        "SIGTERM should exit 0, got {status}\n{}",
        c.log_tail()
    );
    c.restart();
    let status = c.interrupt();
    assert!(
        status.success(),
        "SIGINT should exit 0, got {status}\n{}",
        c.log_tail()
    );
}

#[test]
fn write_kubeconfig_writes_a_private_working_copy() {
    let elsewhere = tempfile::tempdir().unwrap();
    let path = elsewhere.path().join("berth.kubeconfig");
    let path_arg = path.to_str().unwrap().to_string();
    let c = Controller::start_with(&["--write-kubeconfig", &path_arg]);
    assert!(
        path.is_file(),
        "--write-kubeconfig {path_arg} wrote nothing\n{}",
        c.log_tail()
    );
    assert_eq!(
        mode(&path),
        0o600,
        "{path_arg} holds a private key and must be mode 0600"
    );
    let out = c
        .kubectl()
        .with_kubeconfig(&path)
        .ok(&["get", "ns", "default", "-o", "name"]);
    assert_eq!(out.trim(), "namespace/default");
}

#[test]
fn tls_san_names_are_valid_for_the_serving_certificate() {
    let c = Controller::start_with(&["--tls-san", "berth.test", "--tls-san", "api.berth.test"]);
    let addr = format!("127.0.0.1:{}", c.port()).parse().unwrap();
    for name in ["berth.test", "api.berth.test"] {
        let endpoint = Endpoint {
            url: format!("https://{name}:{}", c.port()),
            ca_pem: c.ca_pem(),
            credentials: Credentials::Anonymous,
            resolve: Some((name.to_string(), addr)),
            http2_only: false,
        };
        let reply = Api::new(endpoint, c.logs())
            .try_send(Req::get("/healthz"))
            .unwrap_or_else(|e| {
                panic!("TLS to {name} (a --tls-san) failed: {e}\n{}", c.log_tail())
            });
        assert_eq!(reply.status, 200, "{}", reply.describe());
    }
}
