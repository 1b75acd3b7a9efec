//! Cluster IPs and node ports for Services: what upstream's IP and port allocators do on a
//! Service create or update, as a pure function of the other Services' holdings. The server
//! gathers those ([`InUse::of`]) and writes the Service while no other allocation runs.
//!
//! A requested address or port is honoured when it is in range and free (422 otherwise, with
//! upstream's messages); a missing one is picked from a pseudo-random start so that Services
//! created together do not probe the same addresses in turn.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::AdmissionError;
use super::field::{FieldError, Path};
use super::service::{EXTERNAL_NAME, HEADLESS, LOAD_BALANCER, NODE_PORT};

/// The address range of cluster IPs and the range of node ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRanges {
    pub base: Ipv4Addr,
    pub prefix: u8,
    pub node_ports: (i32, i32),
}

/// Upstream's (and k3s's) default node port range.
pub const NODE_PORT_RANGE: (i32, i32) = (30000, 32767);

/// k3s's default service CIDR.
pub const DEFAULT_SERVICE_CIDR: &str = "10.43.0.0/16";

impl Default for ServiceRanges {
    /// [`DEFAULT_SERVICE_CIDR`] and [`NODE_PORT_RANGE`].
    fn default() -> Self {
        ServiceRanges {
            base: Ipv4Addr::new(10, 43, 0, 0),
            prefix: 16,
            node_ports: NODE_PORT_RANGE,
        }
    }
}

impl ServiceRanges {
    /// A range from a CIDR (`10.43.0.0/16`); at least 4 addresses (/30), as upstream needs.
    pub fn parse(cidr: &str) -> Option<ServiceRanges> {
        let (ip, prefix) = cidr.split_once('/')?;
        let ip: Ipv4Addr = ip.parse().ok()?;
        let prefix: u8 = prefix.parse().ok().filter(|p| (8..=30).contains(p))?;
        let mask = u32::MAX << (32 - prefix);
        Some(ServiceRanges {
            base: Ipv4Addr::from(u32::from(ip) & mask),
            prefix,
            node_ports: NODE_PORT_RANGE,
        })
    }

    /// The first usable address: the `kubernetes` Service's.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + 1)
    }

    fn size(&self) -> u32 {
        1u32 << (32 - self.prefix)
    }

    /// Whether `ip` is a usable address of the range (not its network or broadcast address).
    fn holds(&self, ip: Ipv4Addr) -> bool {
        let offset = u32::from(ip).wrapping_sub(u32::from(self.base));
        offset >= 1 && offset < self.size() - 1
    }

    fn cidr(&self) -> String {
        format!("{}/{}", self.base, self.prefix)
    }
}

/// The cluster IPs and node ports other Services hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InUse {
    pub ips: BTreeSet<Ipv4Addr>,
    pub node_ports: BTreeSet<i32>,
}

impl InUse {
    /// What `services` hold, leaving out the one with uid `except` (the Service being
    /// updated keeps what it has).
    pub fn of(services: &[Value], except: Option<&str>) -> InUse {
        let mut used = InUse::default();
        for s in services {
            if except.is_some() && s.pointer("/metadata/uid").and_then(Value::as_str) == except {
                continue;
            }
            let ips = s.pointer("/spec/clusterIPs").and_then(Value::as_array);
            for ip in ips.into_iter().flatten().filter_map(Value::as_str) {
                if let Ok(ip) = ip.parse() {
                    used.ips.insert(ip);
                }
            }
            if let Some(n) = s
                .pointer("/spec/healthCheckNodePort")
                .and_then(Value::as_i64)
                .filter(|n| *n > 0)
            {
                used.node_ports.insert(n as i32);
            }
            let ports = s.pointer("/spec/ports").and_then(Value::as_array);
            for p in ports.into_iter().flatten() {
                if let Some(n) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                    used.node_ports.insert(n as i32);
                }
            }
        }
        used
    }
}

