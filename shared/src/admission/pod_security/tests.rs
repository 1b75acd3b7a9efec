//! Table tests of every Pod Security check and of the admission decisions, with upstream's
//! words.

use super::*;
use serde_json::json;

fn restricted() -> LevelVersion {
    LevelVersion::new(Level::Restricted, Version::Latest)
}

fn baseline() -> LevelVersion {
    LevelVersion::new(Level::Baseline, Version::Latest)
}

/// What `pod` (metadata and spec as JSON) violates at `lv`.
fn detail(lv: LevelVersion, pod: Value) -> String {
    let (meta, spec) = decode(&pod).expect("pod decodes");
    forbidden_detail(&evaluate(lv, &meta, &spec))
}

/// A spec whose one container `c` has `sc` as its security context.
fn with_container_context(sc: Value) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "i", "securityContext": sc}]}})
}

/// A pod that passes restricted, with `f` applied to it.
fn compliant(f: impl FnOnce(&mut Value)) -> Value {
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}});
    f(&mut pod);
    pod
}

#[test]
fn a_compliant_pod_passes_restricted() {
    assert_eq!(detail(restricted(), compliant(|_| {})), "");
}

#[test]
fn each_baseline_check_reports_upstreams_words() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "privileged",
            with_container_context(json!({"privileged": true})),
            r#"privileged (container "c" must not set securityContext.privileged=true)"#,
        ),
        (
            "host namespaces",
            json!({"spec": {"hostPID": true, "hostIPC": true, "hostNetwork": false,
                            "containers": [{"name": "c", "image": "i"}]}}),
            "host namespaces (hostPID=true, hostIPC=true)",
        ),
        (
            "capabilities beyond the default set",
            with_container_context(
                json!({"capabilities": {"add": ["NET_RAW", "CHOWN", "SYS_ADMIN"]}}),
            ),
            r#"non-default capabilities (container "c" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#,
        ),
        (
            "default capabilities",
            with_container_context(json!({"capabilities": {"add": ["CHOWN", "KILL"]}})),
            "",
        ),
        (
            "hostPath volumes",
            json!({"spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [
                {"name": "a", "hostPath": {"path": "/"}}, {"name": "b", "emptyDir": {}},
                {"name": "d", "hostPath": {"path": "/x"}}]}}),
            r#"hostPath volumes (volumes "a", "d")"#,
        ),
        (
            "host ports",
            json!({"spec": {"containers": [
                {"name": "a", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                {"name": "b", "image": "i", "ports": [{"containerPort": 81, "hostPort": 443},
                                                      {"containerPort": 82}]}]}}),
            r#"hostPort (containers "a", "b" use hostPorts 443, 8080)"#,
        ),
        (
            "AppArmor unconfined by field and annotation",
            json!({"metadata": {"annotations": {
                    "container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
                   "spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                            "containers": [{"name": "c", "image": "i"}]}}),
            r#"forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"")"#,
        ),
        (
            "AppArmor runtime default",
            with_container_context(json!({"appArmorProfile": {"type": "RuntimeDefault"}})),
            "",
        ),
        (
            "SELinux type, user and role",
            with_container_context(
                json!({"seLinuxOptions": {"type": "spc_t", "user": "u", "role": "r"}}),
            ),
            r#"seLinuxOptions (container "c" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set)"#,
        ),
        (
            "SELinux container_engine_t at 1.31",
            with_container_context(json!({"seLinuxOptions": {"type": "container_engine_t"}})),
            "",
        ),
        (
            "unmasked /proc",
            with_container_context(json!({"procMount": "Unmasked"})),
            r#"procMount (container "c" must not set securityContext.procMount to "Unmasked")"#,
        ),
        (
            "seccomp unconfined",
            json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                            "containers": [{"name": "c", "image": "i"}]}}),
            r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "sysctls outside the safe set",
            json!({"spec": {"securityContext": {"sysctls": [
                    {"name": "kernel.msgmax", "value": "1"},
                    {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"},
                    {"name": "net.ipv4.tcp_keepalive_time", "value": "60"},
                    {"name": "net.core.somaxconn", "value": "1"}]},
                   "containers": [{"name": "c", "image": "i"}]}}),
            "forbidden sysctls (kernel.msgmax, net.core.somaxconn)",
        ),
        (
            "Windows host process",
            json!({"spec": {"securityContext": {"windowsOptions": {"hostProcess": true}},
                            "containers": [{"name": "c", "image": "i", "securityContext":
                                {"windowsOptions": {"hostProcess": true}}}]}}),
            r#"hostProcess (pod and container "c" must not set securityContext.windowsOptions.hostProcess=true)"#,
        ),
    ];
    for (what, pod, want) in cases {
        assert_eq!(detail(baseline(), pod), want, "{what}");
    }
}

#[test]
fn ephemeral_and_init_containers_are_checked_in_upstreams_order() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "init", "image": "i", "securityContext": {"privileged": true}}],
        "containers": [{"name": "main", "image": "i", "securityContext": {"privileged": true}}],
        "ephemeralContainers": [{"name": "debug", "image": "i",
                                 "securityContext": {"privileged": true}}]}});
    assert_eq!(
        detail(baseline(), pod),
        r#"privileged (containers "init", "main", "debug" must not set securityContext.privileged=true)"#
    );
}

