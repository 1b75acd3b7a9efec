//! Printers for the networking.k8s.io kinds: Ingress, IngressClass and NetworkPolicy (upstream's
//! `printIngress`, `printIngressClass`, `printNetworkPolicy`).

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{list_at, opt_str, str_at};
use super::selector::format_label_selector;
use super::{ColumnDefinition, age_col, col, created, name, name_col};

/// How many hosts the Hosts column shows before `+ N more...`.
const SHOWN_HOSTS: usize = 3;

pub(crate) fn ingress_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Class",
            "string",
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        age_col(),
    ]
}

pub(crate) fn ingress_cells(ing: &Value, now: Timestamp) -> Vec<Value> {
    let class = opt_str(ing, &["spec", "ingressClassName"]).unwrap_or("<none>");
    let ports = if list_at(ing, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(ing),
        json!(class),
        json!(hosts(list_at(ing, &["spec", "rules"]))),
        json!(address(ing)),
        json!(ports),
        created(ing, now),
    ]
}

/// Upstream `formatHosts`: the first three rule hosts, `*` when no rule names one. Its count of
/// the rest is of rules, not hosts, past the third.
fn hosts(rules: &[Value]) -> String {
    let mut shown: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if shown.len() == SHOWN_HOSTS {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            shown.push(host);
        }
    }
    if shown.is_empty() {
        return "*".to_string();
    }
    let joined = shown.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - SHOWN_HOSTS)
    } else {
        joined
    }
}

/// The load balancer's addresses (an IP, else a host name each), sorted and deduplicated. The
/// server prints wide, so the address is never clipped.
fn address(ing: &Value) -> String {
    let entries = list_at(ing, &["status", "loadBalancer", "ingress"]);
    let set: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| {
            opt_str(e, &["ip"])
                .filter(|ip| !ip.is_empty())
                .or_else(|| opt_str(e, &["hostname"]).filter(|h| !h.is_empty()))
        })
        .collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

pub(crate) fn ingress_class_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Controller",
            "string",
            "Controller that is responsible for handling this class",
        ),
        col(
            "Parameters",
            "string",
            "A reference to a resource with additional parameters",
        ),
        age_col(),
    ]
}

pub(crate) fn ingress_class_cells(class: &Value, now: Timestamp) -> Vec<Value> {
    let parameters = match class.pointer("/spec/parameters") {
        Some(p) if p.is_object() => {
            let mut s = str_at(p, &["kind"]).to_string();
            if let Some(group) = opt_str(p, &["apiGroup"]) {
                s = format!("{s}.{group}");
            }
            format!("{s}/{}", str_at(p, &["name"]))
        }
        _ => "<none>".to_string(),
    };
    vec![
        name(class),
        json!(str_at(class, &["spec", "controller"])),
        json!(parameters),
        created(class, now),
    ]
}

pub(crate) fn network_policy_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Pod-Selector",
            "string",
            "Selects the pods to which this NetworkPolicy object applies.",
        ),
        age_col(),
    ]
}

pub(crate) fn network_policy_cells(np: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(np),
        json!(format_label_selector(np.pointer("/spec/podSelector"))),
        created(np, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2024-05-01T11:59:00Z"})
    }

    #[test]
    fn ingresses_print_class_hosts_address_and_ports() {
        let now = fixture::now();
        let cases = [
            (
                json!({"metadata": meta("web"), "spec": {"ingressClassName": "berth",
                    "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}],
                    "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}]},
                    "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.2"}]}}}),
                [
                    "web",
                    "berth",
                    "a.example.com,b.example.com",
                    "10.0.0.2,lb.example.com",
                    "80, 443",
                    "60s",
                ],
            ),
            (
                json!({"metadata": meta("catch-all"), "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}),
                ["catch-all", "<none>", "*", "", "80", "60s"],
            ),
            (
                json!({"metadata": meta("many"), "spec": {"rules": [
                    {"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}, {"host": "e"}]}}),
                ["many", "<none>", "a,b,c + 2 more...", "", "80", "60s"],
            ),
        ];
        for (ing, want) in cases {
            let want: Vec<Value> = want.iter().map(|w| json!(w)).collect();
            assert_eq!(ingress_cells(&ing, now), want, "{ing}");
        }
        assert_eq!(ingress_columns().len(), 6);
    }

    #[test]
    fn ingress_classes_print_their_controller_and_parameters() {
        let now = fixture::now();
        let with = json!({"metadata": meta("nginx"), "spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb", "scope": "Cluster"}}});
        assert_eq!(
            ingress_class_cells(&with, now),
            [
                json!("nginx"),
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/external-lb"),
                json!("60s")
            ]
        );
        let without = json!({"metadata": meta("plain"), "spec": {"controller": "example.com/x"}});
        assert_eq!(ingress_class_cells(&without, now)[2], json!("<none>"));
        assert_eq!(ingress_class_columns().len(), 4);
    }

    #[test]
    fn network_policies_print_their_pod_selector() {
        let now = fixture::now();
        let np = json!({"metadata": meta("db"), "spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
        assert_eq!(
            network_policy_cells(&np, now),
            [json!("db"), json!("role=db"), json!("60s")]
        );
        let all = json!({"metadata": meta("deny"), "spec": {"podSelector": {}}});
        assert_eq!(network_policy_cells(&all, now)[1], json!("<none>"));
        assert_eq!(network_policy_columns().len(), 3);
    }
}
