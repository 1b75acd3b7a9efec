//! Turns a pod's container spec into the runtime's [`ContainerConfig`] (pure): environment
//! (values, `$(VAR)` references, fieldRef, resourceFieldRef, configMap/secret keys, envFrom),
//! volume mounts (with subPath), the pod's hosts/resolv/hostname files, resources → cgroup
//! limits, and the security context. A reference that cannot be resolved is the kubelet's
//! `CreateContainerConfigError`.
//!
//! Planner: pure, no I/O.

use crate::runtime::{
    ContainerConfig, ContainerId, ContainerImage, Mount, MountKind, NamespaceMode, Resources,
    Security,
};
use berth_api::k8s_openapi::api::core::v1::{Container, EnvVarSource, Pod};
use berth_api::quantity::Quantity;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Data of the configmaps and secrets the container references (secret values decoded).
#[derive(Debug, Clone, Default)]
pub struct ResolvedSources {
    pub configmaps: BTreeMap<String, BTreeMap<String, String>>,
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// ServiceAccount tokens for projected volumes, by [`super::api_access::TokenNeed::key`].
    pub tokens: BTreeMap<String, String>,
    /// The Services of the pod's namespace, when `enableServiceLinks` asks for their variables.
    pub services: Vec<berth_api::k8s_openapi::api::core::v1::Service>,
    /// Where the data of the pod's bound claims is, by the pod's volume name.
    pub claims: BTreeMap<String, super::claims::HostVolume>,
    /// The node's allocatable CPU and memory: what a `resourceFieldRef` to an unset limit
    /// reads in a downwardAPI volume, as the kubelet reads it.
    pub allocatable: Allocatable,
}

/// A node's allocatable CPU (millicores) and memory (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

/// Where things are on the host for this container.
#[derive(Debug, Clone, Default)]
pub struct HostSide {
    /// Volume name → host directory (or file) backing it; tmpfs volumes map to `None`.
    pub volumes: BTreeMap<String, Option<PathBuf>>,
    /// Volumes every mount of which is read-only (a claim volume's `readOnly`).
    pub read_only_volumes: std::collections::BTreeSet<String>,
    pub hosts_file: Option<PathBuf>,
    pub resolv_conf: Option<PathBuf>,
    pub hostname_file: Option<PathBuf>,
    /// The file bind-mounted at the container's terminationMessagePath.
    pub termination_log: Option<PathBuf>,
    pub network_namespace: Option<PathBuf>,
    /// An ephemeral container's target's PID namespace (`/proc/<pid>/ns/pid`), to join.
    pub target_pid_namespace: Option<PathBuf>,
    pub log_path: PathBuf,
    pub pod_ip: String,
    pub host_ip: String,
    /// Node allocatable, for resourceFieldRef limits that are unset.
    pub node_cpu_millis: i64,
    pub node_memory_bytes: i64,
    /// Where pods reach the API: the kubelet's `KUBERNETES_SERVICE_*` variables name it.
    pub api_endpoint: Option<(String, u16)>,
    /// seccomp default and profile root, AppArmor, allowed sysctls.
    pub security: super::security_profiles::NodeSecurity,
}

/// `CreateContainerConfigError`'s message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn quantity(
    v: Option<&berth_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<Quantity> {
    v.and_then(|q| Quantity::parse(&q.0).ok())
}