#[test]
fn each_restricted_check_reports_upstreams_words() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "privilege escalation allowed",
            compliant(|p| {
                p["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] =
                    json!(true)
            }),
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "capabilities not dropped and one added",
            compliant(|p| {
                p["spec"]["containers"][0]["securityContext"]["capabilities"] =
                    json!({"add": ["NET_BIND_SERVICE", "NET_ADMIN"]})
            }),
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]; container "c" must not include "NET_ADMIN" in securityContext.capabilities.add)"#,
        ),
        (
            "NET_BIND_SERVICE added",
            compliant(|p| {
                p["spec"]["containers"][0]["securityContext"]["capabilities"] =
                    json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})
            }),
            "",
        ),
        (
            "volume types",
            compliant(|p| {
                p["spec"]["volumes"] = json!([
                {"name": "h", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {"server": "s", "path": "/"}},
                {"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}},
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "x"}}])
            }),
            r#"restricted volume types (volumes "h", "n" use restricted volume types "hostPath", "nfs")"#,
        ),
        (
            "runAsNonRoot false on the pod",
            compliant(|p| p["spec"]["securityContext"]["runAsNonRoot"] = json!(false)),
            r#"runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"#,
        ),
        (
            "runAsNonRoot unset",
            compliant(|p| {
                p["spec"]["securityContext"] =
                    json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "x"}})
            }),
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#,
        ),
        (
            "runAsNonRoot set on the container only",
            compliant(|p| {
                p["spec"]["securityContext"]["runAsNonRoot"] = json!(null);
                p["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = json!(true);
            }),
            "",
        ),
        (
            "runAsUser 0",
            compliant(|p| {
                p["spec"]["securityContext"]["runAsUser"] = json!(0);
                p["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(0);
            }),
            r#"runAsUser=0 (pod and container "c" must not set runAsUser=0)"#,
        ),
        (
            "seccomp unset",
            compliant(|p| p["spec"]["securityContext"]["seccompProfile"] = json!(null)),
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ),
        (
            "seccomp unconfined on a container",
            compliant(|p| {
                p["spec"]["containers"][0]["securityContext"]["seccompProfile"] =
                    json!({"type": "Unconfined"})
            }),
            r#"seccompProfile (container "c" must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "a Windows pod skips the Linux-only checks",
            json!({"spec": {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true},
                            "containers": [{"name": "c", "image": "i"}]}}),
            "",
        ),
    ];
    for (what, pod, want) in cases {
        assert_eq!(detail(restricted(), pod), want, "{what}");
    }
}

#[test]
fn a_privileged_pod_violates_restricted_in_upstreams_order() {
    let pod = with_container_context(json!({"privileged": true}));
    assert_eq!(
        detail(restricted(), pod),
        r#"privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
    );
}

