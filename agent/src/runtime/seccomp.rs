//! A container's seccomp filter (pure): the Docker/containerd JSON profile format (the format of
//! `RuntimeDefault`, which is kept as data in `seccomp_default.json`, and of `Localhost`
//! profiles), made concrete for this machine's architecture and the container's capabilities
//! into the OCI spec's `linux.seccomp`, as containerd's `LoadProfile`/`DefaultProfile` do.
//!
//! Planner: pure, no I/O.
//!
//! A rule's `includes`/`excludes` conditions are evaluated against the container's bounding set
//! (`caps`: every listed capability held) and the Go name of the architecture (`amd64`,
//! `arm64`); `archMap` picks the native architecture and its sub-architectures. A
//! `minKernel` condition is resolved when a Localhost profile is loaded (the loader knows the
//! host's kernel, see [`Profile::drop_rules_above_kernel`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompBuilder,
    LinuxSeccompFilterFlag, LinuxSyscallBuilder,
};
use serde::Deserialize;

use super::RuntimeError;

/// The seccomp profile a container runs under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Seccomp {
    /// No filter.
    #[default]
    Unconfined,
    /// The runtime's default profile ([`default_profile`]).
    RuntimeDefault,
    /// A profile file on the node, not yet read (the pod worker loads it before creating the
    /// container; the spec cannot be built from an unread file).
    Localhost(PathBuf),
    /// A profile read from the node (a `Localhost` profile, loaded).
    Profile(Box<Profile>),
}

/// A seccomp profile in the Docker/containerd JSON format (a superset of the OCI spec's
/// `linux.seccomp`: `archMap`, `name`, `includes` and `excludes` are Docker's).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    default_action: LinuxSeccompAction,
    #[serde(default)]
    default_errno_ret: Option<u32>,
    #[serde(default)]
    architectures: Vec<Arch>,
    #[serde(default)]
    arch_map: Vec<ArchMap>,
    #[serde(default)]
    flags: Vec<LinuxSeccompFilterFlag>,
    #[serde(default)]
    syscalls: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ArchMap {
    architecture: Arch,
    #[serde(default)]
    sub_architectures: Vec<Arch>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    name: String,
    #[serde(default)]
    names: Vec<String>,
    action: LinuxSeccompAction,
    #[serde(default)]
    errno_ret: Option<u32>,
    #[serde(default)]
    args: Vec<LinuxSeccompArg>,
    #[serde(default)]
    includes: Condition,
    #[serde(default)]
    excludes: Condition,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(default)]
    caps: Vec<String>,
    #[serde(default)]
    arches: Vec<String>,
    #[serde(default)]
    min_kernel: Option<String>,
}

/// Why a profile cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("decoding seccomp profile failed: {0}")]
    Decode(String),
    #[error(
        "'architectures' and 'archMap' were specified in the seccomp profile, use either 'architectures' or 'archMap'"
    )]
    ArchitecturesAndArchMap,
    #[error(
        "'name' and 'names' were specified in the seccomp profile, use either 'name' or 'names'"
    )]
    NameAndNames,
}

/// The Go name of this machine's architecture, as profiles' `arches` conditions spell it.
pub fn native_arch() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "amd64"
    } else if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        std::env::consts::ARCH
    }
}

fn native_scmp_arch(arch: &str) -> Option<Arch> {
    match arch {
        "amd64" => Some(Arch::ScmpArchX86_64),
        "arm64" => Some(Arch::ScmpArchAarch64),
        _ => None,
    }
}

impl Profile {
    /// Parses a profile and checks what containerd checks before using one.
    pub fn parse(json: &str) -> Result<Profile, ProfileError> {
        let p: Profile =
            serde_json::from_str(json).map_err(|e| ProfileError::Decode(e.to_string()))?;
        if !p.architectures.is_empty() && !p.arch_map.is_empty() {
            return Err(ProfileError::ArchitecturesAndArchMap);
        }
        if p.syscalls
            .iter()
            .any(|r| !r.name.is_empty() && !r.names.is_empty())
        {
            return Err(ProfileError::NameAndNames);
        }
        Ok(p)
    }

