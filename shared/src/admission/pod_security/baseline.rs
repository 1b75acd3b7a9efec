//! The baseline level's checks of the Pod Security Standards on host access and privilege
//! (host namespaces, ports and paths, privileged, capabilities, /proc, Windows host process),
//! with upstream's reasons and details. The security-profile checks are in `profiles`.
//! Planner: pure, no I/O.

use super::checks::{
    Check, Since, Violation, bad_containers, join_quote, offending_values, pluralize, setters,
    volumes_phrase,
};
use super::level::Level;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub(super) const CAPABILITIES: Check = Check {
    id: "capabilities_baseline",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: capabilities,
        overrides: &[],
    }],
};
pub(super) const HOST_NAMESPACES: Check = Check {
    id: "hostNamespaces",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: host_namespaces,
        overrides: &[],
    }],
};
pub(super) const HOST_PATH_VOLUMES: Check = Check {
    id: "hostPathVolumes",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: host_path_volumes,
        overrides: &[],
    }],
};
pub(super) const HOST_PORTS: Check = Check {
    id: "hostPorts",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: host_ports,
        overrides: &[],
    }],
};
pub(super) const PRIVILEGED: Check = Check {
    id: "privileged",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: privileged,
        overrides: &[],
    }],
};
pub(super) const PROC_MOUNT: Check = Check {
    id: "procMount",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: proc_mount,
        overrides: &[],
    }],
};
pub(super) const WINDOWS_HOST_PROCESS: Check = Check {
    id: "windowsHostProcess",
    level: Level::Baseline,
    versions: &[Since {
        since: 0,
        check: windows_host_process,
        overrides: &[],
    }],
};

/// The capabilities a container may add at baseline: the container runtime's default set.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (names, added) = offending_values(spec, |c| {
        let adds = c
            .security_context
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.as_ref());
        adds.into_iter()
            .flatten()
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(&cap.as_str()))
            .cloned()
            .collect()
    });
    Violation::for_containers("non-default capabilities", &names, || {
        format!(
            "must not include {} in securityContext.capabilities.add",
            join_quote(&added)
        )
    })
}

fn host_namespaces(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let set: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(on, _)| *on == Some(true))
    .map(|(_, s)| s)
    .collect();
    (!set.is_empty()).then(|| Violation::new("host namespaces", set.join(", ")))
}

fn host_path_volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let names: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    (!names.is_empty()).then(|| Violation::new("hostPath volumes", volumes_phrase(&names)))
}

fn host_ports(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    // Sorted as strings, as upstream's string set lists them.
    let (names, ports) = offending_values(spec, |c| {
        c.ports
            .iter()
            .filter_map(|p| p.host_port.filter(|hp| *hp != 0))
            .map(|hp| hp.to_string())
            .collect()
    });
    Violation::for_containers("hostPort", &names, || {
        format!(
            "{} {} {}",
            pluralize("uses", "use", names.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

fn privileged(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let names = bad_containers(spec, |c| {
        c.security_context.and_then(|s| s.privileged) == Some(true)
    });
    Violation::for_containers("privileged", &names, || {
        "must not set securityContext.privileged=true".to_string()
    })
}

fn proc_mount(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (names, types) = offending_values(spec, |c| {
        c.security_context
            .and_then(|s| s.proc_mount.as_deref())
            .filter(|t| *t != "Default")
            .map(str::to_string)
            .into_iter()
            .collect()
    });
    Violation::for_containers("procMount", &names, || {
        format!(
            "must not set securityContext.procMount to {}",
            join_quote(&types)
        )
    })
}

fn windows_host_process(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let names = bad_containers(spec, |c| {
        c.security_context
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.host_process)
            == Some(true)
    });
    (pod || !names.is_empty()).then(|| {
        Violation::new(
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                setters(pod, &names)
            ),
        )
    })
}
