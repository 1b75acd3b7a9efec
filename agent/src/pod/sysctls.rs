//! Pod sysctls (pure): the kubelet's allowlist — upstream's safe set plus the agent's
//! `--allowed-unsafe-sysctls` patterns, each known to be namespaced by the kernel — and its
//! admission check: a pod naming a sysctl outside the list, or a namespaced sysctl of a
//! namespace it shares with the host, is rejected (`SysctlForbidden`).
//!
//! Planner: pure, no I/O.

use std::collections::BTreeMap;
use std::fmt;

use berth_api::k8s_openapi::api::core::v1::Pod;

/// The reason of a pod rejected for its sysctls (upstream's `ForbiddenReason`).
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// The kernel namespace a sysctl belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Net,
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Namespace::Ipc => "ipc",
            Namespace::Net => "net",
        })
    }
}

/// Upstream's safe sysctls and the kernel (major, minor) each appeared in: namespaced and
/// without effect on other pods of the node.
const SAFE: [(&str, (u32, u32)); 12] = [
    ("kernel.shm_rmid_forced", (0, 0)),
    ("net.ipv4.ip_local_port_range", (0, 0)),
    ("net.ipv4.tcp_syncookies", (0, 0)),
    ("net.ipv4.ping_group_range", (0, 0)),
    ("net.ipv4.ip_unprivileged_port_start", (0, 0)),
    ("net.ipv4.ip_local_reserved_ports", (3, 16)),
    ("net.ipv4.tcp_keepalive_time", (4, 5)),
    ("net.ipv4.tcp_fin_timeout", (4, 6)),
    ("net.ipv4.tcp_keepalive_intvl", (4, 5)),
    ("net.ipv4.tcp_keepalive_probes", (4, 5)),
    ("net.ipv4.tcp_rmem", (4, 15)),
    ("net.ipv4.tcp_wmem", (4, 15)),
];

/// The namespace of a sysctl, `None` when it is not known to be namespaced.
pub fn namespaced_by(name: &str) -> Option<Namespace> {
    if name == "kernel.sem" {
        return Some(Namespace::Ipc);
    }
    [
        ("kernel.shm", Namespace::Ipc),
        ("kernel.msg", Namespace::Ipc),
        ("fs.mqueue.", Namespace::Ipc),
        ("net.", Namespace::Net),
    ]
    .into_iter()
    .find(|(prefix, _)| name.starts_with(prefix))
    .map(|(_, ns)| ns)
}

/// `net/ipv4/ip_forward` → `net.ipv4.ip_forward` (a name whose first separator is a slash has
/// its slashes and dots swapped, as upstream's `ConvertSysctlVariableToDotsSeparator`).
pub fn normalize(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// Upstream's sysctl pattern: dot- or slash-separated lower-case segments, an optional `*`
/// at the end, at most 253 characters.
fn valid_pattern(p: &str) -> bool {
    let body = p.strip_suffix('*').unwrap_or(p);
    let segment = |s: &str| {
        let b = s.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
    };
    if p.len() > 253 || body.is_empty() {
        return false;
    }
    // A trailing separator is allowed before the `*` (`net.ipv4.*`).
    let trimmed = if p.ends_with('*') {
        body.strip_suffix(['.', '/']).unwrap_or(body)
    } else {
        body
    };
    trimmed.split(['.', '/']).all(segment)
}

/// The sysctls pods of this node may set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    exact: BTreeMap<String, Namespace>,
    prefixes: BTreeMap<String, Namespace>,
}

impl Allowlist {
    /// The safe set (those the running `kernel` has; all when unknown) plus `unsafe_patterns`
    /// (`--allowed-unsafe-sysctls`: names, or prefixes ending in `*`). A pattern that is
    /// malformed or not known to be namespaced is an error, as it stops the kubelet.
    pub fn new(unsafe_patterns: &[String], kernel: Option<(u32, u32)>) -> Result<Self, String> {
        let mut list = Allowlist::default();
        for (name, min) in SAFE {
            if kernel.is_none_or(|k| k >= min) {
                // Every safe sysctl is namespaced (the table's names are net.* or kernel.shm*).
                let ns = namespaced_by(name).unwrap_or(Namespace::Net);
                list.exact.insert(name.to_string(), ns);
            }
        }
        for p in unsafe_patterns
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
        {
            if !valid_pattern(p) {
                return Err(format!(
                    "sysctl {p:?} must have at most 253 characters and match regex \
                     ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\*)?$"
                ));
            }
            let p = normalize(p);
            match p.strip_suffix('*') {
                Some(prefix) => {
                    let ns = namespaced_by(prefix).ok_or_else(|| {
                        format!("the sysctls {p:?} are not known to be namespaced")
                    })?;
                    list.prefixes.insert(prefix.to_string(), ns);
                }
                None => {
                    let ns = namespaced_by(&p).ok_or_else(|| {
                        format!("the sysctl {p:?} are not known to be namespaced")
                    })?;
                    list.exact.insert(p, ns);
                }
            }
        }
        Ok(list)
    }

