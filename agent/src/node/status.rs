//! The Node object this agent registers and the status it reports, computed from host facts
//! (pure). Conditions use the kubelet's types, reasons and messages.
//!
//! Planner: pure, no I/O.

use super::pressure::Pressures;
use berth_api::k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use berth_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;

/// What the agent knows about its host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    pub node_name: String,
    pub hostname: String,
    pub internal_ip: Option<String>,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub max_pods: u32,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub boot_id: String,
    pub architecture: String,
    pub container_runtime_version: String,
    pub agent_version: String,
    pub listen_port: i32,
    /// What `allocatable` holds back from capacity (reservations, hard eviction thresholds).
    pub reservation: super::allocatable::Reservation,
}

/// The capacity the status reports, in the units allocatable is computed in (memory and disk
/// in whole KiB, as reported).
pub fn capacity(facts: &HostFacts) -> super::allocatable::Amounts {
    super::allocatable::Amounts {
        milli_cpu: i64::from(facts.cpus) * 1000,
        memory: (facts.memory_bytes / 1024 * 1024) as i64,
        ephemeral_storage: (facts.ephemeral_storage_bytes / 1024 * 1024) as i64,
        pods: i64::from(facts.max_pods),
    }
}

/// Labels every node carries, plus the operator's.
pub fn labels(facts: &HostFacts, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert(
        "kubernetes.io/hostname".to_string(),
        facts.node_name.clone(),
    );
    l.insert("kubernetes.io/os".to_string(), "linux".to_string());
    l.insert("kubernetes.io/arch".to_string(), facts.architecture.clone());
    l.insert("beta.kubernetes.io/os".to_string(), "linux".to_string());
    l.insert(
        "beta.kubernetes.io/arch".to_string(),
        facts.architecture.clone(),
    );
    l.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    l
}

fn condition(
    t: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
    previous: Option<&NodeStatus>,
) -> NodeCondition {
    let status = if status { "True" } else { "False" };
    // The transition time only moves when the status does.
    let last_transition = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == t))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    NodeCondition {
        type_: t.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(last_transition),
    }
}

/// A pressure condition with the kubelet's reasons and messages.
fn pressure(
    t: &str,
    on: bool,
    (reason_on, message_on): (&str, &str),
    (reason_off, message_off): (&str, &str),
    now: &Time,
    previous: Option<&NodeStatus>,
) -> NodeCondition {
    let (reason, message) = if on {
        (reason_on, message_on)
    } else {
        (reason_off, message_off)
    };
    condition(t, on, reason, message, now, previous)
}