    /// Drops the rules whose `includes.minKernel` is above `kernel` (major, minor); a rule with
    /// a `minKernel` that does not parse is dropped too (it cannot be shown to be safe).
    pub fn drop_rules_above_kernel(&mut self, kernel: (u32, u32)) {
        self.syscalls
            .retain(|r| match r.includes.min_kernel.as_deref() {
                None => true,
                Some(min) => parse_kernel(min).is_some_and(|min| kernel >= min),
            });
    }

    /// The OCI filter for a container with bounding set `caps` on architecture `arch` (a Go
    /// name, see [`native_arch`]).
    pub fn to_oci(
        &self,
        caps: &HashSet<Capability>,
        arch: &str,
    ) -> Result<LinuxSeccomp, RuntimeError> {
        let cap_names: HashSet<String> = caps.iter().filter_map(capability_name).collect();
        let mut architectures = self.architectures.clone();
        if let Some(native) = native_scmp_arch(arch)
            && let Some(m) = self.arch_map.iter().find(|m| m.architecture == native)
        {
            architectures.push(m.architecture);
            architectures.extend(m.sub_architectures.iter().copied());
        }
        let mut syscalls = Vec::with_capacity(self.syscalls.len());
        for rule in &self.syscalls {
            if !rule.applies(&cap_names, arch) {
                continue;
            }
            let names = if rule.name.is_empty() {
                rule.names.clone()
            } else {
                vec![rule.name.clone()]
            };
            let mut b = LinuxSyscallBuilder::default()
                .names(names)
                .action(rule.action)
                .args(rule.args.clone());
            if let Some(errno) = rule.errno_ret {
                b = b.errno_ret(errno);
            }
            syscalls.push(b.build().map_err(spec_error)?);
        }
        let mut b = LinuxSeccompBuilder::default()
            .default_action(self.default_action)
            .architectures(architectures)
            .syscalls(syscalls);
        if let Some(errno) = self.default_errno_ret {
            b = b.default_errno_ret(errno);
        }
        if !self.flags.is_empty() {
            b = b.flags(self.flags.clone());
        }
        b.build().map_err(spec_error)
    }
}

impl Rule {
    /// Docker's conditions: excluded when the architecture or any listed capability matches;
    /// included only on a listed architecture and with every listed capability.
    fn applies(&self, caps: &HashSet<String>, arch: &str) -> bool {
        let ex = &self.excludes;
        if ex.arches.iter().any(|a| a == arch) || ex.caps.iter().any(|c| caps.contains(c)) {
            return false;
        }
        let inc = &self.includes;
        if !inc.arches.is_empty() && !inc.arches.iter().any(|a| a == arch) {
            return false;
        }
        inc.caps.iter().all(|c| caps.contains(c))
    }
}

fn capability_name(c: &Capability) -> Option<String> {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
}

/// `"4.8"` or `"5.10.2"` → (major, minor).
pub fn parse_kernel(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.trim().split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map(|m| m.parse().ok()).unwrap_or(Some(0))?;
    Some((major, minor))
}

fn spec_error(e: oci_spec::OciSpecError) -> RuntimeError {
    RuntimeError::InvalidConfig(format!("building the seccomp filter: {e}"))
}

/// The `RuntimeDefault` profile: containerd's default, kept as data.
pub fn default_profile() -> Result<&'static Profile, RuntimeError> {
    static DEFAULT: OnceLock<Result<Profile, ProfileError>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| Profile::parse(include_str!("seccomp_default.json")))
        .as_ref()
        .map_err(|e| RuntimeError::InvalidConfig(format!("the built-in seccomp profile: {e}")))
}

