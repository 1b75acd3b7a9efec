//! Printers for the service kinds: Service, Endpoints and EndpointSlice (upstream's
//! `printService`, `printEndpoints`, `printEndpointSlice`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{int_at, list_at, opt_int, str_at};
use super::selector::format_labels;
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

/// How many addresses the endpoint columns show before `+ N more...`.
const SHOWN: usize = 3;

pub(crate) fn service_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Type", "string", "The type of service."),
        col("Cluster-IP", "string", "The IP address of the service."),
        col(
            "External-IP",
            "string",
            "External addresses: external IPs and load balancer ingress.",
        ),
        col(
            "Port(s)",
            "string",
            "The ports the service exposes (port[:nodePort]/protocol).",
        ),
        age_col(),
        wide(
            "Selector",
            "string",
            "Route service traffic to pods with label keys and values matching this selector.",
        ),
    ]
}

pub(crate) fn service_cells(svc: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = match str_at(svc, &["spec", "type"]) {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = list_at(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or(Some(str_at(svc, &["spec", "clusterIP"])).filter(|s| !s.is_empty()))
        .unwrap_or("<none>");
    let ports: Vec<String> = list_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let protocol = match str_at(p, &["protocol"]) {
                "" => "TCP",
                pr => pr,
            };
            match opt_int(p, &["nodePort"]).filter(|n| *n > 0) {
                Some(node) => format!("{}:{node}/{protocol}", int_at(p, &["port"])),
                None => format!("{}/{protocol}", int_at(p, &["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        name(svc),
        json!(type_),
        json!(cluster_ip),
        json!(external_ip(svc, type_)),
        json!(ports),
        created(svc, now),
        json!(format_labels(svc.pointer("/spec/selector"))),
    ]
}

/// Upstream `getServiceExternalIP`.
fn external_ip(svc: &Value, type_: &str) -> String {
    let strings = |path: &[&str], field: Option<&str>| -> Vec<String> {
        list_at(svc, path)
            .iter()
            .filter_map(|v| match field {
                None => v.as_str(),
                Some(f) => v.get(f).and_then(Value::as_str),
            })
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let external = strings(&["spec", "externalIPs"], None);
    match type_ {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let path = ["status", "loadBalancer", "ingress"];
            let mut all = strings(&path, Some("ip"));
            all.extend(strings(&path, Some("hostname")));
            all.extend(external);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

pub(crate) fn endpoints_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Endpoints",
            "string",
            "The ready addresses and ports of the service.",
        ),
        age_col(),
    ]
}

pub(crate) fn endpoints_cells(ep: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(ep), json!(format_endpoints(ep)), created(ep, now)]
}

/// Upstream `formatEndpoints`: `ip:port` for each ready address and port, three at most.
fn format_endpoints(ep: &Value) -> String {
    let subsets = list_at(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut shown: Vec<String> = Vec::new();
    let mut count = 0;
    for s in subsets {
        let addresses: Vec<&str> = list_at(s, &["addresses"])
            .iter()
            .map(|a| str_at(a, &["ip"]))
            .collect();
        let ports = list_at(s, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            shown.extend(addresses.iter().map(|a| a.to_string()));
            continue;
        }
        for p in ports {
            count += addresses.len();
            shown.extend(addresses.iter().map(|a| host_port(a, int_at(p, &["port"]))));
        }
    }
    with_more(shown, count, "")
}

fn host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The first three entries joined by `,`, then `+ N more...`; `empty` when there are none.
fn with_more(mut shown: Vec<String>, count: usize, empty: &str) -> String {
    let more = count > SHOWN;
    shown.truncate(SHOWN);
    let text = shown.join(",");
    if more {
        format!("{text} + {} more...", count - SHOWN)
    } else if text.is_empty() {
        empty.to_string()
    } else {
        text
    }
}

pub(crate) fn endpoint_slice_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "AddressType",
            "string",
            "The type of address carried by this EndpointSlice.",
        ),
        col("Ports", "string", "The ports of this EndpointSlice."),
        col(
            "Endpoints",
            "string",
            "The addresses of this EndpointSlice.",
        ),
        age_col(),
    ]
}

pub(crate) fn endpoint_slice_cells(slice: &Value, now: Timestamp) -> Vec<Value> {
    let ports = list_at(slice, &["ports"]);
    let port_names: Vec<String> = ports
        .iter()
        .map(|p| match opt_int(p, &["port"]) {
            Some(n) => n.to_string(),
            None => match str_at(p, &["name"]) {
                "" => "*".to_string(),
                n => n.to_string(),
            },
        })
        .collect();
    let addresses: Vec<String> = list_at(slice, &["endpoints"])
        .iter()
        .flat_map(|e| list_at(e, &["addresses"]))
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let (np, na) = (port_names.len(), addresses.len());
    vec![
        name(slice),
        json!(str_at(slice, &["addressType"])),
        json!(with_more(port_names, np, "<unset>")),
        json!(with_more(addresses, na, "<unset>")),
        created(slice, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    fn meta() -> Value {
        json!({"name": "web", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn services_print_type_ips_ports_and_selector_like_upstream() {
        let svc = json!({"metadata": meta(), "spec": {"type": "NodePort",
            "clusterIP": "10.43.0.10", "clusterIPs": ["10.43.0.10"], "selector": {"app": "web"},
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080},
                      {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(
            service_cells(&svc, now()),
            vec![
                json!("web"),
                json!("NodePort"),
                json!("10.43.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP"),
                json!("10m"),
                json!("app=web")
            ]
        );
        let headless = json!({"metadata": meta(), "spec": {"clusterIP": "None",
            "clusterIPs": ["None"]}});
        let cells = service_cells(&headless, now());
        assert_eq!(
            cells[1..5],
            [
                json!("ClusterIP"),
                json!("None"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert_eq!(cells[6], json!("<none>"));
        let lb = json!({"metadata": meta(), "spec": {"type": "LoadBalancer", "ports": []}});
        assert_eq!(service_cells(&lb, now())[3], json!("<pending>"));
    }

    #[test]
    fn endpoints_show_three_addresses_then_how_many_more() {
        let ep = json!({"metadata": meta(), "subsets": [{
            "addresses": [{"ip": "10.42.0.1"}, {"ip": "10.42.0.2"}, {"ip": "10.42.1.3"},
                          {"ip": "10.42.1.4"}],
            "ports": [{"port": 80}]}]});
        assert_eq!(
            endpoints_cells(&ep, now())[1],
            json!("10.42.0.1:80,10.42.0.2:80,10.42.1.3:80 + 1 more...")
        );
        let none = json!({"metadata": meta()});
        assert_eq!(endpoints_cells(&none, now())[1], json!("<none>"));
    }

    #[test]
    fn endpoint_slices_show_address_type_ports_and_addresses() {
        let slice = json!({"metadata": meta(), "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}],
            "endpoints": [{"addresses": ["10.42.0.1"]}, {"addresses": ["10.42.0.2"]}]});
        assert_eq!(
            endpoint_slice_cells(&slice, now())[1..4],
            [json!("IPv4"), json!("80"), json!("10.42.0.1,10.42.0.2")]
        );
        let empty = json!({"metadata": meta(), "addressType": "IPv4"});
        assert_eq!(
            endpoint_slice_cells(&empty, now())[2..4],
            [json!("<unset>"), json!("<unset>")]
        );
    }
}
