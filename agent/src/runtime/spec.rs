//! Builds the OCI runtime spec of a container from its [`ContainerConfig`] (pure).
//!
//! Planner: pure, no I/O.
//!
//! The result follows containerd's default Linux spec as the CRI plugin adjusts it for
//! Kubernetes: the standard mounts (no `/run` tmpfs, a read-only `/sys/fs/cgroup`), Docker's
//! default capability set, masked and read-only `/proc` paths, private pid/ipc/uts/mount
//! namespaces, the pod's network namespace (or the host's, with `/sys` bind-mounted as runc
//! cannot mount a fresh sysfs there), cgroup limits and a cgroup path under the runtime's
//! per-namespace parent. Command and args follow the Kubernetes rules: `command` replaces the
//! image's ENTRYPOINT, `args` its CMD, and `$(VAR)` references are expanded from the
//! container's env.

use std::collections::HashSet;

use oci_spec::runtime::{
    Capabilities, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxCpuBuilder, LinuxDevice,
    LinuxDeviceBuilder, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxMemoryBuilder,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxResourcesBuilder, Mount as OciMount,
    MountBuilder, ProcessBuilder, RootBuilder, Spec, SpecBuilder, UserBuilder,
};

use super::capabilities::capabilities;
use super::expand::expand_from;
use super::identity::{self, UserDb, UserRequest};
use super::{ContainerConfig, MountKind, NamespaceMode, RuntimeError};

/// PATH when neither the image nor the container sets one (containerd's default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const MASKED_PATHS: [&str; 10] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];

const READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// A device node of the host, given to privileged containers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDevice {
    pub path: String,
    pub block: bool,
    pub major: i64,
    pub minor: i64,
    pub file_mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// The cgroup path of a container: `/<namespace>[/<parent>]/<id>`. runc's cgroups are
/// host-global, so the containerd namespace keeps two agents on one host apart.
pub fn cgroups_path(namespace: &str, parent: Option<&str>, id: &str) -> String {
    match parent
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty())
    {
        Some(parent) => format!("/{namespace}/{parent}/{id}"),
        None => format!("/{namespace}/{id}"),
    }
}

/// The process arguments: Kubernetes' command/args rules over the image's ENTRYPOINT/CMD,
/// then `$(VAR)` expansion from the container's env.
pub fn process_args(config: &ContainerConfig) -> Result<Vec<String>, RuntimeError> {
    let image = &config.image.config;
    let (command, args) = if config.command.is_empty() {
        let args = if config.args.is_empty() {
            image.cmd.clone()
        } else {
            config.args.clone()
        };
        let entrypoint = if image.entrypoint.len() == 1 && image.entrypoint[0].is_empty() {
            Vec::new()
        } else {
            image.entrypoint.clone()
        };
        (entrypoint, args)
    } else {
        (config.command.clone(), config.args.clone())
    };
    let all: Vec<String> = command
        .iter()
        .chain(args.iter())
        .map(|a| expand_from(a, &config.env))
        .collect();
    if all.is_empty() {
        return Err(RuntimeError::InvalidConfig(format!(
            "no command specified for container {} (the image has no ENTRYPOINT or CMD)",
            config.id
        )));
    }
    Ok(all)
}