/// The container's `linux.seccomp`: `None` when unconfined. `caps` is its bounding set.
pub fn linux_seccomp(
    seccomp: &Seccomp,
    caps: &HashSet<Capability>,
) -> Result<Option<LinuxSeccomp>, RuntimeError> {
    let profile = match seccomp {
        Seccomp::Unconfined => return Ok(None),
        Seccomp::RuntimeDefault => default_profile()?,
        Seccomp::Profile(p) => p.as_ref(),
        Seccomp::Localhost(path) => {
            return Err(RuntimeError::InvalidConfig(format!(
                "seccomp profile {} was not loaded",
                path.display()
            )));
        }
    };
    profile.to_oci(caps, native_arch()).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::LinuxSyscall;

    fn names_allowed(s: &LinuxSeccomp) -> HashSet<String> {
        s.syscalls()
            .iter()
            .flatten()
            .filter(|r| r.action() == LinuxSeccompAction::ScmpActAllow)
            .flat_map(|r| r.names().clone())
            .collect()
    }

    fn rules_for<'a>(s: &'a LinuxSeccomp, name: &str) -> Vec<&'a LinuxSyscall> {
        s.syscalls()
            .iter()
            .flatten()
            .filter(|r| r.names().iter().any(|n| n == name))
            .collect()
    }

    fn docker_default_caps() -> HashSet<Capability> {
        super::super::capabilities::DEFAULT_CAPABILITIES
            .into_iter()
            .collect()
    }

    /// The default profile for amd64 with Docker's default capabilities.
    fn docker_default_amd64() -> LinuxSeccomp {
        default_profile()
            .unwrap()
            .to_oci(&docker_default_caps(), "amd64")
            .unwrap()
    }

    #[test]
    fn the_default_profile_denies_with_eperm_and_allows_ordinary_syscalls() {
        let s = docker_default_amd64();
        assert_eq!(s.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(s.default_errno_ret(), Some(1));
        let allowed = names_allowed(&s);
        for name in [
            "read",
            "write",
            "openat",
            "mkdirat",
            "execve",
            "chroot",
            "arch_prctl",
        ] {
            assert!(allowed.contains(name), "{name} should be allowed");
        }
        for name in [
            "mount", "unshare", "setns", "keyctl", "add_key", "reboot", "bpf",
        ] {
            assert!(!allowed.contains(name), "{name} should not be allowed");
        }
        assert_eq!(
            s.architectures().clone().unwrap(),
            vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
        );
    }

    #[test]
    fn without_sys_admin_clone_may_not_make_namespaces_and_clone3_is_enosys() {
        let s = docker_default_amd64();
        let clone = rules_for(&s, "clone");
        assert_eq!(clone.len(), 1);
        let arg = clone[0].args().clone().unwrap()[0];
        assert_eq!(arg.value(), 0x7E02_0000);
        assert_eq!(
            arg.op(),
            oci_spec::runtime::LinuxSeccompOperator::ScmpCmpMaskedEq
        );
        let clone3 = rules_for(&s, "clone3");
        assert_eq!(clone3.len(), 1);
        assert_eq!(clone3[0].action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(clone3[0].errno_ret(), Some(38));
    }

    #[test]
    fn capabilities_add_the_syscalls_they_make_safe() {
        let mut caps = docker_default_caps();
        caps.insert(Capability::SysAdmin);
        caps.insert(Capability::SysPtrace);
        let s = default_profile().unwrap().to_oci(&caps, "amd64").unwrap();
        let allowed = names_allowed(&s);
        for name in ["mount", "unshare", "setns", "clone3", "kcmp", "pidfd_getfd"] {
            assert!(allowed.contains(name), "{name} should be allowed");
        }
        // With CAP_SYS_ADMIN clone is unconditional and clone3 is no longer ENOSYS.
        assert!(
            rules_for(&s, "clone")
                .iter()
                .all(|r| r.args().as_ref().is_none_or(|a| a.is_empty()))
        );
        assert!(
            rules_for(&s, "clone3")
                .iter()
                .all(|r| r.action() == LinuxSeccompAction::ScmpActAllow)
        );
        assert!(!allowed.contains("reboot"));
    }

    #[test]
    fn socket_rules_leave_out_af_alg_and_af_vsock() {
        let s = docker_default_amd64();
        let rules = rules_for(&s, "socket");
        let allows = |family: u64| {
            rules.iter().any(|r| {
                let a = r.args().clone().unwrap()[0];
                match a.op() {
                    oci_spec::runtime::LinuxSeccompOperator::ScmpCmpLt => family < a.value(),
                    oci_spec::runtime::LinuxSeccompOperator::ScmpCmpEq => family == a.value(),
                    oci_spec::runtime::LinuxSeccompOperator::ScmpCmpGt => family > a.value(),
                    _ => false,
                }
            })
        };
        assert!(allows(2), "AF_INET");
        assert!(allows(1), "AF_UNIX");
        assert!(allows(39), "AF_NFC");
        assert!(allows(44), "AF_XDP");
        assert!(!allows(38), "AF_ALG");
        assert!(!allows(40), "AF_VSOCK");
    }

    #[test]
    fn arch_rules_follow_the_machine() {
        let p = default_profile().unwrap();
        let arm = p.to_oci(&docker_default_caps(), "arm64").unwrap();
        let allowed = names_allowed(&arm);
        assert!(allowed.contains("set_tls"));
        assert!(!allowed.contains("arch_prctl"));
        assert_eq!(
            arm.architectures().clone().unwrap(),
            vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm]
        );
    }

    #[test]
    fn a_docker_profile_with_name_and_conditions_is_understood() {
        let p = Profile::parse(
            r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"],
                "syscalls":[{"name":"mkdir","action":"SCMP_ACT_ERRNO","errnoRet":1},
                            {"names":["mkdirat"],"action":"SCMP_ACT_ERRNO"},
                            {"names":["ptrace"],"action":"SCMP_ACT_ALLOW",
                             "includes":{"caps":["CAP_SYS_PTRACE"],"minKernel":"4.8"}}]}"#,
        )
        .unwrap();
        let s = p.to_oci(&docker_default_caps(), "amd64").unwrap();
        assert_eq!(s.default_action(), LinuxSeccompAction::ScmpActAllow);
        let all: Vec<String> = s
            .syscalls()
            .iter()
            .flatten()
            .flat_map(|r| r.names().clone())
            .collect();
        assert_eq!(all, vec!["mkdir", "mkdirat"]);
        assert_eq!(
            s.architectures().clone().unwrap(),
            vec![Arch::ScmpArchX86_64]
        );
    }

    #[test]
    fn rules_above_the_kernel_are_dropped() {
        let mut p = Profile::parse(
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
                {"names":["a"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"4.8"}},
                {"names":["b"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"6.20"}},
                {"names":["c"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"x"}},
                {"names":["d"],"action":"SCMP_ACT_ALLOW"}]}"#,
        )
        .unwrap();
        p.drop_rules_above_kernel((6, 1));
        let s = p.to_oci(&HashSet::new(), "amd64").unwrap();
        assert_eq!(names_allowed(&s), ["a", "d"].map(String::from).into());
    }

    #[test]
    fn malformed_profiles_are_refused_with_containerds_words() {
        let cases = [
            ("{not json", "decoding seccomp profile failed: "),
            (
                r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],
                   "archMap":[{"architecture":"SCMP_ARCH_X86_64"}]}"#,
                "'architectures' and 'archMap' were specified",
            ),
            (
                r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
                   {"name":"a","names":["b"],"action":"SCMP_ACT_ALLOW"}]}"#,
                "'name' and 'names' were specified",
            ),
            (
                r#"{"defaultAction":"SCMP_ACT_NOPE"}"#,
                "decoding seccomp profile failed: ",
            ),
        ];
        for (json, want) in cases {
            let err = Profile::parse(json).unwrap_err().to_string();
            assert!(err.starts_with(want) || err.contains(want), "{json}: {err}");
        }
    }

    #[test]
    fn unconfined_has_no_filter_and_an_unloaded_localhost_profile_is_an_error() {
        assert_eq!(
            linux_seccomp(&Seccomp::Unconfined, &HashSet::new()).unwrap(),
            None
        );
        assert!(linux_seccomp(&Seccomp::Localhost("/x".into()), &HashSet::new()).is_err());
        assert!(
            linux_seccomp(&Seccomp::RuntimeDefault, &HashSet::new())
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn kernel_versions_parse_like_uname_releases() {
        assert_eq!(parse_kernel("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(parse_kernel("4.8"), Some((4, 8)));
        assert_eq!(parse_kernel("5"), Some((5, 0)));
        assert_eq!(parse_kernel("x"), None);
    }
}
