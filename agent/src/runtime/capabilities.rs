//! The capability set of a container process (pure): Docker's default set, or every
//! capability the agent holds (its bounding set, as containerd's CRI grants) when privileged,
//! then the securityContext's add/drop lists in containerd's order (add ALL, drop ALL,
//! individual adds, individual drops).
//!
//! Planner: pure, no I/O.

use std::collections::HashSet;

use oci_spec::runtime::{Capabilities, Capability};

use super::{ContainerConfig, RuntimeError};

/// Docker's default capability set, which containerd's CRI plugin also uses.
pub(super) const DEFAULT_CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
];

/// Every capability the kernel knows (up to CAP_CHECKPOINT_RESTORE).
const ALL_CAPABILITIES: [Capability; 41] = [
    Capability::AuditControl,
    Capability::AuditRead,
    Capability::AuditWrite,
    Capability::BlockSuspend,
    Capability::Bpf,
    Capability::CheckpointRestore,
    Capability::Chown,
    Capability::DacOverride,
    Capability::DacReadSearch,
    Capability::Fowner,
    Capability::Fsetid,
    Capability::IpcLock,
    Capability::IpcOwner,
    Capability::Kill,
    Capability::Lease,
    Capability::LinuxImmutable,
    Capability::MacAdmin,
    Capability::MacOverride,
    Capability::Mknod,
    Capability::NetAdmin,
    Capability::NetBindService,
    Capability::NetBroadcast,
    Capability::NetRaw,
    Capability::Perfmon,
    Capability::Setgid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::Setuid,
    Capability::SysAdmin,
    Capability::SysBoot,
    Capability::SysChroot,
    Capability::SysModule,
    Capability::SysNice,
    Capability::SysPacct,
    Capability::SysPtrace,
    Capability::SysRawio,
    Capability::SysResource,
    Capability::SysTime,
    Capability::SysTtyConfig,
    Capability::Syslog,
    Capability::WakeAlarm,
];

fn parse_capability(name: &str) -> Result<Capability, RuntimeError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| RuntimeError::InvalidConfig(format!("unknown capability {name:?}")))
}

/// Every capability the kernel knows.
pub fn all() -> HashSet<Capability> {
    ALL_CAPABILITIES.into_iter().collect()
}

/// The capability set: defaults (or, when privileged, every capability in `held`: the agent's
/// bounding set), then add ALL (likewise `held`), drop ALL, individual adds, individual drops,
/// in containerd's order.
pub fn capabilities(
    config: &ContainerConfig,
    held: &HashSet<Capability>,
) -> Result<Capabilities, RuntimeError> {
    let sec = &config.security;
    let is_all = |s: &String| s.eq_ignore_ascii_case("ALL");
    let everything = || -> HashSet<Capability> {
        ALL_CAPABILITIES
            .into_iter()
            .filter(|c| held.contains(c))
            .collect()
    };
    let mut caps: HashSet<Capability> = if sec.privileged {
        everything()
    } else {
        DEFAULT_CAPABILITIES.into_iter().collect()
    };
    if sec.add_capabilities.iter().any(is_all) {
        caps = everything();
    }
    if sec.drop_capabilities.iter().any(is_all) {
        caps.clear();
    }
    for name in sec.add_capabilities.iter().filter(|s| !is_all(s)) {
        caps.insert(parse_capability(name)?);
    }
    for name in sec.drop_capabilities.iter().filter(|s| !is_all(s)) {
        caps.remove(&parse_capability(name)?);
    }
    Ok(caps)
}
