//! The kernel-facing parts of a container's security context (pure): which seccomp profile and
//! AppArmor profile it runs under, its sysctls, and the settings a Linux node without user
//! namespaces cannot honour (`procMount: Unmasked`, Windows `hostProcess`), which are refused
//! rather than ignored. Also the pod-level admission of sysctls and AppArmor, as the kubelet's
//! admit handlers.
//!
//! Planner: pure, no I/O.
//!
//! seccomp follows the kubelet (v1.31 `getSeccompProfile`): the container's `seccompProfile`,
//! else the pod's, else `RuntimeDefault` with `--seccomp-default` (on in Berth) or
//! `Unconfined`. The deprecated `seccomp.security.alpha.kubernetes.io` annotations are not read:
//! the kubelet has ignored them since 1.27. Privileged containers run unconfined, as
//! containerd's CRI does. AppArmor follows the kubelet's `GetProfile` (container field, pod
//! field, then the `container.apparmor.security.beta.kubernetes.io/<name>` annotation).

use std::path::{Component, Path, PathBuf};

use berth_api::k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod, SeccompProfile};

use super::container_config::ConfigError;
use super::sysctls::{self, Allowlist};
use crate::runtime::Security;
use crate::runtime::seccomp::Seccomp;

/// containerd's default AppArmor profile, what `RuntimeDefault` means where AppArmor is on.
pub const APPARMOR_RUNTIME_DEFAULT: &str = "cri-containerd.apparmor.d";

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The node's security facilities and settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSecurity {
    /// `--seccomp-default`: `RuntimeDefault` for containers that set no profile.
    pub seccomp_default: bool,
    /// Where `Localhost` seccomp profiles are (`<root-dir>/seccomp`).
    pub seccomp_root: PathBuf,
    /// The sysctls pods may set.
    pub sysctls: Allowlist,
    /// Whether the host enforces AppArmor.
    pub apparmor_enabled: bool,
    /// The running kernel (major, minor), when known.
    pub kernel: Option<(u32, u32)>,
}

/// A pod the node refuses to run: the kubelet's `rejectPod` (phase `Failed`, this reason, and
/// the message after "Pod was rejected: ", as an event too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

/// The kubelet's admit handlers for sysctls and AppArmor, in its order.
pub fn plan_admission(pod: &Pod, node: &NodeSecurity) -> Option<Rejection> {
    if let Some(message) = node.sysctls.admit(pod) {
        return Some(Rejection {
            reason: sysctls::FORBIDDEN_REASON,
            message,
        });
    }
    if !node.apparmor_enabled && apparmor_required(pod) {
        return Some(Rejection {
            reason: "AppArmor",
            message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".to_string(),
        });
    }
    None
}

/// Upstream's `isRequired`: any AppArmor profile other than `Unconfined` is asked for.
fn apparmor_required(pod: &Pod) -> bool {
    let confined = |p: Option<&AppArmorProfile>| p.is_some_and(|p| p.type_ != "Unconfined");
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    if confined(
        spec.security_context
            .as_ref()
            .and_then(|s| s.app_armor_profile.as_ref()),
    ) {
        return true;
    }
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    if containers.clone().any(|c| {
        confined(
            c.security_context
                .as_ref()
                .and_then(|s| s.app_armor_profile.as_ref()),
        )
    }) {
        return true;
    }
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .any(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && v != "unconfined")
}

/// Completes `base` (the user/capability part of the securityContext) with the profiles, the
/// sysctls and the refusals of settings this node cannot honour.
pub fn plan_security(
    pod: &Pod,
    c: &Container,
    node: &NodeSecurity,
    mut base: Security,
) -> Result<Security, ConfigError> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let host_process = sc
        .and_then(|s| s.windows_options.as_ref())
        .or(psc.and_then(|p| p.windows_options.as_ref()))
        .and_then(|w| w.host_process)
        .unwrap_or(false);
    if host_process {
        return Err(ConfigError(
            "hostProcess containers are only supported on Windows nodes".to_string(),
        ));
    }
    if sc.and_then(|s| s.proc_mount.as_deref()) == Some("Unmasked") {
        return Err(ConfigError(
            "procMount Unmasked needs a user namespace (hostUsers: false), which this node does \
             not support"
                .to_string(),
        ));
    }
    let field = sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or(psc.and_then(|p| p.seccomp_profile.as_ref()));
    base.seccomp = match field {
        _ if base.privileged => Seccomp::Unconfined,
        Some(p) => seccomp_of_field(p, &node.seccomp_root)?,
        None if node.seccomp_default => Seccomp::RuntimeDefault,
        None => Seccomp::Unconfined,
    };
    base.apparmor_profile = if node.apparmor_enabled {
        apparmor_profile(pod, c, base.privileged)?
    } else {
        // Admission refused any other profile on this host.
        None
    };
    base.sysctls = sysctls::of_pod(pod);
    Ok(base)
}