/// Expands `$(VAR)` from `env` as upstream's `expansion.Expand`: defined references are
/// replaced, `$$` escapes a `$`, undefined references stay as written.
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'$' => {
                    out.push('$');
                    i += 2;
                    continue;
                }
                b'(' => {
                    if let Some(end) = input[i + 2..].find(')') {
                        let name = &input[i + 2..i + 2 + end];
                        if let Some((_, v)) = env.iter().rev().find(|(k, _)| k == name) {
                            out.push_str(v);
                        } else {
                            out.push_str(&input[i..i + 3 + end]);
                        }
                        i += 3 + end;
                        continue;
                    }
                }
                _ => {}
            }
        }
        let ch = input[i..].chars().next().unwrap_or('$');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn field_ref(pod: &Pod, path: &str, host: &HostSide) -> Result<String, ConfigError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| -> Option<String> {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => host.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => host.host_ip.clone(),
        "metadata.labels" => render_map(meta.labels.as_ref()),
        "metadata.annotations" => render_map(meta.annotations.as_ref()),
        other => {
            if let Some(v) = keyed("metadata.labels", meta.labels.as_ref()) {
                v
            } else if let Some(v) = keyed("metadata.annotations", meta.annotations.as_ref()) {
                v
            } else {
                return Err(ConfigError(format!("unsupported fieldRef {other:?}")));
            }
        }
    };
    Ok(value)
}

fn render_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.map(|m| {
        m.iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .unwrap_or_default()
}

fn resource_ref(
    c: &Container,
    resource: &str,
    divisor: Option<&berth_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    host: &HostSide,
) -> Result<String, ConfigError> {
    let node = Allocatable {
        cpu_millis: host.node_cpu_millis,
        memory_bytes: host.node_memory_bytes,
    };
    resource_value(c, resource, divisor, node)
}

/// A `resourceFieldRef`'s value for container `c` (env and downwardAPI volumes alike): the
/// request or limit in whole `divisor` units, rounded up as upstream rounds; an unset limit
/// reads the node's allocatable.
pub fn resource_value(
    c: &Container,
    resource: &str,
    divisor: Option<&berth_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    node: Allocatable,
) -> Result<String, ConfigError> {
    let res = c.resources.as_ref();
    let (kind, name) = resource.split_once('.').unwrap_or(("limits", resource));
    let map = if kind == "requests" {
        res.and_then(|r| r.requests.as_ref())
    } else {
        res.and_then(|r| r.limits.as_ref())
    };
    let q = quantity(map.and_then(|m| m.get(name)));
    let divisor = quantity(divisor).unwrap_or_else(|| Quantity::parse("1").unwrap_or_default());
    match name {
        "cpu" => {
            let millis = q.map_or(if kind == "limits" { node.cpu_millis } else { 0 }, |q| {
                q.millis()
            });
            let d = divisor.millis().max(1);
            // Upstream rounds up to whole divisor units.
            Ok(((millis + d - 1) / d).to_string())
        }
        "memory" | "ephemeral-storage" => {
            let bytes = q.map_or(
                if kind == "limits" {
                    node.memory_bytes
                } else {
                    0
                },
                |q| q.value(),
            );
            let d = divisor.value().max(1);
            Ok(((bytes + d - 1) / d).to_string())
        }
        other => Err(ConfigError(format!(
            "unsupported resourceFieldRef resource {other:?}"
        ))),
    }
}

fn is_env_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The container's environment, in the kubelet's order: envFrom first, then env.
pub fn environment(
    pod: &Pod,
    c: &Container,
    sources: &ResolvedSources,
    host: &HostSide,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
        env.retain(|(x, _)| *x != k);
        env.push((k, v));
    };
    // The service variables come first: the pod's own envFrom and env override them.
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    for (k, v) in super::service_links::variables(ns, &sources.services) {
        set(&mut env, k, v);
    }
    if let Some(api) = &host.api_endpoint {
        for (k, v) in super::api_access::service_env(api) {
            set(&mut env, k, v);
        }
    }
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (data, optional, what, name) = if let Some(r) = &from.config_map_ref {
            (
                sources.configmaps.get(&r.name),
                r.optional.unwrap_or(false),
                "configmap",
                r.name.clone(),
            )
        } else if let Some(r) = &from.secret_ref {
            (
                sources.secrets.get(&r.name),
                r.optional.unwrap_or(false),
                "secret",
                r.name.clone(),
            )
        } else {
            continue;
        };
        match data {
            Some(d) => {
                for (k, v) in d {
                    let key = format!("{prefix}{k}");
                    if is_env_name(&key) {
                        set(&mut env, key, v.clone());
                    }
                }
            }
            None if optional => {}
            None => return Err(ConfigError(format!("{what} \"{name}\" not found"))),
        }
    }
    for e in c.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => expand(v, &env),
            (None, None) => String::new(),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    field_ref(pod, &f.field_path, host)?
                } else if let Some(r) = &from.resource_field_ref {
                    let target = match &r.container_name {
                        Some(n) if !n.is_empty() => pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.containers.iter().find(|x| &x.name == n))
                            .unwrap_or(c),
                        _ => c,
                    };
                    resource_ref(target, &r.resource, r.divisor.as_ref(), host)?
                } else if let Some(key) = KeyRef::of(from) {
                    match key.value(sources, pod)? {
                        Some(v) => v,
                        None => continue,
                    }
                } else {
                    String::new()
                }
            }
        };
        set(&mut env, e.name.clone(), value);
    }
    Ok(env)
}