    /// Whether a pod with these host namespaces may set `name` (upstream's words otherwise).
    pub fn check(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), String> {
        let name = normalize(name);
        let ns = self.exact.get(&name).copied().or_else(|| {
            self.prefixes
                .iter()
                .find(|(p, _)| name.starts_with(p.as_str()))
                .map(|(_, ns)| *ns)
        });
        match ns {
            None => Err(format!("{name:?} not allowlisted")),
            Some(ns @ Namespace::Ipc) if host_ipc => {
                Err(format!("{name:?} not allowed with host {ns} enabled"))
            }
            Some(ns @ Namespace::Net) if host_net => {
                Err(format!("{name:?} not allowed with host {ns} enabled"))
            }
            Some(_) => Ok(()),
        }
    }

    /// The admission message for `pod`, `None` when every sysctl it names is allowed.
    pub fn admit(&self, pod: &Pod) -> Option<String> {
        let spec = pod.spec.as_ref()?;
        let sysctls = spec.security_context.as_ref()?.sysctls.as_ref()?;
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        sysctls
            .iter()
            .find_map(|s| self.check(&s.name, host_net, host_ipc).err())
            .map(|e| format!("forbidden sysctl: {e}"))
    }
}

/// The pod's sysctls, names normalized to dots, for the OCI spec's `linux.sysctl`.
pub fn of_pod(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|sc| sc.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (normalize(&s.name), s.value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(sysctls: &[(&str, &str)], host_net: bool, host_ipc: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "hostNetwork": host_net,
                "hostIPC": host_ipc,
                "securityContext": {"sysctls": sysctls.iter()
                    .map(|(n, v)| serde_json::json!({"name": n, "value": v}))
                    .collect::<Vec<_>>()},
                "containers": [{"name": "c", "image": "busybox"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_safe_set_is_allowed_and_others_are_not_allowlisted() {
        let list = Allowlist::new(&[], Some((6, 1))).unwrap();
        let cases = [
            ("net.ipv4.ip_unprivileged_port_start", false, false, Ok(())),
            ("kernel.shm_rmid_forced", false, false, Ok(())),
            ("net/ipv4/tcp_syncookies", false, false, Ok(())),
            ("net.ipv4.tcp_rmem", false, false, Ok(())),
            (
                "kernel.msgmax",
                false,
                false,
                Err(r#""kernel.msgmax" not allowlisted"#),
            ),
            (
                "net.core.somaxconn",
                false,
                false,
                Err(r#""net.core.somaxconn" not allowlisted"#),
            ),
            (
                "net.ipv4.ip_local_port_range",
                true,
                false,
                Err(r#""net.ipv4.ip_local_port_range" not allowed with host net enabled"#),
            ),
            (
                "kernel.shm_rmid_forced",
                false,
                true,
                Err(r#""kernel.shm_rmid_forced" not allowed with host ipc enabled"#),
            ),
        ];
        for (name, net, ipc, want) in cases {
            assert_eq!(
                list.check(name, net, ipc),
                want.map_err(String::from),
                "{name}"
            );
        }
    }

    #[test]
    fn unsafe_patterns_extend_the_list_by_name_and_prefix() {
        let list = Allowlist::new(
            &["kernel.msg*".into(), "net.core.somaxconn".into()],
            Some((6, 1)),
        )
        .unwrap();
        assert_eq!(list.check("kernel.msgmax", false, false), Ok(()));
        assert_eq!(list.check("kernel.msgmnb", false, false), Ok(()));
        assert_eq!(list.check("net.core.somaxconn", false, false), Ok(()));
        assert!(list.check("kernel.msgmax", false, true).is_err());
        assert!(list.check("kernel.sem", false, false).is_err());
    }

    #[test]
    fn patterns_that_are_not_namespaced_or_malformed_are_refused() {
        for (p, want) in [
            (
                "vm.swappiness",
                "the sysctl \"vm.swappiness\" are not known to be namespaced",
            ),
            (
                "kernel.*",
                "the sysctls \"kernel.*\" are not known to be namespaced",
            ),
            ("*", "must have at most 253 characters"),
            ("Net.Core", "must have at most 253 characters"),
        ] {
            let err = Allowlist::new(&[p.to_string()], None).unwrap_err();
            assert!(err.contains(want), "{p}: {err}");
        }
    }

    #[test]
    fn an_old_kernel_drops_the_safe_sysctls_it_lacks() {
        let list = Allowlist::new(&[], Some((4, 4))).unwrap();
        assert!(
            list.check("net.ipv4.tcp_keepalive_time", false, false)
                .is_err()
        );
        assert!(
            list.check("net.ipv4.ip_local_reserved_ports", false, false)
                .is_ok()
        );
    }

    #[test]
    fn admission_gives_upstreams_message_for_the_first_forbidden_sysctl() {
        let list = Allowlist::new(&[], None).unwrap();
        assert_eq!(
            list.admit(&pod(
                &[("net.ipv4.ip_unprivileged_port_start", "0")],
                false,
                false
            )),
            None
        );
        assert_eq!(
            list.admit(&pod(
                &[("net.ipv4.tcp_syncookies", "1"), ("kernel.msgmax", "9000")],
                false,
                false
            ))
            .as_deref(),
            Some(r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#)
        );
        assert_eq!(list.admit(&pod(&[], true, true)), None);
    }

    #[test]
    fn the_pods_sysctls_go_to_the_spec_with_dotted_names() {
        let p = pod(&[("net/ipv4/ping_group_range", "0 1")], false, false);
        assert_eq!(
            of_pod(&p),
            [("net.ipv4.ping_group_range".to_string(), "0 1".to_string())].into()
        );
    }
}