/// Gives an admitted Service (`svc`, JSON) its cluster IP and node ports. `seed` picks where
/// the search for a free one starts. On error `svc` may be half-filled: the caller drops it.
pub fn allocate(
    svc: &mut Value,
    ranges: &ServiceRanges,
    in_use: &InUse,
    seed: u64,
) -> Result<(), AdmissionError> {
    let mut errs = Vec::new();
    let kind = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if kind != EXTERNAL_NAME {
        errs.extend(allocate_ip(svc, ranges, in_use, seed));
    }
    if matches!(kind.as_str(), NODE_PORT | LOAD_BALANCER) {
        // `allocateLoadBalancerNodePorts: false`: ports asked for are checked, none picked.
        let pick = kind == NODE_PORT
            || svc.pointer("/spec/allocateLoadBalancerNodePorts") != Some(&json!(false));
        errs.extend(allocate_node_ports(svc, ranges, in_use, seed, pick));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(AdmissionError::Invalid(errs))
    }
}

fn allocate_ip(
    svc: &mut Value,
    ranges: &ServiceRanges,
    in_use: &InUse,
    seed: u64,
) -> Option<FieldError> {
    let requested = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let path = Path::new("spec").child("clusterIPs");
    let ip = match requested.as_str() {
        HEADLESS => return None,
        "" => {
            let size = ranges.size() - 2;
            let start = (seed % u64::from(size)) as u32;
            let found = (0..size)
                .map(|i| Ipv4Addr::from(u32::from(ranges.base) + 1 + (start + i) % size))
                .find(|ip| !in_use.ips.contains(ip));
            match found {
                Some(ip) => ip,
                None => {
                    return Some(FieldError::invalid(
                        &path,
                        json!([]),
                        format!(
                            "failed to allocate IP: range is full ({} addresses in use)",
                            in_use.ips.len()
                        ),
                    ));
                }
            }
        }
        text => {
            let refuse = |why: String| {
                Some(FieldError::invalid(
                    &path,
                    json!([text]),
                    format!("failed to allocate IP {text}: {why}"),
                ))
            };
            let Ok(ip) = text.parse::<Ipv4Addr>() else {
                return None; // validation has said why
            };
            if !ranges.holds(ip) {
                return refuse(format!(
                    "the provided IP ({text}) is not in the valid range. The range of valid IPs is {}",
                    ranges.cidr()
                ));
            }
            if in_use.ips.contains(&ip) {
                return refuse("provided IP is already allocated".to_string());
            }
            ip
        }
    };
    if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("clusterIP".into(), json!(ip.to_string()));
        spec.insert("clusterIPs".into(), json!([ip.to_string()]));
    }
    None
}