/// The process environment: default PATH, HOSTNAME, the image's env, then the container's
/// env; a later entry replaces an earlier one with the same name in place.
pub fn environment(config: &ContainerConfig) -> Vec<String> {
    let mut env: Vec<(String, String)> = vec![("PATH".to_string(), DEFAULT_PATH.to_string())];
    let mut set = |k: &str, v: &str| match env.iter_mut().find(|(key, _)| key == k) {
        Some(entry) => entry.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    };
    if let Some(hostname) = config
        .hostname
        .as_deref()
        .filter(|_| config.network_namespace.is_some())
    {
        set("HOSTNAME", hostname);
    }
    for entry in &config.image.config.env {
        let (k, v) = entry.split_once('=').unwrap_or((entry.as_str(), ""));
        set(k, v);
    }
    for (k, v) in &config.env {
        set(k, v);
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// What [`identity::resolve`] needs from the container's configuration.
pub fn user_request(config: &ContainerConfig) -> UserRequest {
    UserRequest {
        image_user: config.image.config.user.clone(),
        run_as_user: config.security.run_as_user,
        run_as_group: config.security.run_as_group,
        supplemental_groups: config.security.supplemental_groups.clone(),
        strict_groups: config.security.strict_supplemental_groups,
    }
}

fn mount(dest: &str, typ: &str, source: &str, options: &[&str]) -> Result<OciMount, RuntimeError> {
    MountBuilder::default()
        .destination(dest)
        .typ(typ)
        .source(source)
        .options(options.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .build()
        .map_err(spec_error)
}

fn spec_error(e: oci_spec::OciSpecError) -> RuntimeError {
    RuntimeError::InvalidConfig(format!("building the OCI spec: {e}"))
}

/// The standard mounts, then the container's own (which replace a standard mount at the same
/// destination), parents before children.
fn mounts(config: &ContainerConfig) -> Result<Vec<OciMount>, RuntimeError> {
    let privileged = config.security.privileged;
    let ro = if privileged { "rw" } else { "ro" };
    let host_network = config.network_namespace.is_none();
    let mut defaults = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
    ];
    if host_network {
        defaults.push(mount(
            "/sys",
            "bind",
            "/sys",
            &["rbind", "rslave", "nosuid", "noexec", "nodev", ro],
        )?);
    } else {
        defaults.push(mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", ro],
        )?);
        defaults.push(mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", ro],
        )?);
    }
    let user_dests: HashSet<&str> = config
        .mounts
        .iter()
        .map(|m| m.destination.trim_end_matches('/'))
        .collect();
    defaults.retain(|m| {
        let dest = m.destination().to_string_lossy();
        !user_dests.contains(dest.as_ref())
    });

    let mut user = Vec::with_capacity(config.mounts.len());
    for m in &config.mounts {
        if !m.destination.starts_with('/') {
            return Err(RuntimeError::InvalidConfig(format!(
                "mount destination {:?} is not absolute",
                m.destination
            )));
        }
        let (typ, source, mut options) = match m.kind {
            // `mountPropagation` arrives as `rslave`/`rshared` in the options; else private.
            MountKind::Bind if m.options.iter().any(|o| PROPAGATIONS.contains(&o.as_str())) => {
                ("bind", m.source.as_str(), vec!["rbind".to_string()])
            }
            MountKind::Bind => (
                "bind",
                m.source.as_str(),
                vec!["rbind".to_string(), "rprivate".to_string()],
            ),
            MountKind::Tmpfs => (
                "tmpfs",
                "tmpfs",
                vec!["nosuid".to_string(), "nodev".to_string()],
            ),
        };
        options.push(if m.read_only { "ro" } else { "rw" }.to_string());
        options.extend(m.options.iter().cloned());
        user.push(
            MountBuilder::default()
                .destination(m.destination.as_str())
                .typ(typ)
                .source(source)
                .options(options)
                .build()
                .map_err(spec_error)?,
        );
    }
    // Parents first, so that a mount at /a/b is not hidden by a later mount at /a.
    user.sort_by_key(|m| m.destination().components().count());
    defaults.extend(user);
    Ok(defaults)
}

/// The recursive propagation options a bind mount may carry.
const PROPAGATIONS: [&str; 3] = ["rprivate", "rslave", "rshared"];

/// The root's propagation as containerd's CRI sets it: `rshared` when a mount propagates both
/// ways (`Bidirectional`), `rslave` when one receives the host's mounts (`HostToContainer`),
/// else runc's default (none written).
pub fn rootfs_propagation(config: &ContainerConfig) -> Option<&'static str> {
    let has = |p: &str| {
        config
            .mounts
            .iter()
            .any(|m| m.kind == MountKind::Bind && m.options.iter().any(|o| o == p))
    };
    if has("rshared") {
        Some("rshared")
    } else if has("rslave") {
        Some("rslave")
    } else {
        None
    }
}