/// A `configMapKeyRef` or `secretKeyRef` of an env var: which object, which key.
struct KeyRef<'a> {
    secret: bool,
    name: &'a str,
    key: &'a str,
    optional: bool,
}

impl<'a> KeyRef<'a> {
    /// The env var's key reference, the ConfigMap's if it has both (as the kubelet reads it).
    fn of(from: &'a EnvVarSource) -> Option<Self> {
        if let Some(k) = &from.config_map_key_ref {
            Some(Self::new(false, &k.name, &k.key, k.optional == Some(true)))
        } else {
            let k = from.secret_key_ref.as_ref()?;
            Some(Self::new(true, &k.name, &k.key, k.optional == Some(true)))
        }
    }

    fn new(secret: bool, name: &'a str, key: &'a str, optional: bool) -> Self {
        KeyRef {
            secret,
            name,
            key,
            optional,
        }
    }

    /// The value; `None` when it is missing and optional; upstream's error when it is missing
    /// and required (a missing key of an existing object, or a missing object).
    fn value(&self, sources: &ResolvedSources, pod: &Pod) -> Result<Option<String>, ConfigError> {
        // As upstream's messages spell the kind.
        let (objects, kind, lower) = if self.secret {
            (&sources.secrets, "Secret", "secret")
        } else {
            (&sources.configmaps, "ConfigMap", "configmap")
        };
        match objects.get(self.name).and_then(|d| d.get(self.key)) {
            Some(v) => Ok(Some(v.clone())),
            None if self.optional => Ok(None),
            None if objects.contains_key(self.name) => Err(ConfigError(format!(
                "couldn't find key {} in {kind} {}/{}",
                self.key,
                pod.metadata.namespace.clone().unwrap_or_default(),
                self.name
            ))),
            None => Err(ConfigError(format!("{lower} \"{}\" not found", self.name))),
        }
    }
}

fn resources(c: &Container) -> Resources {
    let res = c.resources.as_ref();
    let limit = |n: &str| quantity(res.and_then(|r| r.limits.as_ref()).and_then(|m| m.get(n)));
    let request = |n: &str| quantity(res.and_then(|r| r.requests.as_ref()).and_then(|m| m.get(n)));
    let cpu_limit = limit("cpu").map(|q| q.millis());
    let cpu_request = request("cpu").map(|q| q.millis()).or(cpu_limit);
    const PERIOD: u64 = 100_000;
    Resources {
        memory_limit_bytes: limit("memory").map(|q| q.value()),
        // 1000 millicpu = one full period of quota; the kernel's minimum quota is 1 ms.
        cpu_quota: cpu_limit.map(|m| (m * PERIOD as i64 / 1000).max(1000)),
        cpu_period: cpu_limit.map(|_| PERIOD),
        // Upstream MilliCPUToShares: 1024 shares per CPU, at least 2.
        cpu_shares: Some(cpu_request.map_or(2, |m| ((m * 1024) / 1000).max(2)) as u64),
        oom_score_adj: None,
    }
}

