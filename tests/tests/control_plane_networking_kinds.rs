//! Issue 34, the kinds install manifests carry: Ingress, IngressClass, NetworkPolicy
//! (networking.k8s.io/v1), RuntimeClass (node.k8s.io/v1), CSIDriver, CSINode and
//! VolumeAttachment (storage.k8s.io/v1) are stored and served as upstream serves them: applied
//! client-side and server-side with kubectl 1.33, printed with upstream's columns, explained,
//! defaulted, and refused with upstream's messages. Nothing acts on them yet.

use std::path::Path;

use berth_tests::{Controller, Kubectl, Table};
use serde_json::Value;

const KUBECTL_1_33: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

const INGRESS_CLASS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: berth
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: berth.io/ingress
  parameters:
    apiGroup: k8s.example.com
    kind: IngressParameters
    name: external-lb
"#;

const INGRESS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: default
spec:
  ingressClassName: berth
  tls:
  - hosts: [shop.example.com]
    secretName: shop-tls
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: web, port: {number: 80}}
      - path: /api
        pathType: Exact
        backend:
          service: {name: api, port: {name: http}}
  - host: "*.shop.example.com"
    http:
      paths:
      - path: /
        pathType: ImplementationSpecific
        backend:
          service: {name: web, port: {number: 80}}
"#;

const NETWORK_POLICY: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
  namespace: default
spec:
  podSelector:
    matchLabels: {role: db}
  ingress:
  - from:
    - ipBlock:
        cidr: 172.17.0.0/16
        except: [172.17.1.0/24]
    - namespaceSelector:
        matchLabels: {project: shop}
    ports:
    - port: 6379
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/24}
    ports:
    - protocol: TCP
      port: 32000
      endPort: 32768
"#;

const RUNTIME_CLASS: &str = r#"
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
overhead:
  podFixed: {cpu: 250m, memory: 64Mi}
scheduling:
  nodeSelector: {runtime: gvisor}
"#;

const CSI_DRIVER: &str = r#"
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: hostpath.csi.k8s.io
spec:
  attachRequired: false
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent, Ephemeral]
"#;

const CSI_NODE: &str = r#"
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: node-1
spec:
  drivers:
  - name: hostpath.csi.k8s.io
    nodeID: node-1
    topologyKeys: [topology.hostpath.csi/node]
"#;

const VOLUME_ATTACHMENT: &str = r#"
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: csi-0123
spec:
  attacher: hostpath.csi.k8s.io
  nodeName: node-1
  source:
    persistentVolumeName: pv-1
"#;

fn kubectl(c: &Controller) -> Kubectl {
    c.kubectl().with_binary(Path::new(KUBECTL_1_33))
}

fn get_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut full = vec!["get"];
    full.extend(args);
    full.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&full)).expect("kubectl get -o json prints JSON")
}

/// `kubectl get what` as a table: its headers and its one row (the object named `name`).
fn row(k: &Kubectl, what: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let out = k.ok(&["get", what]);
    let table = Table::parse(&out).expect("kubectl get prints a table");
    let row = table
        .rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"))
        .clone();
    (table.headers, row)
}

/// The row's cells but the last (AGE), which moves.
fn without_age(mut cells: Vec<String>) -> Vec<String> {
    cells.pop();
    cells
}