fn host_devices(devices: &[HostDevice]) -> Result<Vec<LinuxDevice>, RuntimeError> {
    devices
        .iter()
        .map(|d| {
            LinuxDeviceBuilder::default()
                .path(d.path.as_str())
                .typ(if d.block {
                    LinuxDeviceType::B
                } else {
                    LinuxDeviceType::C
                })
                .major(d.major)
                .minor(d.minor)
                .file_mode(d.file_mode)
                .uid(d.uid)
                .gid(d.gid)
                .build()
                .map_err(spec_error)
        })
        .collect()
}

/// The full spec of a container whose image has no user files (numeric users only); see
/// [`build_with_users`].
pub fn build(
    config: &ContainerConfig,
    cgroups_path: &str,
    devices: &[HostDevice],
    held: &std::collections::HashSet<oci_spec::runtime::Capability>,
) -> Result<Spec, RuntimeError> {
    build_with_users(config, &UserDb::default(), cgroups_path, devices, held)
}

/// The full spec, the process's user resolved against `users`, the image's own user files.
/// `devices` are the host's device nodes, used only when privileged; `held` the capabilities
/// the agent holds, all a privileged container gets.
pub fn build_with_users(
    config: &ContainerConfig,
    users: &UserDb,
    cgroups_path: &str,
    devices: &[HostDevice],
    held: &std::collections::HashSet<oci_spec::runtime::Capability>,
) -> Result<Spec, RuntimeError> {
    let sec = &config.security;
    let who = identity::resolve(&user_request(config), users)
        .map_err(|e| RuntimeError::ContainerConfig(e.to_string()))?;
    let user = UserBuilder::default()
        .uid(who.uid)
        .gid(who.gid)
        .additional_gids(who.additional_gids);
    let caps = capabilities(config, held)?;
    let seccomp = super::seccomp::linux_seccomp(&sec.seccomp, &caps)?;
    let cwd = config
        .working_dir
        .clone()
        .filter(|d| !d.is_empty())
        .or_else(|| Some(config.image.config.working_dir.clone()).filter(|d| !d.is_empty()))
        .unwrap_or_else(|| "/".to_string());
    let mut process = ProcessBuilder::default()
        .terminal(config.tty)
        .user(user.build().map_err(spec_error)?)
        .args(process_args(config)?)
        .env(environment(config))
        .cwd(cwd)
        .capabilities(
            LinuxCapabilitiesBuilder::default()
                .bounding(caps.clone())
                .effective(caps.clone())
                .permitted(caps)
                .inheritable(Capabilities::new())
                .ambient(Capabilities::new())
                .build()
                .map_err(spec_error)?,
        )
        // No rlimits: the container inherits containerd's (as with the CRI plugin), which a
        // host sets through containerd's service limits. Raising them here fails where the
        // agent runs without CAP_SYS_RESOURCE over its own limits.
        .rlimits(Vec::new())
        .no_new_privileges(sec.allow_privilege_escalation == Some(false));
    if let Some(adj) = config.resources.oom_score_adj {
        process = process.oom_score_adj(adj);
    }
    if let Some(profile) = &sec.apparmor_profile {
        process = process.apparmor_profile(profile.clone());
    }

    let mut namespaces = Vec::new();
    for typ in [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ] {
        let mode = match typ {
            LinuxNamespaceType::Pid => &config.pid_namespace,
            LinuxNamespaceType::Ipc => &config.ipc_namespace,
            // Host network means the host's hostname too, as with hostNetwork pods.
            LinuxNamespaceType::Uts if config.network_namespace.is_none() => &NamespaceMode::Host,
            _ => &NamespaceMode::Private,
        };
        let mut ns = LinuxNamespaceBuilder::default();
        ns = ns.typ(typ);
        match mode {
            NamespaceMode::Host => continue,
            NamespaceMode::Private => {}
            NamespaceMode::Join(path) => ns = ns.path(path.clone()),
        }
        namespaces.push(ns.build().map_err(spec_error)?);
    }
    if let Some(netns) = &config.network_namespace {
        namespaces.push(
            LinuxNamespaceBuilder::default()
                .typ(LinuxNamespaceType::Network)
                .path(netns.clone())
                .build()
                .map_err(spec_error)?,
        );
    }

    let mut resources = LinuxResourcesBuilder::default().devices(vec![
        LinuxDeviceCgroupBuilder::default()
            .allow(sec.privileged)
            .access("rwm")
            .build()
            .map_err(spec_error)?,
    ]);
    if let Some(limit) = config.resources.memory_limit_bytes {
        resources = resources.memory(
            LinuxMemoryBuilder::default()
                .limit(limit)
                .swap(limit)
                .build()
                .map_err(spec_error)?,
        );
    }
    let r = &config.resources;
    if r.cpu_quota.is_some() || r.cpu_period.is_some() || r.cpu_shares.is_some() {
        let mut cpu = LinuxCpuBuilder::default();
        if let Some(q) = r.cpu_quota {
            cpu = cpu.quota(q);
        }
        if let Some(p) = r.cpu_period {
            cpu = cpu.period(p);
        }
        if let Some(s) = r.cpu_shares {
            cpu = cpu.shares(s);
        }
        resources = resources.cpu(cpu.build().map_err(spec_error)?);
    }

    let mut linux = LinuxBuilder::default()
        .resources(resources.build().map_err(spec_error)?)
        .cgroups_path(cgroups_path)
        .namespaces(namespaces);
    if sec.privileged {
        linux = linux
            .devices(host_devices(devices)?)
            .masked_paths(Vec::<String>::new())
            .readonly_paths(Vec::<String>::new());
    } else {
        linux = linux
            .masked_paths(
                MASKED_PATHS
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>(),
            )
            .readonly_paths(
                READONLY_PATHS
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>(),
            );
    }

    if let Some(seccomp) = seccomp {
        linux = linux.seccomp(seccomp);
    }
    if let Some(propagation) = rootfs_propagation(config) {
        linux = linux.rootfs_propagation(propagation);
    }
    if !sec.sysctls.is_empty() {
        linux = linux.sysctl(
            sec.sysctls
                .clone()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>(),
        );
    }

    // The builder starts from `Spec::default()`, whose hostname is "youki": set it explicitly.
    let spec = SpecBuilder::default()
        .version("1.0.2-dev")
        .root(
            RootBuilder::default()
                .path("rootfs")
                .readonly(sec.read_only_root_fs)
                .build()
                .map_err(spec_error)?,
        )
        .mounts(mounts(config)?)
        .process(process.build().map_err(spec_error)?)
        .linux(linux.build().map_err(spec_error)?);
    let mut spec = spec.build().map_err(spec_error)?;
    spec.set_hostname(
        config
            .hostname
            .clone()
            .filter(|_| config.network_namespace.is_some()),
    );
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::runtime::{ContainerId, ContainerImage, ImageConfig, Mount, Resources};

    /// An agent holding every capability.
    fn all_caps() -> std::collections::HashSet<oci_spec::runtime::Capability> {
        super::super::capabilities::all()
    }

    fn config() -> ContainerConfig {
        let image = ContainerImage {
            name: "docker.io/library/busybox:1.28".into(),
            chain_id: "sha256:abc".into(),
            config: ImageConfig {
                env: vec!["PATH=/bin".into(), "FROM_IMAGE=1".into()],
                entrypoint: vec![],
                cmd: vec!["sh".into()],
                ..Default::default()
            },
        };
        let id = ContainerId::new("c1").unwrap();
        ContainerConfig {
            network_namespace: Some(PathBuf::from("/var/run/netns/pod1")),
            hostname: Some("pod1".into()),
            ..ContainerConfig::new(id, image, PathBuf::from("/tmp/c1.log"))
        }
    }

    /// The spec's mount at `destination`.
    fn mount<'a>(spec: &'a serde_json::Value, destination: &str) -> &'a serde_json::Value {
        let mounts = spec["mounts"].as_array().unwrap();
        mounts
            .iter()
            .find(|m| m["destination"] == destination)
            .unwrap()
    }

    fn json(spec: &Spec) -> serde_json::Value {
        serde_json::to_value(spec).unwrap()
    }

    #[test]
    fn command_and_args_follow_kubernetes_rules() {
        struct Case {
            entrypoint: &'static [&'static str],
            cmd: &'static [&'static str],
            command: &'static [&'static str],
            args: &'static [&'static str],
            want: &'static [&'static str],
        }
        let cases = [
            // Nothing given: ENTRYPOINT + CMD.
            Case {
                entrypoint: &["/ep"],
                cmd: &["c1"],
                command: &[],
                args: &[],
                want: &["/ep", "c1"],
            },
            // args only: ENTRYPOINT + args.
            Case {
                entrypoint: &["/ep"],
                cmd: &["c1"],
                command: &[],
                args: &["a1"],
                want: &["/ep", "a1"],
            },
            // command only: the image's CMD is not used.
            Case {
                entrypoint: &["/ep"],
                cmd: &["c1"],
                command: &["/x"],
                args: &[],
                want: &["/x"],
            },
            // command and args.
            Case {
                entrypoint: &["/ep"],
                cmd: &["c1"],
                command: &["/x"],
                args: &["a1"],
                want: &["/x", "a1"],
            },
            // An ENTRYPOINT of [""] means none.
            Case {
                entrypoint: &[""],
                cmd: &["c1"],
                command: &[],
                args: &[],
                want: &["c1"],
            },
        ];
        for case in cases {
            let mut c = config();
            let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            c.image.config.entrypoint = v(case.entrypoint);
            c.image.config.cmd = v(case.cmd);
            c.command = v(case.command);
            c.args = v(case.args);
            assert_eq!(process_args(&c).unwrap(), v(case.want));
        }
    }

    #[test]
    fn no_command_at_all_is_an_error() {
        let mut c = config();
        c.image.config.cmd.clear();
        assert!(matches!(
            process_args(&c),
            Err(RuntimeError::InvalidConfig(_))
        ));
    }

    #[test]
    fn args_expand_variables_from_the_container_env_only() {
        let mut c = config();
        c.env = vec![("GREETING".into(), "hi".into())];
        c.command = vec!["echo".into()];
        c.args = vec![
            "$(GREETING)".into(),
            "$$(GREETING)".into(),
            "$(FROM_IMAGE)".into(),
        ];
        assert_eq!(
            process_args(&c).unwrap(),
            vec!["echo", "hi", "$(GREETING)", "$(FROM_IMAGE)"]
        );
    }

    #[test]
    fn container_env_replaces_image_env_in_place() {
        let mut c = config();
        c.env = vec![
            ("FROM_IMAGE".into(), "2".into()),
            ("NEW".into(), "x".into()),
        ];
        assert_eq!(
            environment(&c),
            vec!["PATH=/bin", "HOSTNAME=pod1", "FROM_IMAGE=2", "NEW=x"]
        );
    }

    #[test]
    fn default_path_when_nobody_sets_one() {
        let mut c = config();
        c.image.config.env.clear();
        c.hostname = None;
        assert_eq!(environment(&c), vec![format!("PATH={DEFAULT_PATH}")]);
    }

    #[test]
    fn default_spec_has_docker_caps_masks_and_pod_namespaces() {
        let spec = json(&build(&config(), "/ns/c1", &[], &all_caps()).unwrap());
        let caps = spec["process"]["capabilities"]["bounding"]
            .as_array()
            .unwrap();
        assert_eq!(caps.len(), 14);
        assert!(caps.contains(&"CAP_NET_BIND_SERVICE".into()));
        assert!(!caps.contains(&"CAP_SYS_ADMIN".into()));
        assert_eq!(spec["linux"]["maskedPaths"].as_array().unwrap().len(), 10);
        assert_eq!(spec["linux"]["cgroupsPath"], "/ns/c1");
        assert_eq!(spec["hostname"], "pod1");
        assert_eq!(spec["root"]["path"], "rootfs");
        assert_eq!(spec["root"]["readonly"], false);
        let ns: Vec<(String, Option<String>)> = spec["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["type"].as_str().unwrap().to_string(),
                    n["path"].as_str().map(str::to_string),
                )
            })
            .collect();
        assert_eq!(
            ns,
            vec![
                ("pid".to_string(), None),
                ("ipc".to_string(), None),
                ("uts".to_string(), None),
                ("mount".to_string(), None),
                (
                    "network".to_string(),
                    Some("/var/run/netns/pod1".to_string())
                ),
            ]
        );
        assert_eq!(spec["linux"]["resources"]["devices"][0]["allow"], false);
        let dests: Vec<&str> = spec["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["destination"].as_str().unwrap())
            .collect();
        assert_eq!(
            dests,
            vec![
                "/proc",
                "/dev",
                "/dev/pts",
                "/dev/shm",
                "/dev/mqueue",
                "/sys",
                "/sys/fs/cgroup"
            ]
        );
        assert_eq!(spec["process"]["noNewPrivileges"], false);
    }

    #[test]
    fn host_network_binds_sys_and_shares_uts() {
        let mut c = config();
        c.network_namespace = None;
        let spec = json(&build(&c, "/ns/c1", &[], &all_caps()).unwrap());
        let types: Vec<&str> = spec["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["pid", "ipc", "mount"]);
        assert!(spec.get("hostname").is_none());
        let sys = mount(&spec, "/sys");
        assert_eq!(sys["type"], "bind");
        assert!(!environment(&c).iter().any(|e| e.starts_with("HOSTNAME=")));
    }

    #[test]
    fn pid_and_ipc_namespaces_are_private_the_hosts_or_joined() {
        let namespaces = |pid: NamespaceMode, ipc: NamespaceMode| {
            let mut c = config();
            c.pid_namespace = pid;
            c.ipc_namespace = ipc;
            let spec = json(&build(&c, "/ns/c1", &[], &all_caps()).unwrap());
            spec["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| {
                    let path = n["path"].as_str().map(String::from);
                    (n["type"].as_str().unwrap().to_string(), path)
                })
                .filter(|(t, _)| t == "pid" || t == "ipc")
                .collect::<Vec<_>>()
        };
        let private = |t: &str| (t.to_string(), None);
        let table = [
            (
                "a pod's own container",
                NamespaceMode::Private,
                NamespaceMode::Private,
                vec![private("pid"), private("ipc")],
            ),
            (
                "hostPID and hostIPC: no entries, the host's namespaces",
                NamespaceMode::Host,
                NamespaceMode::Host,
                vec![],
            ),
            (
                "an ephemeral container joins its target's PID namespace",
                NamespaceMode::Join(PathBuf::from("/proc/42/ns/pid")),
                NamespaceMode::Private,
                vec![
                    ("pid".to_string(), Some("/proc/42/ns/pid".to_string())),
                    private("ipc"),
                ],
            ),
        ];
        for (what, pid, ipc, want) in table {
            assert_eq!(namespaces(pid, ipc), want, "{what}");
        }
    }

    #[test]
    fn privileged_gets_exactly_the_capabilities_the_agent_holds() {
        let mut c = config();
        c.security.privileged = true;
        let mut held = all_caps();
        held.remove(&oci_spec::runtime::Capability::SysResource);
        let spec = json(&build(&c, "/ns/c1", &[], &held).unwrap());
        for set in ["bounding", "effective", "permitted"] {
            let caps = spec["process"]["capabilities"][set].as_array().unwrap();
            assert_eq!(caps.len(), 40, "{set}");
            assert!(!caps.contains(&"CAP_SYS_RESOURCE".into()), "{set}");
        }
        // Adding ALL is the same grant.
        let mut c = config();
        c.security.add_capabilities = vec!["ALL".into()];
        let spec = json(&build(&c, "/ns/c1", &[], &held).unwrap());
        let caps = spec["process"]["capabilities"]["bounding"]
            .as_array()
            .unwrap();
        assert!(!caps.contains(&"CAP_SYS_RESOURCE".into()));
    }

    #[test]
    fn privileged_gets_all_caps_devices_and_no_masks() {
        let mut c = config();
        c.security.privileged = true;
        let dev = HostDevice {
            path: "/dev/loop0".into(),
            block: true,
            major: 7,
            minor: 0,
            file_mode: 0o660,
            uid: 0,
            gid: 6,
        };
        let spec = json(&build(&c, "/ns/c1", &[dev], &all_caps()).unwrap());
        assert_eq!(
            spec["process"]["capabilities"]["bounding"]
                .as_array()
                .unwrap()
                .len(),
            41
        );
        assert_eq!(spec["linux"]["maskedPaths"].as_array().unwrap().len(), 0);
        assert_eq!(spec["linux"]["readonlyPaths"].as_array().unwrap().len(), 0);
        assert_eq!(spec["linux"]["resources"]["devices"][0]["allow"], true);
        assert_eq!(spec["linux"]["devices"][0]["path"], "/dev/loop0");
        assert_eq!(spec["linux"]["devices"][0]["type"], "b");
    }

    #[test]
    fn capability_add_and_drop_follow_containerd_order() {
        type Names = &'static [&'static str];
        let cases: [(Names, Names, usize, Names, Names); 4] = [
            // (add, drop, count, must contain, must not contain)
            (
                &["NET_ADMIN"],
                &["KILL"],
                14,
                &["CAP_NET_ADMIN"],
                &["CAP_KILL"],
            ),
            (
                &["CAP_SYS_TIME"],
                &["ALL"],
                1,
                &["CAP_SYS_TIME"],
                &["CAP_CHOWN"],
            ),
            (&["ALL"], &["CHOWN"], 40, &["CAP_SYS_ADMIN"], &["CAP_CHOWN"]),
            (&[], &["all"], 0, &[], &["CAP_KILL"]),
        ];
        for (add, drop, count, has, hasnt) in cases {
            let mut c = config();
            c.security.add_capabilities = add.iter().map(|s| s.to_string()).collect();
            c.security.drop_capabilities = drop.iter().map(|s| s.to_string()).collect();
            let spec = json(&build(&c, "/ns/c1", &[], &all_caps()).unwrap());
            let caps = spec["process"]["capabilities"]["effective"]
                .as_array()
                .unwrap();
            assert_eq!(caps.len(), count, "add {add:?} drop {drop:?}");
            for h in has {
                assert!(
                    caps.contains(&(*h).into()),
                    "{h} missing for {add:?}/{drop:?}"
                );
            }
            for h in hasnt {
                assert!(
                    !caps.contains(&(*h).into()),
                    "{h} present for {add:?}/{drop:?}"
                );
            }
        }
    }

    #[test]
    fn unknown_capability_is_rejected() {
        let mut c = config();
        c.security.add_capabilities = vec!["FLY".into()];
        assert!(matches!(
            build(&c, "/x", &[], &all_caps()),
            Err(RuntimeError::InvalidConfig(_))
        ));
    }

    #[test]
    fn user_comes_from_security_context_then_image() {
        type Case = (&'static str, Option<u32>, Option<u32>, (u32, u32));
        let cases: [Case; 6] = [
            ("", None, None, (0, 0)),
            ("1000", None, None, (1000, 0)),
            // The kubelet drops an image's group: passwd (none here) gives gid 0.
            ("1000:50", None, None, (1000, 0)),
            ("1000:50", Some(7), None, (7, 0)),
            ("nobody", Some(65534), Some(65534), (65534, 65534)),
            ("0", None, Some(3), (0, 3)),
        ];
        for (image_user, uid, gid, want) in cases {
            let mut c = config();
            c.image.config.user = image_user.into();
            c.security.run_as_user = uid;
            c.security.run_as_group = gid;
            let spec = json(&build(&c, "/x", &[], &all_caps()).unwrap());
            assert_eq!(
                (
                    spec["process"]["user"]["uid"].as_u64().unwrap() as u32,
                    spec["process"]["user"]["gid"].as_u64().unwrap() as u32
                ),
                want,
                "image user {image_user:?}"
            );
        }
        let mut c = config();
        c.image.config.user = "nginx".into();
        assert!(build(&c, "/x", &[], &all_caps()).is_err());
    }

    #[test]
    fn resources_become_cgroup_limits() {
        let mut c = config();
        c.resources = Resources {
            memory_limit_bytes: Some(16 << 20),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            cpu_shares: Some(512),
            oom_score_adj: Some(999),
        };
        c.security.read_only_root_fs = true;
        c.security.allow_privilege_escalation = Some(false);
        let spec = json(&build(&c, "/x", &[], &all_caps()).unwrap());
        let r = &spec["linux"]["resources"];
        assert_eq!(r["memory"]["limit"], 16 << 20);
        assert_eq!(r["memory"]["swap"], 16 << 20);
        assert_eq!(r["cpu"]["quota"], 50_000);
        assert_eq!(r["cpu"]["period"], 100_000);
        assert_eq!(r["cpu"]["shares"], 512);
        assert_eq!(spec["process"]["oomScoreAdj"], 999);
        assert_eq!(spec["root"]["readonly"], true);
        assert_eq!(spec["process"]["noNewPrivileges"], true);
    }

    #[test]
    fn propagating_mounts_set_their_mode_and_the_roots() {
        let bind = |dest: &str, options: &[&str]| Mount {
            destination: dest.into(),
            source: format!("/host{dest}"),
            kind: MountKind::Bind,
            read_only: false,
            options: options.iter().map(|o| o.to_string()).collect(),
        };
        let cases: [(&[&str], &[&str], Option<&str>); 3] = [
            (&[], &["rbind", "rprivate", "rw"], None),
            (&["rslave"], &["rbind", "rw", "rslave"], Some("rslave")),
            (&["rshared"], &["rbind", "rw", "rshared"], Some("rshared")),
        ];
        for (given, options, root) in cases {
            let mut c = config();
            c.mounts = vec![bind("/a", given), bind("/b", &[])];
            let spec = json(&build(&c, "/x", &[], &all_caps()).unwrap());
            let a = mount(&spec, "/a");
            assert_eq!(a["options"], serde_json::json!(options), "{given:?}");
            assert_eq!(
                spec["linux"]["rootfsPropagation"].as_str(),
                root,
                "{given:?}"
            );
        }
    }

    #[test]
    fn user_mounts_replace_defaults_and_sort_parents_first() {
        let mut c = config();
        c.mounts = vec![
            Mount {
                destination: "/data/sub".into(),
                source: "/host/sub".into(),
                kind: MountKind::Bind,
                read_only: true,
                options: vec![],
            },
            Mount {
                destination: "/data".into(),
                source: "/host/data".into(),
                kind: MountKind::Bind,
                read_only: false,
                options: vec![],
            },
            Mount {
                destination: "/dev/shm".into(),
                source: String::new(),
                kind: MountKind::Tmpfs,
                read_only: false,
                options: vec!["size=1m".into()],
            },
        ];
        let spec = json(&build(&c, "/x", &[], &all_caps()).unwrap());
        let mounts = spec["mounts"].as_array().unwrap();
        let dests: Vec<&str> = mounts
            .iter()
            .map(|m| m["destination"].as_str().unwrap())
            .collect();
        assert_eq!(dests.iter().filter(|d| **d == "/dev/shm").count(), 1);
        let data = dests.iter().position(|d| *d == "/data").unwrap();
        let sub = dests.iter().position(|d| *d == "/data/sub").unwrap();
        assert!(data < sub);
        let sub_mount = &mounts[sub];
        assert_eq!(sub_mount["type"], "bind");
        assert_eq!(
            sub_mount["options"],
            serde_json::json!(["rbind", "rprivate", "ro"])
        );
        let shm = mounts
            .iter()
            .find(|m| m["destination"] == "/dev/shm")
            .unwrap();
        assert_eq!(shm["type"], "tmpfs");
        assert_eq!(
            shm["options"],
            serde_json::json!(["nosuid", "nodev", "rw", "size=1m"])
        );
    }

    #[test]
    fn cgroup_paths_nest_under_the_namespace() {
        assert_eq!(cgroups_path("berth", None, "c1"), "/berth/c1");
        assert_eq!(
            cgroups_path("berth", Some("/podabc/"), "c1"),
            "/berth/podabc/c1"
        );
        assert_eq!(cgroups_path("berth", Some(""), "c1"), "/berth/c1");
    }

    #[test]
    fn working_dir_prefers_the_container_then_the_image() {
        let mut c = config();
        let cwd = |c: &ContainerConfig| {
            json(&build(c, "/x", &[], &all_caps()).unwrap())["process"]["cwd"].clone()
        };
        assert_eq!(cwd(&c), "/");
        c.image.config.working_dir = "/app".into();
        assert_eq!(cwd(&c), "/app");
        c.working_dir = Some("/work".into());
        assert_eq!(cwd(&c), "/work");
    }
}