fn security(pod: &Pod, c: &Container) -> Security {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let to_u32 = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
    let mut groups: Vec<u32> = psc
        .and_then(|p| p.supplemental_groups.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|g| u32::try_from(g).ok())
        .collect();
    if let Some(fs) = to_u32(psc.and_then(|p| p.fs_group)) {
        groups.push(fs);
    }
    Security {
        run_as_user: to_u32(
            sc.and_then(|s| s.run_as_user)
                .or(psc.and_then(|p| p.run_as_user)),
        ),
        run_as_group: to_u32(
            sc.and_then(|s| s.run_as_group)
                .or(psc.and_then(|p| p.run_as_group)),
        ),
        supplemental_groups: groups,
        strict_supplemental_groups: psc.and_then(|p| p.supplemental_groups_policy.as_deref())
            == Some("Strict"),
        privileged: sc.and_then(|s| s.privileged).unwrap_or(false),
        read_only_root_fs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        add_capabilities: sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.clone())
            .unwrap_or_default(),
        drop_capabilities: sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.drop.clone())
            .unwrap_or_default(),
        allow_privilege_escalation: sc.and_then(|s| s.allow_privilege_escalation),
        // seccomp, AppArmor and sysctls: `super::security_profiles`.
        ..Security::default()
    }
}

fn mounts(pod: &Pod, c: &Container, host: &HostSide) -> Result<Vec<Mount>, ConfigError> {
    let mut out = Vec::new();
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let bind = |dest: &str, src: &PathBuf, ro: bool| Mount {
        destination: dest.to_string(),
        source: src.display().to_string(),
        kind: MountKind::Bind,
        read_only: ro,
        options: Vec::new(),
    };
    let mounted: Vec<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    if let Some(h) = &host.hosts_file
        && !mounted.contains(&"/etc/hosts")
    {
        out.push(bind("/etc/hosts", h, false));
    }
    if let Some(r) = &host.resolv_conf
        && !mounted.contains(&"/etc/resolv.conf")
    {
        out.push(bind("/etc/resolv.conf", r, false));
    }
    if let Some(h) = &host.hostname_file
        && !host_network
        && !mounted.contains(&"/etc/hostname")
    {
        out.push(bind("/etc/hostname", h, false));
    }
    if let Some(t) = &host.termination_log {
        let path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".to_string());
        out.push(bind(&path, t, false));
    }
    for m in c.volume_mounts.iter().flatten() {
        let Some(source) = host.volumes.get(&m.name) else {
            return Err(ConfigError(format!(
                "cannot find volume {:?} to mount into container {:?}",
                m.name, c.name
            )));
        };
        let read_only = m.read_only.unwrap_or(false) || host.read_only_volumes.contains(&m.name);
        match source {
            None => out.push(Mount {
                destination: m.mount_path.clone(),
                source: "tmpfs".to_string(),
                kind: MountKind::Tmpfs,
                read_only,
                options: Vec::new(),
            }),
            Some(dir) => {
                let mut src = dir.clone();
                if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                    if sub.starts_with('/') || sub.split('/').any(|p| p == "..") {
                        return Err(ConfigError(format!("invalid subPath {sub:?}")));
                    }
                    src = src.join(sub);
                }
                let mut mount = bind(&m.mount_path, &src, read_only);
                mount
                    .options
                    .extend(propagation(m.mount_propagation.as_deref())?);
                out.push(mount);
            }
        }
    }
    Ok(out)
}

/// A volume mount's `mountPropagation` as the kubelet hands it to the runtime: `None` (the
/// default) private, `HostToContainer` a slave of the host's mount, `Bidirectional` shared
/// both ways (the API admits it for privileged containers only).
fn propagation(mode: Option<&str>) -> Result<Option<String>, ConfigError> {
    match mode {
        None | Some("None") => Ok(None),
        Some("HostToContainer") => Ok(Some("rslave".to_string())),
        Some("Bidirectional") => Ok(Some("rshared".to_string())),
        Some(other) => Err(ConfigError(format!(
            "invalid mount propagation mode {other:?}"
        ))),
    }
}

