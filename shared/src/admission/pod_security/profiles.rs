//! The baseline level's checks of the Pod Security Standards on security profiles (AppArmor,
//! SELinux, seccomp, sysctls), with upstream's reasons and details.
//! Planner: pure, no I/O.

use super::checks::{
    Check, Since, Violation, bad_containers, containers, join_quote, pluralize, quote, setters,
};
use super::level::Level;
use k8s_openapi::api::core::v1::{PodSpec, SELinuxOptions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;

pub(super) const APP_ARMOR: Check = Check {
    id: "appArmorProfile",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: app_armor,
        overrides: &[],
    }],
};
pub(super) const SE_LINUX: Check = Check {
    id: "seLinuxOptions",
    level: Level::Baseline,
    versions: &[
        Since {
            since: 0,
            check: se_linux_1_0,
            overrides: &[],
        },
        Since {
            since: 31,
            check: se_linux_1_31,
            overrides: &[],
        },
    ],
};
pub(super) const SECCOMP: Check = Check {
    id: "seccompProfile_baseline",
    level: Level::Baseline,
    versions: &[
        Since {
            since: 0,
            check: seccomp_annotations,
            overrides: &[],
        },
        Since {
            since: 19,
            check: seccomp_fields,
            overrides: &[],
        },
    ],
};
pub(super) const SYSCTLS: Check = Check {
    id: "sysctls",
    level: Level::Baseline,
    versions: &[
        Since {
            since: 0,
            check: sysctls_1_0,
            overrides: &[],
        },
        Since {
            since: 27,
            check: sysctls_1_27,
            overrides: &[],
        },
        Since {
            since: 29,
            check: sysctls_1_29,
            overrides: &[],
        },
        Since {
            since: 32,
            check: sysctls_1_32,
            overrides: &[],
        },
    ],
};
const APP_ARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut values = BTreeSet::new();
    let pod_type = spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
        .map(|p| p.type_.as_str());
    let pod_bad = pod_type.is_some_and(|t| !allowed(t));
    if let Some(t) = pod_type.filter(|t| !allowed(t)) {
        values.insert(t.to_string());
    }
    let names = bad_containers(spec, |c| {
        let t = c
            .security_context
            .and_then(|s| s.app_armor_profile.as_ref())
            .map(|p| p.type_.as_str());
        match t {
            Some(t) if !allowed(t) => {
                values.insert(t.to_string());
                true
            }
            _ => false,
        }
    });
    let mut annotations: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(APP_ARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    annotations.sort();
    let mut who = vec![];
    let mut all_values: Vec<String> = values.into_iter().collect();
    if !annotations.is_empty() {
        all_values.extend(annotations.iter().cloned());
    }
    let phrase = setters(pod_bad, &names);
    if !phrase.is_empty() {
        who.push(phrase);
    }
    if !annotations.is_empty() {
        who.push(pluralize("annotation", "annotations", annotations.len()).to_string());
    }
    if who.is_empty() {
        return None;
    }
    Some(Violation::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            all_values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            who.join(" and "),
            join_quote(&all_values)
        ),
    ))
}

const SE_LINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SE_LINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux(meta, spec, SE_LINUX_TYPES_1_0)
}

fn se_linux_1_31(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux(meta, spec, SE_LINUX_TYPES_1_31)
}

fn se_linux(_: &ObjectMeta, spec: &PodSpec, allowed: &[&str]) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut valid = |o: &SELinuxOptions| {
        let t = o.type_.as_deref().unwrap_or_default();
        let mut ok = true;
        if !allowed.contains(&t) {
            types.insert(t.to_string());
            ok = false;
        }
        if o.user.as_deref().is_some_and(|u| !u.is_empty()) {
            user = true;
            ok = false;
        }
        if o.role.as_deref().is_some_and(|r| !r.is_empty()) {
            role = true;
            ok = false;
        }
        ok
    };
    let pod_bad = spec
        .security_context
        .as_ref()
        .and_then(|s| s.se_linux_options.as_ref())
        .is_some_and(|o| !valid(o));
    let names = bad_containers(spec, |c| {
        c.security_context
            .and_then(|s| s.se_linux_options.as_ref())
            .is_some_and(|o| !valid(o))
    });
    if !pod_bad && names.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if user {
        data.push("user may not be set".to_string());
    }
    if role {
        data.push("role may not be set".to_string());
    }
    Some(Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters(pod_bad, &names),
            data.join("; ")
        ),
    ))
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Before 1.19 seccomp was set by annotations.
fn seccomp_annotations(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let annotations = meta.annotations.as_ref();
    let valid =
        |v: &str| matches!(v, "runtime/default" | "docker/default") || v.starts_with("localhost/");
    let mut forbidden = BTreeSet::new();
    let mut look = |key: String| {
        if let Some(v) = annotations.and_then(|a| a.get(&key))
            && !valid(v)
        {
            forbidden.insert(format!("{key}={}", quote(v)));
        }
    };
    look(SECCOMP_POD_ANNOTATION.to_string());
    for c in containers(spec) {
        look(format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name));
    }
    (!forbidden.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                pluralize("annotation", "annotations", forbidden.len()),
                forbidden.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

pub(super) fn valid_seccomp(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

/// Explicitly bad seccomp types: whether the pod sets one, the containers that do, the types.
pub(super) fn bad_seccomp(spec: &PodSpec) -> (bool, Vec<&str>, BTreeSet<String>) {
    let mut types = BTreeSet::new();
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| p.type_.as_str())
        .filter(|t| !valid_seccomp(t));
    if let Some(t) = pod {
        types.insert(t.to_string());
    }
    let names = bad_containers(spec, |c| {
        match c
            .security_context
            .and_then(|s| s.seccomp_profile.as_ref())
            .map(|p| p.type_.as_str())
        {
            Some(t) if !valid_seccomp(t) => {
                types.insert(t.to_string());
                true
            }
            _ => false,
        }
    });
    (pod.is_some(), names, types)
}

pub(super) fn seccomp_type_violation(
    pod: bool,
    names: &[&str],
    types: &BTreeSet<String>,
) -> Violation {
    Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters(pod, names),
            join_quote(types)
        ),
    )
}

fn seccomp_fields(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (pod, names, types) = bad_seccomp(spec);
    (pod || !names.is_empty()).then(|| seccomp_type_violation(pod, &names, &types))
}

const SAFE_SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SAFE_SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SAFE_SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

fn sysctls_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[SAFE_SYSCTLS_1_0])
}

fn sysctls_1_27(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[SAFE_SYSCTLS_1_0, SAFE_SYSCTLS_1_27])
}

fn sysctls_1_29(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(
        meta,
        spec,
        &[SAFE_SYSCTLS_1_0, SAFE_SYSCTLS_1_27, SAFE_SYSCTLS_1_29],
    )
}

const SAFE_SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls_1_32(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(
        meta,
        spec,
        &[
            SAFE_SYSCTLS_1_0,
            SAFE_SYSCTLS_1_27,
            SAFE_SYSCTLS_1_29,
            SAFE_SYSCTLS_1_32,
        ],
    )
}

fn sysctls(_: &ObjectMeta, spec: &PodSpec, safe: &[&[&str]]) -> Option<Violation> {
    let forbidden: Vec<&str> = spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|n| !safe.iter().any(|set| set.contains(n)))
        .collect();
    (!forbidden.is_empty()).then(|| Violation::new("forbidden sysctls", forbidden.join(", ")))
}
