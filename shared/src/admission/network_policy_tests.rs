//! Table tests of NetworkPolicy admission through [`crate::admission::admit`]: upstream's
//! defaults and messages for selectors, ports, peers and CIDRs.

use serde_json::{Value, json};

use crate::admission::{AdmissionError, Operation, admit};

fn policy(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"name": "db", "namespace": "default", "uid": "u1"}, "spec": spec})
}

fn messages(mut obj: Value, old: Option<&Value>) -> Vec<String> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    match admit("NetworkPolicy", op, &mut obj, old) {
        Ok(()) => Vec::new(),
        Err(AdmissionError::Invalid(errs)) => errs.iter().map(|e| e.message()).collect(),
        Err(e) => vec![e.to_string()],
    }
}

fn admitted(spec: Value) -> Value {
    let mut np = policy(spec);
    admit("NetworkPolicy", Operation::Create, &mut np, None).expect("admitted");
    np
}

#[test]
fn policy_types_and_protocols_are_defaulted_as_upstream_does() {
    let cases = [
        (json!({}), json!(["Ingress"])),
        (json!({"ingress": [{}]}), json!(["Ingress"])),
        (json!({"egress": [{}]}), json!(["Ingress", "Egress"])),
        (
            json!({"egress": [{}], "policyTypes": ["Egress"]}),
            json!(["Egress"]),
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(
            admitted(spec.clone())["spec"]["policyTypes"],
            want,
            "{spec}"
        );
    }
    let np = admitted(json!({"podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [{"ports": [{"port": 5432}, {"protocol": "UDP", "port": 53}]}],
        "egress": [{"ports": [{"port": "dns"}]}]}));
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(np["spec"]["ingress"][0]["ports"][1]["protocol"], "UDP");
    assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(admitted(json!({}))["spec"]["podSelector"], json!({}));
}

#[test]
fn network_policies_are_judged_as_upstream_judges_them() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "a realistic policy",
            json!({"podSelector": {"matchLabels": {"role": "db"}},
                   "ingress": [{"from": [{"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                                         {"namespaceSelector": {"matchLabels": {"project": "shop"}}, "podSelector": {"matchLabels": {"role": "frontend"}}}],
                                "ports": [{"protocol": "TCP", "port": 6379}]}],
                   "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                               "ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}]}]}),
            vec![],
        ),
        (
            "an unsupported protocol and a port out of range",
            json!({"ingress": [{"ports": [{"protocol": "ICMP", "port": 0}]}]}),
            vec![
                "spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
                "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            ],
        ),
        (
            "an end port below the port",
            json!({"egress": [{"ports": [{"port": 8080, "endPort": 80}]}]}),
            vec![
                "spec.egress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`",
            ],
        ),
        (
            "an end port with a named port",
            json!({"egress": [{"ports": [{"port": "http", "endPort": 90}]}]}),
            vec![
                "spec.egress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` is non-numeric",
            ],
        ),
        (
            "an end port without a port",
            json!({"egress": [{"ports": [{"endPort": 90}]}]}),
            vec![
                "spec.egress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` is not specified",
            ],
        ),
        (
            "an empty peer",
            json!({"ingress": [{"from": [{}]}]}),
            vec!["spec.ingress[0].from[0]: Required value: must specify a peer"],
        ),
        (
            "an ipBlock beside a selector",
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]}),
            vec![
                "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer",
            ],
        ),
        (
            "a bad CIDR",
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
            vec![
                "spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ],
        ),
        (
            "an empty CIDR",
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": ""}}]}]}),
            vec!["spec.ingress[0].from[0].ipBlock.cidr: Required value"],
        ),
        (
            "exceptions outside or equal to the CIDR",
            json!({"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16",
                "except": ["10.1.0.0/24", "10.0.0.0/16", "10.0.3.0/24", "fd00::/64"]}}]}]}),
            vec![
                "spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`",
                "spec.egress[0].to[0].ipBlock.except[1]: Invalid value: \"10.0.0.0/16\": must be a strict subset of `cidr`",
                "spec.egress[0].to[0].ipBlock.except[3]: Invalid value: \"fd00::/64\": must be a strict subset of `cidr`",
            ],
        ),
        (
            "an unknown policy type",
            json!({"policyTypes": ["Ingress", "Sideways"]}),
            vec![
                "spec.policyTypes[1]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
            ],
        ),
        (
            "three policy types",
            json!({"policyTypes": ["Ingress", "Egress", "Ingress"]}),
            vec![
                "spec.policyTypes: Invalid value: []string{\"Ingress\", \"Egress\", \"Ingress\"}: may not specify more than two policyTypes",
            ],
        ),
        (
            "a bad selector value",
            json!({"podSelector": {"matchLabels": {"role": "db!"}}}),
            vec![
                "spec.podSelector.matchLabels: Invalid value: \"db!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(messages(policy(spec), None), want, "{name}");
    }
}

#[test]
fn an_update_may_keep_a_cidr_the_stored_policy_had() {
    let mut stored = policy(json!({"ingress": [{"from": [{"ipBlock": {"cidr": "010.0.0.0/8"}}]}]}));
    stored["metadata"]["resourceVersion"] = json!("3");
    let mut updated = stored.clone();
    updated["spec"]["egress"] = json!([{"to": [{"ipBlock": {"cidr": "010.0.0.0/8"}}]}]);
    assert_eq!(
        messages(updated.clone(), Some(&stored)),
        Vec::<String>::new()
    );
    updated["spec"]["egress"][0]["to"][0]["ipBlock"]["cidr"] = json!("300.0.0.0/8");
    assert_eq!(
        messages(updated, Some(&stored)),
        [
            "spec.egress[0].to[0].ipBlock.cidr: Invalid value: \"300.0.0.0/8\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        ]
    );
}
