//! The node's side of container security, read from the host: whether AppArmor is enforced,
//! the running kernel, the `Localhost` seccomp profiles under `<root-dir>/seccomp` and the
//! AppArmor profiles loaded in the kernel. A profile that is missing or malformed is the
//! kubelet's `CreateContainerConfigError`, no container is made.

use std::path::Path;

use super::container_config::ConfigError;
use super::security_profiles::{APPARMOR_RUNTIME_DEFAULT, NodeSecurity};
use super::sysctls::Allowlist;
use crate::runtime::Security;
use crate::runtime::seccomp::{Profile, Seccomp, parse_kernel};

/// Checks `--allowed-unsafe-sysctls` at start: a malformed pattern, or one not known to be
/// namespaced, stops the agent as it stops the kubelet.
pub fn check_sysctl_patterns(allowed_unsafe_sysctls: &[String]) -> Result<(), String> {
    Allowlist::new(allowed_unsafe_sysctls, None).map(|_| ())
}

/// The node's security settings: the agent's flags (checked at start, see
/// [`check_sysctl_patterns`]) and what the host offers.
pub fn observe(
    root_dir: &Path,
    seccomp_default: bool,
    allowed_unsafe_sysctls: &[String],
) -> NodeSecurity {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| parse_kernel(&r));
    let sysctls = Allowlist::new(allowed_unsafe_sysctls, kernel).unwrap_or_else(|e| {
        tracing::error!(error = %e, "--allowed-unsafe-sysctls ignored");
        Allowlist::new(&[], kernel).unwrap_or_default()
    });
    let security = NodeSecurity {
        seccomp_default,
        seccomp_root: root_dir.join("seccomp"),
        sysctls,
        apparmor_enabled: apparmor_enabled(),
        kernel,
    };
    tracing::info!(
        seccomp_default,
        apparmor = security.apparmor_enabled,
        "container security settings"
    );
    security
}

/// runc's check: the module is enabled and its filesystem is there.
fn apparmor_enabled() -> bool {
    Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|v| v.starts_with('Y'))
}

/// Reads what `security` names on the host: a `Localhost` seccomp profile is read and parsed
/// (its rules for newer kernels dropped), an AppArmor profile must be loaded.
pub async fn load_profiles(
    security: &mut Security,
    node: &NodeSecurity,
) -> Result<(), ConfigError> {
    if let Seccomp::Localhost(path) = &security.seccomp {
        let shown = path.display();
        let json = tokio::fs::read_to_string(path).await.map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
                _ => e.to_string(),
            };
            ConfigError(format!(
                "cannot load seccomp profile \"{shown}\": open {shown}: {why}"
            ))
        })?;
        let mut profile = Profile::parse(&json)
            .map_err(|e| ConfigError(format!("cannot load seccomp profile \"{shown}\": {e}")))?;
        if let Some(kernel) = node.kernel {
            profile.drop_rules_above_kernel(kernel);
        }
        security.seccomp = Seccomp::Profile(Box::new(profile));
    }
    if let Some(name) = &security.apparmor_profile {
        let loaded = tokio::fs::read_to_string("/sys/kernel/security/apparmor/profiles")
            .await
            .unwrap_or_default();
        if !profile_loaded(&loaded, name) {
            return Err(ConfigError(if name == APPARMOR_RUNTIME_DEFAULT {
                format!(
                    "apparmor profile not found {name}: RuntimeDefault needs containerd's \
                     default profile loaded on the node (apparmor_parser); the agent does not \
                     load profiles"
                )
            } else {
                format!("apparmor profile not found {name}")
            }));
        }
    }
    Ok(())
}

/// Whether `/sys/kernel/security/apparmor/profiles` (lines `name (mode)`) lists `name`.
fn profile_loaded(profiles: &str, name: &str) -> bool {
    profiles.lines().any(|l| {
        l.rfind(" (")
            .map(|i| &l[..i])
            .is_some_and(|n| n.trim() == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_profiles_are_read_from_the_kernels_list() {
        let list =
            "cri-containerd.apparmor.d (enforce)\nk8s-deny (complain)\n/usr/bin/man (enforce)\n";
        assert!(profile_loaded(list, "k8s-deny"));
        assert!(profile_loaded(list, "/usr/bin/man"));
        assert!(!profile_loaded(list, "k8s"));
    }

    #[tokio::test]
    async fn a_missing_or_malformed_localhost_profile_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeSecurity::default();
        let missing = dir.path().join("nope.json");
        let mut sec = Security {
            seccomp: Seccomp::Localhost(missing.clone()),
            ..Security::default()
        };
        let err = load_profiles(&mut sec, &node).await.unwrap_err();
        assert_eq!(
            err.0,
            format!(
                "cannot load seccomp profile \"{0}\": open {0}: no such file or directory",
                missing.display()
            )
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        sec.seccomp = Seccomp::Localhost(bad);
        let err = load_profiles(&mut sec, &node).await.unwrap_err();
        assert!(
            err.0.contains("decoding seccomp profile failed"),
            "{}",
            err.0
        );
        let good = dir.path().join("good.json");
        std::fs::write(&good, r#"{"defaultAction":"SCMP_ACT_ALLOW"}"#).unwrap();
        sec.seccomp = Seccomp::Localhost(good);
        load_profiles(&mut sec, &node).await.unwrap();
        assert!(matches!(sec.seccomp, Seccomp::Profile(_)));
    }
}