/// The kubelet's `verifyRunAsNonRoot`: with `runAsNonRoot: true`, a container must not run as
/// uid 0 by its security context or its image's `USER`, and an image user that is a name
/// cannot be verified (only the image's metadata is consulted, never its files).
fn verify_run_as_non_root(pod: &Pod, c: &Container, image_user: &str) -> Result<(), ConfigError> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or(psc.and_then(|p| p.run_as_non_root));
    if non_root != Some(true) {
        return Ok(());
    }
    let meta = &pod.metadata;
    let who = format!(
        "pod: \"{}_{}({})\", container: {}",
        meta.name.as_deref().unwrap_or(""),
        meta.namespace.as_deref().unwrap_or(""),
        meta.uid.as_deref().unwrap_or(""),
        c.name
    );
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|p| p.run_as_user));
    if let Some(uid) = run_as_user {
        return if uid == 0 {
            Err(ConfigError(format!(
                "container's runAsUser breaks non-root policy ({who})"
            )))
        } else {
            Ok(())
        };
    }
    match crate::runtime::identity::effective_user(None, image_user) {
        crate::runtime::identity::EffectiveUser::Uid(0) => Err(ConfigError(format!(
            "container has runAsNonRoot and image will run as root ({who})"
        ))),
        crate::runtime::identity::EffectiveUser::Name(name) => Err(ConfigError(format!(
            "container has runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root ({who})"
        ))),
        crate::runtime::identity::EffectiveUser::Uid(_) => Ok(()),
    }
}

/// Builds the container's configuration.
#[allow(clippy::too_many_arguments)]
pub fn container_config(
    pod: &Pod,
    c: &Container,
    id: ContainerId,
    image: ContainerImage,
    labels: BTreeMap<String, String>,
    sources: &ResolvedSources,
    host: &HostSide,
    oom_score_adj: Option<i32>,
) -> Result<ContainerConfig, ConfigError> {
    verify_run_as_non_root(pod, c, &image.config.user)?;
    let env = environment(pod, c, sources, host)?;
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let hostname = if host_network {
        None
    } else {
        let name = spec
            .and_then(|s| s.hostname.clone())
            .or_else(|| pod.metadata.name.clone())
            .unwrap_or_default();
        Some(
            name.chars()
                .take(63)
                .collect::<String>()
                .trim_end_matches(['-', '.'])
                .to_string(),
        )
    };
    let mut resources = resources(c);
    resources.oom_score_adj = oom_score_adj;
    Ok(ContainerConfig {
        id,
        image,
        command: c.command.clone().unwrap_or_default(),
        args: c.args.clone().unwrap_or_default(),
        env,
        working_dir: c.working_dir.clone().filter(|w| !w.is_empty()),
        mounts: mounts(pod, c, host)?,
        network_namespace: if host_network {
            None
        } else {
            host.network_namespace.clone()
        },
        hostname,
        resources,
        security: super::security_profiles::plan_security(
            pod,
            c,
            &host.security,
            security(pod, c),
        )?,
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        pid_namespace: match &host.target_pid_namespace {
            Some(path) => NamespaceMode::Join(path.clone()),
            None if spec.and_then(|s| s.host_pid) == Some(true) => NamespaceMode::Host,
            None => NamespaceMode::Private,
        },
        ipc_namespace: if spec.and_then(|s| s.host_ipc) == Some(true) {
            NamespaceMode::Host
        } else {
            NamespaceMode::Private
        },
        labels,
        log_path: host.log_path.clone(),
        cgroup_parent: pod
            .metadata
            .uid
            .as_ref()
            .map(|u| crate::node::cgroup_layout::pod_parent(super::qos::class(pod), u)),
    })
}