#[test]
fn versioned_checks_follow_the_label_version() {
    let sysctl = |name: &str| {
        json!({"spec": {"securityContext": {"sysctls": [{"name": name, "value": "1"}]},
                        "containers": [{"name": "c", "image": "i"}]}})
    };
    let at = |m, pod| detail(LevelVersion::new(Level::Baseline, Version::Minor(m)), pod);
    assert_ne!(at(26, sysctl("net.ipv4.ip_local_reserved_ports")), "");
    assert_eq!(at(27, sysctl("net.ipv4.ip_local_reserved_ports")), "");
    assert_ne!(at(28, sysctl("net.ipv4.tcp_fin_timeout")), "");
    assert_eq!(at(29, sysctl("net.ipv4.tcp_fin_timeout")), "");
    // Until 1.19 seccomp was the annotations'.
    let annotated = json!({"metadata": {"annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
        "spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                 "containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(
        at(18, annotated.clone()),
        r#"seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")"#
    );
    assert_eq!(
        at(19, annotated),
        r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#
    );
}

fn ns_labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn privileged_pod() -> Value {
    json!({"metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}})
}

#[test]
fn enforce_refuses_and_warn_warns() {
    let config = Config::default();
    let d = admit_pod(
        &config,
        &ns_labels(&[("pod-security.kubernetes.io/enforce", "baseline")]),
        Operation::Create,
        &privileged_pod(),
        None,
    );
    assert_eq!(
        d.forbidden.as_deref(),
        Some(
            r#"violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        )
    );
    assert!(d.warnings.is_empty(), "no warnings on a refused pod");
    let d = admit_pod(
        &config,
        &ns_labels(&[
            ("pod-security.kubernetes.io/warn", "baseline"),
            ("pod-security.kubernetes.io/audit", "restricted"),
        ]),
        Operation::Create,
        &privileged_pod(),
        None,
    );
    assert_eq!(d.forbidden, None);
    assert_eq!(
        d.warnings,
        [
            r#"would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        ]
    );
    assert!(
        d.audit
            .unwrap()
            .starts_with(r#"would violate PodSecurity "restricted:latest": privileged"#)
    );
}

#[test]
fn the_configured_default_applies_to_unlabelled_namespaces() {
    let config = Config {
        defaults: Policy {
            enforce: baseline(),
            ..Policy::default()
        },
        ..Config::default()
    };
    let d = admit_pod(
        &config,
        &BTreeMap::new(),
        Operation::Create,
        &privileged_pod(),
        None,
    );
    assert!(d.forbidden.is_some());
    let d = admit_pod(
        &config,
        &ns_labels(&[("pod-security.kubernetes.io/enforce", "privileged")]),
        Operation::Create,
        &privileged_pod(),
        None,
    );
    assert_eq!(d, Decision::default());
}

#[test]
fn a_bogus_enforce_label_enforces_restricted() {
    let d = admit_pod(
        &Config::default(),
        &ns_labels(&[("pod-security.kubernetes.io/enforce", "bogus")]),
        Operation::Create,
        &compliant(|p| p["spec"]["securityContext"]["runAsNonRoot"] = json!(null)),
        None,
    );
    assert!(
        d.forbidden
            .unwrap()
            .starts_with(r#"violates PodSecurity "restricted:latest": runAsNonRoot"#)
    );
}

#[test]
fn only_significant_pod_updates_are_checked() {
    let labels = ns_labels(&[("pod-security.kubernetes.io/enforce", "baseline")]);
    let old = privileged_pod();
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    let config = Config::default();
    assert_eq!(
        admit_pod(&config, &labels, Operation::Update, &relabelled, Some(&old)),
        Decision::default()
    );
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("j");
    assert!(
        admit_pod(&config, &labels, Operation::Update, &new_image, Some(&old))
            .forbidden
            .is_some()
    );
    let mut debugged = old.clone();
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "i"}]);
    assert!(is_significant_pod_update(&debugged, &old));
}

#[test]
fn exemptions_skip_the_checks() {
    let config = Config {
        defaults: Policy {
            enforce: restricted(),
            ..Policy::default()
        },
        exemptions: Exemptions {
            usernames: vec!["ci".into()],
            namespaces: vec!["kube-system".into()],
            runtime_classes: vec!["kata".into()],
        },
    };
    assert!(config.exempt("kube-system", None));
    assert!(config.exempt("default", Some("ci")));
    assert!(!config.exempt("default", Some("bob")));
    let mut pod = privileged_pod();
    pod["spec"]["runtimeClassName"] = json!("kata");
    assert_eq!(
        admit_pod(&config, &BTreeMap::new(), Operation::Create, &pod, None),
        Decision::default()
    );
}

#[test]
fn workload_templates_are_warned_about_at_the_enforce_level_never_refused() {
    let deployment = json!({"spec": {"template": privileged_pod()}});
    let template = template_of("apps", "Deployment", &deployment).unwrap();
    let d = admit_template(
        &Config::default(),
        &ns_labels(&[("pod-security.kubernetes.io/enforce", "baseline")]),
        template,
    );
    assert_eq!(d.forbidden, None);
    assert_eq!(
        d.warnings,
        [
            r#"would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        ]
    );
    let cron = json!({"spec": {"jobTemplate": {"spec": {"template": privileged_pod()}}}});
    assert!(template_of("batch", "CronJob", &cron).is_some());
    assert!(template_of("example.com", "Deployment", &deployment).is_none());
}

#[test]
fn namespace_labels_that_are_not_levels_are_refused() {
    let bad = ns_labels(&[("pod-security.kubernetes.io/enforce", "bogus")]);
    let errs = admit_namespace(&Config::default(), Operation::Create, "n", &bad, None).unwrap_err();
    assert_eq!(
        errs[0].message(),
        r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted"#
    );
    // Already wrong the same way: other changes go through.
    assert!(admit_namespace(&Config::default(), Operation::Update, "n", &bad, Some(&bad)).is_ok());
}

#[test]
fn a_stricter_enforce_level_checks_the_existing_pods() {
    let config = Config::default();
    let none = BTreeMap::new();
    let strict = ns_labels(&[("pod-security.kubernetes.io/enforce", "restricted")]);
    let d = admit_namespace(&config, Operation::Update, "n", &strict, Some(&none)).unwrap();
    assert_eq!(d.check_pods, Some(restricted()));
    // Relaxing it checks nothing.
    let d = admit_namespace(&config, Operation::Update, "n", &none, Some(&strict)).unwrap();
    assert_eq!(d, NamespaceDecision::default());
}

#[test]
fn an_exempt_namespace_is_told_its_labels_do_nothing() {
    let config = Config {
        exemptions: Exemptions {
            namespaces: vec!["n".into()],
            ..Exemptions::default()
        },
        ..Config::default()
    };
    let labels = ns_labels(&[("pod-security.kubernetes.io/enforce", "baseline")]);
    let d = admit_namespace(&config, Operation::Create, "n", &labels, None).unwrap();
    assert_eq!(
        d.warnings,
        [
            r#"namespace "n" is exempt from Pod Security, and the policy (enforce=baseline:latest) will be ignored"#
        ]
    );
}

#[test]
fn existing_pods_are_reported_once_per_reason() {
    let pod = |name: &str, owner: Option<&str>| {
        let mut p = privileged_pod();
        p["metadata"]["name"] = json!(name);
        if let Some(uid) = owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "rs", "uid": uid, "controller": true}]);
        }
        p
    };
    let mut hostnet = pod("h", None);
    hostnet["spec"]["hostNetwork"] = json!(true);
    let pods = [
        pod("web-b", Some("u1")),
        pod("web-a", Some("u1")),
        pod("solo", None),
        hostnet,
    ];
    let w = existing_pods_warnings(&Config::default(), "n", baseline(), &pods);
    assert_eq!(
        w,
        [
            r#"existing pods in namespace "n" violate the new PodSecurity enforce level "baseline:latest""#,
            "h: host namespaces, privileged",
            "solo (and 2 other pods): privileged",
        ]
    );
}