fn allocate_node_ports(
    svc: &mut Value,
    ranges: &ServiceRanges,
    in_use: &InUse,
    seed: u64,
    pick: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (lo, hi) = ranges.node_ports;
    let mut taken = in_use.node_ports.clone();
    let size = (hi - lo + 1) as u64;
    let mut next = (seed / 7) % size;
    // A LoadBalancer with `externalTrafficPolicy: Local` gets a health check node port, which
    // the agents serve (upstream's `healthCheckNodePort`).
    let wants_health_check = svc.pointer("/spec/type").and_then(Value::as_str)
        == Some(LOAD_BALANCER)
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local");
    if wants_health_check {
        let path = Path::new("spec").child("healthCheckNodePort");
        match svc
            .pointer("/spec/healthCheckNodePort")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
        {
            Some(n) if !(lo..=hi).contains(&(n as i32)) => errs.push(FieldError::invalid(
                &path,
                n,
                format!(
                    "provided port is not in the valid range. The range of valid ports is {lo}-{hi}"
                ),
            )),
            Some(n) if !taken.insert(n as i32) => errs.push(FieldError::invalid(
                &path,
                n,
                "provided port is already allocated",
            )),
            Some(_) => {}
            None => {
                // Picked after the service ports' own requests would be fairer, but the
                // search starts at a seeded place and skips anything requested below.
                let requested: BTreeSet<i32> = svc
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                    .map(|n| n as i32)
                    .collect();
                let free = (0..size)
                    .map(|i| lo + ((next + i) % size) as i32)
                    .find(|n| !taken.contains(n) && !requested.contains(n));
                match free {
                    Some(n) => {
                        taken.insert(n);
                        next = (n - lo) as u64;
                        if let Some(spec) = svc.pointer_mut("/spec").and_then(Value::as_object_mut)
                        {
                            spec.insert("healthCheckNodePort".into(), json!(n));
                        }
                    }
                    None => errs.push(FieldError::invalid(
                        &path,
                        json!(null),
                        "failed to allocate a node port: range is full",
                    )),
                }
            }
        }
    }
    let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
        return errs;
    };
    // Requested ports first, so a picked one never takes a port asked for later in the list.
    for (i, p) in ports.iter().enumerate() {
        let Some(n) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) else {
            continue;
        };
        let path = Path::new("spec").child("ports").index(i).child("nodePort");
        let n = n as i32;
        if !(lo..=hi).contains(&n) {
            errs.push(FieldError::invalid(
                &path,
                n,
                format!(
                    "provided port is not in the valid range. The range of valid ports is {lo}-{hi}"
                ),
            ));
        } else if !taken.insert(n) {
            errs.push(FieldError::invalid(
                &path,
                n,
                "provided port is already allocated",
            ));
        }
    }
    for p in ports.iter_mut() {
        if !pick
            || p.get("nodePort")
                .and_then(Value::as_i64)
                .is_some_and(|n| n > 0)
        {
            continue;
        }
        let free = (0..size)
            .map(|i| lo + ((next + i) % size) as i32)
            .find(|n| !taken.contains(n));
        match free {
            Some(n) => {
                taken.insert(n);
                next = (n - lo) as u64;
                if let Some(o) = p.as_object_mut() {
                    o.insert("nodePort".into(), json!(n));
                }
            }
            None => errs.push(FieldError::invalid(
                &Path::new("spec").child("ports"),
                json!(null),
                "failed to allocate a node port: range is full",
            )),
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges() -> ServiceRanges {
        ServiceRanges::parse("10.43.0.0/16").unwrap()
    }

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "uid": "u1"}, "spec": spec})
    }

    fn messages(e: AdmissionError) -> Vec<String> {
        match e {
            AdmissionError::Invalid(errs) => errs.iter().map(FieldError::message).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_ranges_are_the_default_cidrs() {
        assert_eq!(
            ServiceRanges::parse(DEFAULT_SERVICE_CIDR),
            Some(ServiceRanges::default())
        );
        assert_eq!(ranges().first().to_string(), "10.43.0.1");
        assert_eq!(ServiceRanges::parse("10.43.0.0/31"), None);
    }

    #[test]
    fn a_service_without_an_ip_gets_a_free_one_in_the_range() {
        let mut used = InUse::default();
        used.ips.insert("10.43.0.6".parse().unwrap());
        let mut s = svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
        // Seed 4 starts the search at .5: .5 is free.
        allocate(&mut s, &ranges(), &used, 4).unwrap();
        assert_eq!(s["spec"]["clusterIP"], "10.43.0.5");
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.43.0.5"]));
        let mut t = svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
        // Seed 5 starts at .6, which is taken: the next one.
        allocate(&mut t, &ranges(), &used, 5).unwrap();
        assert_eq!(t["spec"]["clusterIP"], "10.43.0.7");
    }

    #[test]
    fn a_requested_ip_is_kept_when_free_and_refused_when_taken_or_out_of_range() {
        let mut used = InUse::default();
        used.ips.insert("10.43.0.10".parse().unwrap());
        let mut ok = svc(json!({"clusterIP": "10.43.0.11", "ports": [{"port": 80}]}));
        allocate(&mut ok, &ranges(), &used, 0).unwrap();
        assert_eq!(ok["spec"]["clusterIPs"], json!(["10.43.0.11"]));
        let mut taken = svc(json!({"clusterIP": "10.43.0.10", "ports": [{"port": 80}]}));
        assert_eq!(
            messages(allocate(&mut taken, &ranges(), &used, 0).unwrap_err()),
            vec![
                "spec.clusterIPs: Invalid value: []string{\"10.43.0.10\"}: failed to allocate IP 10.43.0.10: provided IP is already allocated"
            ]
        );
        let mut outside = svc(json!({"clusterIP": "10.0.0.1", "ports": [{"port": 80}]}));
        assert_eq!(
            messages(allocate(&mut outside, &ranges(), &used, 0).unwrap_err()),
            vec![
                "spec.clusterIPs: Invalid value: []string{\"10.0.0.1\"}: failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. The range of valid IPs is 10.43.0.0/16"
            ]
        );
    }

    #[test]
    fn headless_and_external_name_services_get_no_ip() {
        let mut h = svc(json!({"clusterIP": "None"}));
        allocate(&mut h, &ranges(), &InUse::default(), 0).unwrap();
        assert_eq!(h["spec"]["clusterIP"], "None");
        let mut e = svc(json!({"type": "ExternalName", "externalName": "example.com"}));
        allocate(&mut e, &ranges(), &InUse::default(), 0).unwrap();
        assert!(e["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn a_load_balancer_without_node_port_allocation_gets_only_the_ports_it_asks_for() {
        let mut s = svc(
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
            "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]}),
        );
        allocate(&mut s, &ranges(), &InUse::default(), 0).unwrap();
        assert_eq!(s["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(s["spec"]["ports"][1]["nodePort"], 30443);
        let mut s = svc(
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": true,
            "ports": [{"port": 80}]}),
        );
        allocate(&mut s, &ranges(), &InUse::default(), 0).unwrap();
        assert!(s["spec"]["ports"][0]["nodePort"].as_i64().is_some());
    }

    #[test]
    fn a_local_load_balancer_gets_a_health_check_node_port_of_its_own() {
        let mut used = InUse::default();
        used.node_ports.insert(30000);
        let mut s = svc(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80, "nodePort": 30001}]}),
        );
        allocate(&mut s, &ranges(), &used, 0).unwrap();
        let hc = s["spec"]["healthCheckNodePort"].as_i64().unwrap();
        assert!((30002..=32767).contains(&hc), "{hc}");
        assert!(InUse::of(&[s], None).node_ports.contains(&(hc as i32)));
        let mut cluster = svc(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80}]}),
        );
        allocate(&mut cluster, &ranges(), &used, 0).unwrap();
        assert_eq!(cluster["spec"].get("healthCheckNodePort"), None);
        let mut taken = svc(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30000, "ports": [{"port": 80}]}),
        );
        assert_eq!(
            messages(allocate(&mut taken, &ranges(), &used, 0).unwrap_err()),
            vec![
                "spec.healthCheckNodePort: Invalid value: 30000: provided port is already allocated"
            ]
        );
    }

    #[test]
    fn node_ports_are_picked_in_range_and_requested_ones_checked() {
        let mut used = InUse::default();
        used.node_ports.insert(30080);
        let mut s = svc(json!({"type": "NodePort",
            "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]}));
        allocate(&mut s, &ranges(), &used, 0).unwrap();
        let first = s["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!(
            (30000..=32767).contains(&first) && first != 30443,
            "{first}"
        );
        assert_eq!(s["spec"]["ports"][1]["nodePort"], 30443);
        let mut bad = svc(json!({"type": "NodePort",
            "ports": [{"port": 80, "nodePort": 80}, {"port": 81, "nodePort": 30080}]}));
        assert_eq!(
            messages(allocate(&mut bad, &ranges(), &used, 0).unwrap_err()),
            vec![
                "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767",
                "spec.ports[1].nodePort: Invalid value: 30080: provided port is already allocated"
            ]
        );
    }

    #[test]
    fn what_other_services_hold_leaves_out_the_one_being_updated() {
        let others = vec![
            json!({"metadata": {"uid": "a"}, "spec": {"clusterIPs": ["10.43.0.2"],
                "ports": [{"port": 80, "nodePort": 30001}]}}),
            json!({"metadata": {"uid": "b"}, "spec": {"clusterIPs": ["10.43.0.3"]}}),
        ];
        let used = InUse::of(&others, Some("b"));
        assert_eq!(
            used.ips.into_iter().collect::<Vec<_>>(),
            vec!["10.43.0.2".parse::<Ipv4Addr>().unwrap()]
        );
        assert_eq!(used.node_ports.into_iter().collect::<Vec<_>>(), vec![30001]);
    }
}