#[test]
fn install_manifest_kinds_are_stored_printed_and_defaulted_as_upstream() {
    let c = Controller::start();
    let k = kubectl(&c);
    for manifest in [
        INGRESS_CLASS,
        INGRESS,
        NETWORK_POLICY,
        RUNTIME_CLASS,
        CSI_DRIVER,
        CSI_NODE,
        VOLUME_ATTACHMENT,
    ] {
        k.ok_stdin(&["apply", "-f", "-"], manifest);
    }

    let cases: [(&str, &str, &[&str], &[&str]); 7] = [
        (
            "ing",
            "shop",
            &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            &[
                "shop",
                "berth",
                "shop.example.com,*.shop.example.com",
                "",
                "80, 443",
            ],
        ),
        (
            "ingressclass",
            "berth",
            &["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
            &[
                "berth",
                "berth.io/ingress",
                "IngressParameters.k8s.example.com/external-lb",
            ],
        ),
        (
            "netpol",
            "db",
            &["NAME", "POD-SELECTOR", "AGE"],
            &["db", "role=db"],
        ),
        (
            "runtimeclass",
            "gvisor",
            &["NAME", "HANDLER", "AGE"],
            &["gvisor", "runsc"],
        ),
        (
            "csidriver",
            "hostpath.csi.k8s.io",
            &[
                "NAME",
                "ATTACHREQUIRED",
                "PODINFOONMOUNT",
                "STORAGECAPACITY",
                "TOKENREQUESTS",
                "REQUIRESREPUBLISH",
                "MODES",
                "AGE",
            ],
            &[
                "hostpath.csi.k8s.io",
                "false",
                "true",
                "false",
                "<unset>",
                "false",
                "Persistent,Ephemeral",
            ],
        ),
        (
            "csinode",
            "node-1",
            &["NAME", "DRIVERS", "AGE"],
            &["node-1", "1"],
        ),
        (
            "volumeattachment",
            "csi-0123",
            &["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"],
            &["csi-0123", "hostpath.csi.k8s.io", "pv-1", "node-1", "false"],
        ),
    ];
    for (what, name, headers, cells) in cases {
        let (got_headers, got) = row(&k, what, name);
        assert_eq!(got_headers, headers, "kubectl get {what}");
        assert_eq!(without_age(got), cells, "kubectl get {what}");
    }

    // Upstream's defaults.
    let np = get_json(&k, &["netpol", "db"]);
    assert_eq!(
        np["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(np["metadata"]["generation"], 1);
    let class = get_json(&k, &["ingressclass", "berth"]);
    assert_eq!(class["spec"]["parameters"]["scope"], "Cluster");
    let driver = get_json(&k, &["csidriver", "hostpath.csi.k8s.io"]);
    assert_eq!(
        driver["spec"],
        serde_json::json!({"attachRequired": false, "podInfoOnMount": true,
            "storageCapacity": false, "requiresRepublish": false, "seLinuxMount": false,
            "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "volumeLifecycleModes": ["Persistent", "Ephemeral"]})
    );

    // Re-applying an unchanged manifest writes nothing; a patch and a status write land.
    let before = get_json(&k, &["ing", "shop"]);
    let out = k.ok_stdin(&["apply", "-f", "-"], INGRESS);
    assert_eq!(out.trim(), "ingress.networking.k8s.io/shop unchanged");
    k.ok(&[
        "patch",
        "ing",
        "shop",
        "--type=merge",
        "-p",
        r#"{"spec":{"ingressClassName":"other"}}"#,
    ]);
    let patched = get_json(&k, &["ing", "shop"]);
    assert_eq!(patched["metadata"]["generation"], 2, "{before}\n{patched}");
    k.ok(&[
        "patch",
        "ing",
        "shop",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}"#,
    ]);
    let (_, cells) = row(&k, "ing", "shop");
    assert_eq!(cells[3], "192.0.2.10");
    k.ok(&[
        "patch",
        "volumeattachment",
        "csi-0123",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"attached":true}}"#,
    ]);
    let (_, cells) = row(&k, "volumeattachment", "csi-0123");
    assert_eq!(cells[4], "true");

    // Listed across namespaces and by short name; deleted.
    let all = k.ok(&["get", "ing,netpol", "-A"]);
    assert!(all.contains("ingress.networking.k8s.io/shop"), "{all}");
    assert!(all.contains("networkpolicy.networking.k8s.io/db"), "{all}");
    let everything = k.ok(&["get", "all"]);
    assert!(
        !everything.contains("shop"),
        "not in category all:\n{everything}"
    );
    k.ok(&["delete", "netpol", "db"]);
    let gone = k.fails(&["get", "netpol", "db"]);
    assert!(gone.stderr.contains("NotFound") || gone.stderr.contains("not found"));
}

#[test]
fn invalid_objects_are_refused_with_upstreams_messages() {
    let c = Controller::start();
    let k = kubectl(&c);
    let refused = |yaml: &str, expected: &[&str]| {
        let r = k.fails_stdin(&["apply", "-f", "-"], yaml);
        for e in expected {
            assert!(r.stderr.contains(e), "missing {e:?} in:\n{}", r.stderr);
        }
    };
    refused(
        &INGRESS.replace("        pathType: Exact\n", ""),
        &[
            r#"The Ingress "shop" is invalid"#,
            "spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified",
        ],
    );
    refused(
        &INGRESS.replace("path: /api", "path: api"),
        &[r#"spec.rules[0].http.paths[1].path: Invalid value: "api": must be an absolute path"#],
    );
    refused(
        &NETWORK_POLICY.replace("172.17.1.0/24", "10.1.0.0/24"),
        &[
            r#"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`"#,
        ],
    );
    refused(
        &NETWORK_POLICY.replace("port: 32000", "port: 40000"),
        &[
            "spec.egress[0].ports[0].endPort: Invalid value: 32768: must be greater than or equal to `port`",
        ],
    );
    refused(
        &RUNTIME_CLASS.replace("handler: runsc", "handler: Run_SC"),
        &[r#"The RuntimeClass "gvisor" is invalid: handler: Invalid value: "Run_SC""#],
    );
    refused(
        &INGRESS_CLASS.replace("berth.io/ingress", "ingress"),
        &[
            r#"spec.controller: Invalid value: "ingress": must be a domain-prefixed path (such as "acme.io/foo")"#,
        ],
    );

    // Immutable fields, as upstream's update validation has them.
    k.ok_stdin(&["apply", "-f", "-"], CSI_DRIVER);
    refused(
        &CSI_DRIVER.replace("attachRequired: false", "attachRequired: true"),
        &["spec.attachedRequired: Invalid value: true: field is immutable"],
    );
    k.ok_stdin(&["apply", "-f", "-"], VOLUME_ATTACHMENT);
    refused(
        &VOLUME_ATTACHMENT.replace("nodeName: node-1", "nodeName: node-2"),
        &["spec: Invalid value: ", "field is immutable"],
    );
    k.ok_stdin(&["apply", "-f", "-"], RUNTIME_CLASS);
    refused(
        &RUNTIME_CLASS.replace("handler: runsc", "handler: kata"),
        &[r#"handler: Invalid value: "kata": field is immutable"#],
    );
}

#[test]
fn server_side_apply_owns_the_new_kinds_fields() {
    let c = Controller::start();
    let k = kubectl(&c);
    for manifest in [
        INGRESS_CLASS,
        INGRESS,
        NETWORK_POLICY,
        CSI_NODE,
        VOLUME_ATTACHMENT,
    ] {
        k.ok_stdin(&["apply", "--server-side", "-f", "-"], manifest);
    }
    let ing = get_json(&k, &["ing", "shop", "--show-managed-fields"]);
    let managers: Vec<&str> = ing["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kubectl"], "{ing}");
    // Another manager changing an owned field conflicts, as upstream's apply does.
    let other = k.fails_stdin(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        &NETWORK_POLICY.replace("role: db", "role: cache"),
    );
    assert!(other.stderr.contains("conflict"), "{}", other.stderr);
    // CSINode drivers merge by name: a second applier adds its own driver.
    let second = r#"
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: node-1
spec:
  drivers:
  - name: nfs.csi.k8s.io
    nodeID: node-1
"#;
    k.ok_stdin(
        &["apply", "--server-side", "--field-manager=nfs", "-f", "-"],
        second,
    );
    let node = get_json(&k, &["csinode", "node-1"]);
    let names: Vec<&str> = node["spec"]["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(names, ["hostpath.csi.k8s.io", "nfs.csi.k8s.io"], "{node}");
    // Applying the same manifest again by the same manager changes nothing it owns.
    let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], INGRESS);
    assert!(out.contains("serverside-applied"), "{out}");
}

#[test]
fn kubectl_explains_the_new_kinds() {
    let c = Controller::start();
    let k = kubectl(&c);
    let out = k.ok(&["explain", "ingress.spec"]);
    for field in ["defaultBackend", "ingressClassName", "rules", "tls"] {
        assert!(out.contains(field), "missing {field} in:\n{out}");
    }
    assert!(out.contains("GROUP:      networking.k8s.io"), "{out}");
    let out = k.ok(&["explain", "networkpolicy.spec.ingress.from.ipBlock"]);
    assert!(out.contains("cidr") && out.contains("except"), "{out}");
    for (what, field) in [
        ("ingressclass.spec", "controller"),
        ("runtimeclass", "handler"),
        ("csidriver.spec", "attachRequired"),
        ("csinode.spec.drivers", "nodeID"),
        ("volumeattachment.spec.source", "persistentVolumeName"),
    ] {
        let out = k.ok(&["explain", what]);
        assert!(
            out.contains(field),
            "missing {field} in explain {what}:\n{out}"
        );
    }
    let resources = k.ok(&["api-resources", "--api-group=networking.k8s.io"]);
    for line in [
        "ingresses",
        "ing",
        "networkpolicies",
        "netpol",
        "ingressclasses",
    ] {
        assert!(resources.contains(line), "missing {line} in:\n{resources}");
    }
}