/// The node's status. `previous` keeps condition transition times stable.
pub fn node_status(
    facts: &HostFacts,
    ready: bool,
    pressures: Pressures,
    now: jiff::Timestamp,
    previous: Option<&NodeStatus>,
) -> NodeStatus {
    let now = Time(now);
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity(facts.cpus.to_string()));
    capacity.insert(
        "memory".to_string(),
        Quantity(format!("{}Ki", facts.memory_bytes / 1024)),
    );
    capacity.insert("pods".to_string(), Quantity(facts.max_pods.to_string()));
    capacity.insert(
        "ephemeral-storage".to_string(),
        Quantity(format!("{}Ki", facts.ephemeral_storage_bytes / 1024)),
    );
    let mut addresses = Vec::new();
    if let Some(ip) = &facts.internal_ip {
        addresses.push(NodeAddress {
            type_: "InternalIP".to_string(),
            address: ip.clone(),
        });
    }
    addresses.push(NodeAddress {
        type_: "Hostname".to_string(),
        address: facts.hostname.clone(),
    });
    let ready_cond = if ready {
        condition(
            "Ready",
            true,
            "KubeletReady",
            "kubelet is posting ready status",
            &now,
            previous,
        )
    } else {
        condition(
            "Ready",
            false,
            "KubeletNotReady",
            "container runtime is down",
            &now,
            previous,
        )
    };
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(super::allocatable::resource_list(
            super::allocatable::allocatable(self::capacity(facts), &facts.reservation),
        )),
        addresses: Some(addresses),
        conditions: Some(vec![
            pressure(
                "MemoryPressure",
                pressures.memory,
                (
                    "KubeletHasInsufficientMemory",
                    "kubelet has insufficient memory available",
                ),
                (
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                &now,
                previous,
            ),
            pressure(
                "DiskPressure",
                pressures.disk,
                ("KubeletHasDiskPressure", "kubelet has disk pressure"),
                ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                &now,
                previous,
            ),
            pressure(
                "PIDPressure",
                pressures.pid,
                (
                    "KubeletHasInsufficientPID",
                    "kubelet has insufficient PID available",
                ),
                (
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                &now,
                previous,
            ),
            ready_cond,
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: facts.listen_port,
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: facts.architecture.clone(),
            boot_id: facts.boot_id.clone(),
            container_runtime_version: facts.container_runtime_version.clone(),
            kernel_version: facts.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: facts.agent_version.clone(),
            machine_id: facts.machine_id.clone(),
            operating_system: "linux".to_string(),
            os_image: facts.os_image.clone(),
            system_uuid: facts.machine_id.clone(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// Whether the status the API holds differs from `wanted` in anything but heartbeat and
/// transition times: a condition's status, reason or message (a controller's Unknown
/// included), the addresses, capacity or allocatable. The kubelet posts at once then, and
/// otherwise only every status report period.
pub fn differs(api: Option<&NodeStatus>, wanted: &NodeStatus) -> bool {
    let Some(api) = api else {
        return true;
    };
    let key = |s: &NodeStatus| {
        let mut c: Vec<(String, String, Option<String>, Option<String>)> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect();
        c.sort();
        c
    };
    key(api) != key(wanted)
        || api.addresses != wanted.addresses
        || api.capacity != wanted.capacity
        || api.allocatable != wanted.allocatable
}

/// The annotations the agent publishes on its Node: where the local-path provisioner makes
/// this node's volumes.
pub fn annotations(local_path_dir: &std::path::Path) -> BTreeMap<String, String> {
    BTreeMap::from([(
        berth_api::local_path::LOCAL_PATH_DIR_ANNOTATION.to_string(),
        local_path_dir.display().to_string(),
    )])
}

/// The Node to register.
pub fn node(
    facts: &HostFacts,
    extra_labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    taints: &[Taint],
    now: jiff::Timestamp,
) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(facts.node_name.clone()),
            labels: Some(labels(facts, extra_labels)),
            annotations: (!annotations.is_empty()).then(|| annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: if taints.is_empty() {
                None
            } else {
                Some(taints.to_vec())
            },
            ..NodeSpec::default()
        }),
        status: Some(node_status(facts, true, Pressures::default(), now, None)),
    }
}

/// Parses `--register-with-taints` (`key=value:Effect,key:Effect`).
pub fn parse_taints(s: &str) -> Result<Vec<Taint>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (kv, effect) = t
                .rsplit_once(':')
                .ok_or_else(|| format!("taint {t:?} has no effect"))?;
            if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(format!(
                    "taint {t:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute"
                ));
            }
            let (key, value) = match kv.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (kv, None),
            };
            if key.is_empty() {
                return Err(format!("taint {t:?} has no key"));
            }
            Ok(Taint {
                key: key.to_string(),
                value,
                effect: effect.to_string(),
                time_added: None,
            })
        })
        .collect()
}