/// The kubelet's OOM score adjustment for a container by the pod's QoS class (see
/// [`super::qos::oom_score_adj`]).
pub fn oom_score_adj(pod: &Pod, c: &Container, node_memory_bytes: i64) -> i32 {
    super::qos::oom_score_adj(pod, c, node_memory_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn host() -> HostSide {
        HostSide {
            pod_ip: "10.42.0.5".into(),
            host_ip: "192.0.2.1".into(),
            node_cpu_millis: 2000,
            node_memory_bytes: 1 << 30,
            ..HostSide::default()
        }
    }

    #[test]
    fn references_expand_defined_variables_and_keep_the_rest() {
        let env = vec![("A".to_string(), "x".to_string())];
        assert_eq!(expand("$(A)-$(B)-$$(A)", &env), "x-$(B)-$(A)");
    }

    #[test]
    fn env_resolves_field_resource_and_key_references_in_order() {
        let p = pod(
            json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1", "labels": {"app": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"memory": "64Mi"}},
                "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
                "env": [
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
                    {"name": "GREETING", "value": "hi $(POD)"}]}]}}),
        );
        let mut sources = ResolvedSources::default();
        sources
            .configmaps
            .insert("cm".into(), [("k".to_string(), "v".to_string())].into());
        sources.secrets.insert(
            "s".into(),
            [("pw".to_string(), "hunter2".to_string())].into(),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let env = environment(&p, c, &sources, &host()).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CM_k"), Some("v"));
        assert_eq!(get("POD"), Some("web"));
        assert_eq!(get("APP"), Some("a"));
        assert_eq!(get("IP"), Some("10.42.0.5"));
        assert_eq!(get("MEM"), Some("64"));
        assert_eq!(
            get("CPU"),
            Some("2"),
            "an unset cpu limit reads the node's allocatable"
        );
        assert_eq!(get("PASS"), Some("hunter2"));
        assert_eq!(get("GREETING"), Some("hi web"));
    }

    #[test]
    fn a_missing_configmap_is_a_config_error_unless_optional() {
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]}]}}),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let err = environment(&p, c, &ResolvedSources::default(), &host()).unwrap_err();
        assert_eq!(err.0, "configmap \"nope\" not found");
    }

    #[test]
    fn key_references_give_upstreams_messages_for_what_is_missing() {
        let p =
            pod(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}));
        let present: BTreeMap<String, BTreeMap<String, String>> =
            [("o".to_string(), [("k".to_string(), "v".to_string())].into())].into();
        let sources = ResolvedSources {
            configmaps: present.clone(),
            secrets: present,
            ..ResolvedSources::default()
        };
        let ok = |v: &str| Ok(Some(v.to_string()));
        let err = |m: &str| Err(m.to_string());
        let config_map = |name, key, optional| KeyRef::new(false, name, key, optional);
        let secret = |name, key, optional| KeyRef::new(true, name, key, optional);
        #[rustfmt::skip]
        let cases = [
            (config_map("o", "k", false), ok("v")),
            (secret("o", "k", false), ok("v")),
            (config_map("o", "x", true), Ok(None)),
            (config_map("gone", "k", true), Ok(None)),
            (config_map("o", "x", false), err("couldn't find key x in ConfigMap ns/o")),
            (secret("o", "x", false), err("couldn't find key x in Secret ns/o")),
            (config_map("gone", "k", false), err("configmap \"gone\" not found")),
            (secret("gone", "k", false), err("secret \"gone\" not found")),
        ];
        for (key, want) in cases {
            let what = format!(
                "secret={} {}/{} optional={}",
                key.secret, key.name, key.key, key.optional
            );
            let got = key.value(&sources, &p).map_err(|e| e.0);
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn run_as_non_root_is_verified_as_the_kubelet_does() {
        let who = "(pod: \"p_ns(u1)\", container: c)";
        let err = |m: &str| -> Result<(), String> { Err(format!("{m} {who}")) };
        let root = err("container has runAsNonRoot and image will run as root");
        let unverifiable = err(
            "container has runAsNonRoot and image has non-numeric user (appuser), cannot verify user is non-root",
        );
        let breaks = err("container's runAsUser breaks non-root policy");
        let non_root = json!({"runAsNonRoot": true});
        #[rustfmt::skip]
        let cases: &[(serde_json::Value, serde_json::Value, &str, Result<(), String>)] = &[
            (json!({}), json!({}), "", Ok(())),
            (json!({"runAsNonRoot": false}), json!({}), "", Ok(())),
            (non_root.clone(), json!({}), "", root.clone()),
            (non_root.clone(), json!({}), "0:0", root),
            (non_root.clone(), json!({}), "appuser", unverifiable),
            (non_root.clone(), json!({}), "1234:2345", Ok(())),
            (json!({"runAsNonRoot": true, "runAsUser": 1000}), json!({}), "appuser", Ok(())),
            // The container's fields win over the pod's.
            (non_root.clone(), json!({"runAsUser": 1000}), "root", Ok(())),
            (non_root, json!({"runAsNonRoot": false}), "", Ok(())),
            (json!({}), json!({"runAsNonRoot": true, "runAsUser": 0}), "appuser", breaks),
        ];
        for (pod_sc, container_sc, image_user, want) in cases {
            let p = pod(
                json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                "spec": {"securityContext": pod_sc,
                         "containers": [{"name": "c", "image": "i", "securityContext": container_sc}]}}),
            );
            let c = &p.spec.as_ref().unwrap().containers[0];
            let got = verify_run_as_non_root(&p, c, image_user).map_err(|e| e.0);
            assert_eq!(
                &got, want,
                "pod {pod_sc} container {container_sc} USER {image_user:?}"
            );
        }
    }

    #[test]
    fn limits_become_cgroup_settings() {
        let c: Container = serde_json::from_value(
            json!({"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "16Mi"}}}),
        )
        .unwrap();
        let r = resources(&c);
        assert_eq!(r.memory_limit_bytes, Some(16 * 1024 * 1024));
        assert_eq!((r.cpu_quota, r.cpu_period), (Some(50_000), Some(100_000)));
        assert_eq!(r.cpu_shares, Some(512), "the request defaults to the limit");
    }

    #[test]
    fn mounts_include_pod_files_volumes_and_sub_paths() {
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "volumeMounts": [{"name": "data", "mountPath": "/data", "subPath": "x"}, {"name": "mem", "mountPath": "/m", "readOnly": true}]}]}}),
        );
        let mut h = host();
        h.hosts_file = Some("/pods/u/etc-hosts".into());
        h.volumes
            .insert("data".into(), Some("/pods/u/volumes/data".into()));
        h.volumes.insert("mem".into(), None);
        let c = &p.spec.as_ref().unwrap().containers[0];
        let m = mounts(&p, c, &h).unwrap();
        assert_eq!(m[0].destination, "/etc/hosts");
        assert_eq!(m[1].source, "/pods/u/volumes/data/x");
        assert_eq!((m[2].kind, m[2].read_only), (MountKind::Tmpfs, true));
        let mut bad = h.clone();
        bad.volumes.remove("data");
        assert!(mounts(&p, c, &bad).is_err());
    }

    #[test]
    fn a_read_only_volume_is_mounted_read_only_wherever_it_is_mounted() {
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "volumeMounts": [{"name": "www", "mountPath": "/data", "subPath": "site"},
                             {"name": "www", "mountPath": "/all", "readOnly": false}]}]}}),
        );
        let mut h = host();
        h.volumes
            .insert("www".into(), Some("/storage/pvc-1_default_www".into()));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let writable = mounts(&p, c, &h).unwrap();
        assert!(writable.iter().all(|m| !m.read_only));
        h.read_only_volumes.insert("www".into());
        let m = mounts(&p, c, &h).unwrap();
        assert_eq!(m[0].source, "/storage/pvc-1_default_www/site");
        assert!(m.iter().all(|m| m.read_only));
    }
}