fn seccomp_of_field(p: &SeccompProfile, root: &Path) -> Result<Seccomp, ConfigError> {
    match p.type_.as_str() {
        "RuntimeDefault" => Ok(Seccomp::RuntimeDefault),
        "Unconfined" => Ok(Seccomp::Unconfined),
        "Localhost" => {
            let name = p
                .localhost_profile
                .as_deref()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    ConfigError(
                        "localhostProfile must be set if seccompProfile type is Localhost."
                            .to_string(),
                    )
                })?;
            let rel = Path::new(name);
            if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(ConfigError(format!(
                    "localhostProfile {name:?} must be a descending path below the seccomp root"
                )));
            }
            Ok(Seccomp::Localhost(root.join(rel)))
        }
        other => Err(ConfigError(format!(
            "unknown seccomp profile type: {other:?}"
        ))),
    }
}

/// The profile name for runc (`None`: unconfined), as containerd's CRI maps the kubelet's
/// request; privileged containers get no default profile.
fn apparmor_profile(
    pod: &Pod,
    c: &Container,
    privileged: bool,
) -> Result<Option<String>, ConfigError> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let field = c
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.clone())
        .or(psc.and_then(|p| p.app_armor_profile.clone()));
    let profile = field.or_else(|| {
        let v = pod
            .metadata
            .annotations
            .as_ref()?
            .get(&format!("{APPARMOR_ANNOTATION_PREFIX}{}", c.name))?;
        Some(match v.as_str() {
            "runtime/default" => AppArmorProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            },
            "unconfined" => AppArmorProfile {
                type_: "Unconfined".into(),
                localhost_profile: None,
            },
            other => AppArmorProfile {
                type_: "Localhost".into(),
                localhost_profile: Some(other.strip_prefix("localhost/").unwrap_or(other).into()),
            },
        })
    });
    let Some(profile) = profile else {
        return Ok(None);
    };
    match profile.type_.as_str() {
        "RuntimeDefault" if privileged => Ok(None),
        "RuntimeDefault" => Ok(Some(APPARMOR_RUNTIME_DEFAULT.to_string())),
        "Unconfined" => Ok(None),
        "Localhost" => match profile.localhost_profile.filter(|n| !n.trim().is_empty()) {
            Some(name) => Ok(Some(name)),
            None => Err(ConfigError(
                "missing localhost apparmor profile name".to_string(),
            )),
        },
        other => Err(ConfigError(format!(
            "unknown apparmor profile type: {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn node(seccomp_default: bool) -> NodeSecurity {
        NodeSecurity {
            seccomp_default,
            seccomp_root: PathBuf::from("/var/lib/berth/agent/seccomp"),
            sysctls: Allowlist::new(&[], None).unwrap(),
            apparmor_enabled: false,
            kernel: Some((6, 1)),
        }
    }

    fn plan(p: &Pod, node: &NodeSecurity) -> Result<Security, ConfigError> {
        let c = &p.spec.as_ref().unwrap().containers[0];
        let privileged = c
            .security_context
            .as_ref()
            .and_then(|s| s.privileged)
            .unwrap_or(false);
        plan_security(
            p,
            c,
            node,
            Security {
                privileged,
                ..Security::default()
            },
        )
    }

    fn with(pod_sc: serde_json::Value, c_sc: serde_json::Value) -> Pod {
        pod(json!({
            "metadata": {"name": "p"},
            "spec": {"securityContext": pod_sc,
                     "containers": [{"name": "c", "image": "busybox", "securityContext": c_sc}]}
        }))
    }

    #[test]
    fn the_container_profile_wins_over_the_pods_and_the_node_default_fills_in() {
        let local = Seccomp::Localhost(PathBuf::from("/var/lib/berth/agent/seccomp/deny.json"));
        let cases = [
            (json!({}), json!({}), true, Seccomp::RuntimeDefault),
            (json!({}), json!({}), false, Seccomp::Unconfined),
            (
                json!({"seccompProfile": {"type": "Unconfined"}}),
                json!({}),
                true,
                Seccomp::Unconfined,
            ),
            (
                json!({"seccompProfile": {"type": "Unconfined"}}),
                json!({"seccompProfile": {"type": "RuntimeDefault"}}),
                false,
                Seccomp::RuntimeDefault,
            ),
            (
                json!({"seccompProfile": {"type": "RuntimeDefault"}}),
                json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "deny.json"}}),
                true,
                local.clone(),
            ),
            (
                json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "deny.json"}}),
                json!({}),
                false,
                local,
            ),
            // Privileged containers run unconfined whatever they ask for.
            (
                json!({"seccompProfile": {"type": "RuntimeDefault"}}),
                json!({"privileged": true}),
                true,
                Seccomp::Unconfined,
            ),
        ];
        for (psc, csc, default, want) in cases {
            let p = with(psc.clone(), csc.clone());
            assert_eq!(
                plan(&p, &node(default)).unwrap().seccomp,
                want,
                "{psc} {csc} default={default}"
            );
        }
    }

    #[test]
    fn the_deprecated_seccomp_annotations_are_ignored_as_by_the_kubelet() {
        let mut p = with(json!({}), json!({}));
        p.metadata.annotations = Some(
            [
                (
                    "seccomp.security.alpha.kubernetes.io/pod".to_string(),
                    "unconfined".to_string(),
                ),
                (
                    "container.seccomp.security.alpha.kubernetes.io/c".to_string(),
                    "unconfined".to_string(),
                ),
            ]
            .into(),
        );
        assert_eq!(
            plan(&p, &node(true)).unwrap().seccomp,
            Seccomp::RuntimeDefault
        );
    }

    #[test]
    fn localhost_profiles_need_a_descending_name() {
        for (csc, want) in [
            (
                json!({"seccompProfile": {"type": "Localhost"}}),
                "localhostProfile must be set if seccompProfile type is Localhost.",
            ),
            (
                json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "../x.json"}}),
                "must be a descending path",
            ),
            (
                json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/x.json"}}),
                "must be a descending path",
            ),
        ] {
            let err = plan(&with(json!({}), csc.clone()), &node(true)).unwrap_err();
            assert!(err.0.contains(want), "{csc}: {}", err.0);
        }
    }

    #[test]
    fn settings_a_linux_node_cannot_honour_are_refused() {
        for (psc, csc, want) in [
            (
                json!({}),
                json!({"procMount": "Unmasked"}),
                "procMount Unmasked",
            ),
            (
                json!({"windowsOptions": {"hostProcess": true}}),
                json!({}),
                "hostProcess containers are only supported on Windows nodes",
            ),
            (
                json!({}),
                json!({"windowsOptions": {"hostProcess": true}}),
                "hostProcess",
            ),
        ] {
            let err = plan(&with(psc, csc.clone()), &node(true)).unwrap_err();
            assert!(err.0.contains(want), "{csc}: {}", err.0);
        }
        assert!(
            plan(
                &with(json!({}), json!({"procMount": "Default"})),
                &node(true)
            )
            .is_ok()
        );
        assert!(
            plan(
                &with(json!({"windowsOptions": {"runAsUserName": "x"}}), json!({})),
                &node(true)
            )
            .is_ok()
        );
    }

    #[test]
    fn apparmor_profiles_map_as_containerd_does_where_apparmor_is_on() {
        let mut on = node(true);
        on.apparmor_enabled = true;
        let cases = [
            (json!({}), json!({}), None),
            (
                json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
                json!({}),
                Some(APPARMOR_RUNTIME_DEFAULT),
            ),
            (
                json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
                json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-deny"}}),
                Some("k8s-deny"),
            ),
            (
                json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
                json!({"appArmorProfile": {"type": "Unconfined"}}),
                None,
            ),
            (
                json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
                json!({"privileged": true}),
                None,
            ),
        ];
        for (psc, csc, want) in cases {
            let got = plan(&with(psc.clone(), csc.clone()), &on).unwrap();
            assert_eq!(got.apparmor_profile.as_deref(), want, "{psc} {csc}");
        }
        let mut annotated = with(json!({}), json!({}));
        annotated.metadata.annotations = Some(
            [(
                format!("{APPARMOR_ANNOTATION_PREFIX}c"),
                "localhost/k8s-annotated".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            plan(&annotated, &on).unwrap().apparmor_profile.as_deref(),
            Some("k8s-annotated")
        );
    }

    #[test]
    fn a_host_without_apparmor_rejects_pods_that_ask_for_a_profile() {
        let off = node(true);
        let rejected = |p: &Pod| plan_admission(p, &off).map(|r| (r.reason, r.message));
        assert_eq!(rejected(&with(json!({}), json!({}))), None);
        assert_eq!(
            rejected(&with(
                json!({}),
                json!({"appArmorProfile": {"type": "Unconfined"}})
            )),
            None
        );
        let want = Some((
            "AppArmor",
            "Cannot enforce AppArmor: AppArmor is not enabled on the host".to_string(),
        ));
        assert_eq!(
            rejected(&with(
                json!({}),
                json!({"appArmorProfile": {"type": "RuntimeDefault"}})
            )),
            want
        );
        let mut annotated = with(json!({}), json!({}));
        annotated.metadata.annotations = Some(
            [(
                format!("{APPARMOR_ANNOTATION_PREFIX}c"),
                "runtime/default".to_string(),
            )]
            .into(),
        );
        assert_eq!(rejected(&annotated), want);
    }

    #[test]
    fn forbidden_sysctls_reject_the_pod_before_apparmor_is_looked_at() {
        let p = with(
            json!({"sysctls": [{"name": "kernel.msgmax", "value": "9000"}],
                   "appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({}),
        );
        let r = plan_admission(&p, &node(true)).unwrap();
        assert_eq!(r.reason, "SysctlForbidden");
        assert_eq!(
            r.message,
            r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#
        );
        let ok = with(
            json!({"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]}),
            json!({}),
        );
        assert_eq!(plan_admission(&ok, &node(true)), None);
        assert_eq!(
            plan(&ok, &node(true)).unwrap().sysctls,
            [(
                "net.ipv4.ip_unprivileged_port_start".to_string(),
                "0".to_string()
            )]
            .into()
        );
    }
}