/// Parses `--node-labels` (`k=v,k2=v2`).
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("label {l:?} is not key=value"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            node_name: "n1".into(),
            hostname: "host".into(),
            internal_ip: Some("192.0.2.1".into()),
            cpus: 2,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            max_pods: 110,
            architecture: "amd64".into(),
            container_runtime_version: "containerd://1.6.20".into(),
            ..HostFacts::default()
        }
    }

    #[test]
    fn the_node_carries_standard_and_operator_labels_taints_and_its_local_path_dir() {
        let extra = parse_labels("zone=a,disk=ssd").unwrap();
        let taints = parse_taints("dedicated=gpu:NoSchedule,spot:PreferNoSchedule").unwrap();
        let notes = annotations(std::path::Path::new("/srv/berth/storage"));
        let n = node(
            &facts(),
            &extra,
            &notes,
            &taints,
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            n.metadata.annotations.unwrap()["storage.berth.io/local-path-dir"],
            "/srv/berth/storage"
        );
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["zone"], "a");
        let taints = n.spec.unwrap().taints.unwrap();
        assert_eq!(taints[0].value.as_deref(), Some("gpu"));
        assert_eq!(taints[1].value, None);
    }

    #[test]
    fn capacity_and_conditions_are_reported_like_the_kubelet() {
        let s = node_status(
            &facts(),
            true,
            Pressures::default(),
            jiff::Timestamp::UNIX_EPOCH,
            None,
        );
        let cap = s.capacity.unwrap();
        assert_eq!(cap["memory"].0, "2097152Ki");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(
            s.allocatable.unwrap()["memory"].0,
            "2097152Ki",
            "nothing reserved"
        );
        let conds = s.conditions.unwrap();
        let ready = conds.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
    }

    #[test]
    fn allocatable_is_capacity_less_what_is_reserved() {
        let mut f = facts();
        f.ephemeral_storage_bytes = 10 << 30;
        f.reservation = crate::node::allocatable::Reservation::new(
            crate::node::allocatable::Reserved::parse("cpu=500m,memory=1Gi").unwrap(),
            crate::node::allocatable::Reserved::default(),
            &crate::node::pressure::Thresholds::parse(
                "memory.available<100Mi,nodefs.available<10%",
            )
            .unwrap(),
            f.memory_bytes,
            f.ephemeral_storage_bytes,
        );
        let s = node_status(
            &f,
            true,
            Pressures::default(),
            jiff::Timestamp::UNIX_EPOCH,
            None,
        );
        let a = s.allocatable.unwrap();
        let got: Vec<(&str, &str)> = a.iter().map(|(k, v)| (k.as_str(), v.0.as_str())).collect();
        assert_eq!(
            got,
            [
                ("cpu", "1500m"),
                ("ephemeral-storage", "9437184Ki"),
                ("memory", "946176Ki"),
                ("pods", "110")
            ]
        );
        assert_eq!(s.capacity.unwrap()["cpu"].0, "2");
    }

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(secs)
    }

    /// The status of a ready node without pressure, at `now`, after `previous`.
    fn ready_at(now: jiff::Timestamp, previous: Option<&NodeStatus>) -> NodeStatus {
        node_status(&facts(), true, Pressures::default(), now, previous)
    }

    #[test]
    fn transition_times_stay_while_the_status_holds() {
        let (t0, t1) = (at(0), at(60));
        let first = ready_at(t0, None);
        let second = ready_at(t1, Some(&first));
        let ready = |s: &NodeStatus| {
            s.conditions
                .clone()
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .unwrap()
        };
        assert_eq!(ready(&second).last_transition_time, Some(Time(t0)));
        assert_eq!(ready(&second).last_heartbeat_time, Some(Time(t1)));
        let third = node_status(&facts(), false, Pressures::default(), t1, Some(&second));
        assert_eq!(ready(&third).last_transition_time, Some(Time(t1)));
    }

    #[test]
    fn a_status_differs_when_a_condition_does_but_not_for_its_times() {
        let t1 = at(10);
        let posted = ready_at(at(0), None);
        let same = ready_at(t1, Some(&posted));
        assert!(!differs(Some(&posted), &same), "only the heartbeat moved");
        let pressured = Pressures {
            disk: true,
            ..Pressures::default()
        };
        let disk = node_status(&facts(), true, pressured, t1, Some(&posted));
        assert!(differs(Some(&posted), &disk));
        let mut unknown = posted.clone();
        for c in unknown.conditions.iter_mut().flatten() {
            c.status = "Unknown".into();
            c.reason = Some("NodeStatusUnknown".into());
        }
        assert!(
            differs(Some(&unknown), &same),
            "a controller marked it Unknown"
        );
        assert!(differs(None, &same));
    }

    #[test]
    fn pressure_conditions_use_the_kubelets_words() {
        let on = Pressures {
            memory: true,
            disk: true,
            pid: true,
        };
        let s = node_status(&facts(), true, on, jiff::Timestamp::UNIX_EPOCH, None);
        let got: Vec<(String, String, String)> = s
            .conditions
            .unwrap()
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
            .collect();
        let want = [
            ("MemoryPressure", "True", "KubeletHasInsufficientMemory"),
            ("DiskPressure", "True", "KubeletHasDiskPressure"),
            ("PIDPressure", "True", "KubeletHasInsufficientPID"),
            ("Ready", "True", "KubeletReady"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn malformed_flags_are_refused() {
        assert!(parse_taints("a=b").is_err());
        assert!(parse_taints("a=b:Sometimes").is_err());
        assert!(parse_labels("novalue").is_err());
    }
}
