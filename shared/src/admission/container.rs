//! Container validation (upstream `validateContainerCommon` and what it calls): names, image,
//! ports, env, envFrom, volume mounts, pull policy, resources and security context.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, ObjectFieldSelector,
};

use super::field::{FieldError, Path, validate_choice, validate_optional_choice};
use super::names::{
    config_map_key, dns1123_label, dns1123_subdomain, each_invalid, env_var_name, port_name,
    port_num, qualified_name, required_name,
};
use super::resources::{validate_resources, validate_security_context};

/// Field paths the downward API may expose through env vars (no subscript).
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// Checks common to regular and init containers. `volumes` are the pod's valid volume names.
pub(crate) fn validate_container_common(
    c: &Container,
    volumes: &BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = required_name(&path.child("name"), &c.name, dns1123_label);
    if c.image.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    }
    errs.extend(validate_choice(
        c.termination_message_policy.as_deref(),
        &["File", "FallbackToLogsOnError"],
        &path.child("terminationMessagePolicy"),
    ));
    errs.extend(validate_ports(
        c.ports.as_deref().unwrap_or_default(),
        &path.child("ports"),
    ));
    errs.extend(validate_env(
        c.env.as_deref().unwrap_or_default(),
        &path.child("env"),
    ));
    errs.extend(validate_env_from(
        c.env_from.as_deref().unwrap_or_default(),
        &path.child("envFrom"),
    ));
    errs.extend(validate_volume_mounts(
        c,
        volumes,
        &path.child("volumeMounts"),
    ));
    errs.extend(validate_choice(
        c.image_pull_policy.as_deref(),
        &["Always", "IfNotPresent", "Never"],
        &path.child("imagePullPolicy"),
    ));
    if let Some(r) = &c.resources {
        errs.extend(validate_resources(r, &path.child("resources")));
    }
    if let Some(sc) = &c.security_context {
        errs.extend(validate_security_context(
            sc,
            &path.child("securityContext"),
        ));
    }
    errs
}

fn validate_ports(ports: &[ContainerPort], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let ip = path.index(i);
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = port_name(name);
            if !msgs.is_empty() {
                errs.extend(each_invalid(&ip.child("name"), name, msgs));
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(&ip.child("name"), name));
            }
        }
        if p.container_port == 0 {
            errs.push(FieldError::required(&ip.child("containerPort"), ""));
        } else {
            for m in port_num(p.container_port.into()) {
                errs.push(FieldError::invalid(
                    &ip.child("containerPort"),
                    p.container_port,
                    m,
                ));
            }
        }
        if let Some(hp) = p.host_port.filter(|h| *h != 0) {
            for m in port_num(hp.into()) {
                errs.push(FieldError::invalid(&ip.child("hostPort"), hp, m));
            }
        }
        errs.extend(validate_choice(
            p.protocol.as_deref(),
            &["SCTP", "TCP", "UDP"],
            &ip.child("protocol"),
        ));
    }
    errs
}

/// Host ports must be unique per protocol and host IP across the given containers.
pub(crate) fn host_port_conflicts<'a>(
    containers: impl Iterator<Item = (usize, &'a Container)>,
    path: &Path,
    seen: &mut BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (ci, c) in containers {
        for (pi, p) in c.ports.iter().flatten().enumerate() {
            let Some(hp) = p.host_port.filter(|h| *h != 0) else {
                continue;
            };
            let key = format!(
                "{}/{}/{hp}",
                p.protocol.as_deref().unwrap_or_default(),
                p.host_ip.as_deref().unwrap_or_default()
            );
            if !seen.insert(key.clone()) {
                let fp = path.index(ci).child("ports").index(pi).child("hostPort");
                errs.push(FieldError::duplicate(&fp, key));
            }
        }
    }
    errs
}

fn validate_env(vars: &[EnvVar], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let ip = path.index(i);
        errs.extend(required_name(&ip.child("name"), &ev.name, env_var_name));
        let Some(src) = &ev.value_from else { continue };
        let vp = ip.child("valueFrom");
        let mut sources = 0;
        if let Some(f) = &src.field_ref {
            sources += 1;
            errs.extend(validate_field_ref(
                f,
                ENV_FIELD_PATHS,
                &vp.child("fieldRef"),
            ));
        }
        if let Some(r) = &src.resource_field_ref {
            sources += 1;
            let rp = vp.child("resourceFieldRef");
            if r.resource.is_empty() {
                errs.push(FieldError::required(&rp.child("resource"), ""));
            } else if !RESOURCE_FIELD_PATHS.contains(&r.resource.as_str())
                && !r.resource.starts_with("limits.hugepages-")
                && !r.resource.starts_with("requests.hugepages-")
            {
                errs.push(FieldError::not_supported(
                    &rp.child("resource"),
                    r.resource.as_str(),
                    RESOURCE_FIELD_PATHS,
                ));
            }
        }
        let key_refs = [
            (
                "configMapKeyRef",
                src.config_map_key_ref.as_ref().map(|k| (&k.name, &k.key)),
            ),
            (
                "secretKeyRef",
                src.secret_key_ref.as_ref().map(|k| (&k.name, &k.key)),
            ),
        ];
        for (field, key_ref) in key_refs {
            if let Some((name, key)) = key_ref {
                sources += 1;
                errs.extend(validate_key_selector(name, key, &vp.child(field)));
            }
        }
        if sources == 0 {
            errs.push(FieldError::invalid(&vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"));
        } else if ev.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                &vp,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &vp,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

/// A downward-API `fieldRef`: labels/annotations need a subscript, others must be listed.
pub(crate) fn validate_field_ref(
    f: &ObjectFieldSelector,
    allowed: &[&str],
    path: &Path,
) -> Vec<FieldError> {
    let field_path = f.field_path.as_str();
    if f.api_version.as_deref().unwrap_or_default().is_empty() {
        return vec![FieldError::required(&path.child("apiVersion"), "")];
    }
    if field_path.is_empty() {
        return vec![FieldError::required(&path.child("fieldPath"), "")];
    }
    if let Some((base, rest)) = field_path.split_once("['") {
        let subscript = rest.strip_suffix("']").unwrap_or(rest);
        return match base {
            "metadata.annotations" => {
                each_invalid(path, subscript, qualified_name(&subscript.to_lowercase()))
            }
            "metadata.labels" => each_invalid(path, subscript, qualified_name(subscript)),
            other => vec![FieldError::invalid(
                path,
                other,
                "does not support subscript",
            )],
        };
    }
    if allowed.contains(&field_path) {
        Vec::new()
    } else {
        vec![FieldError::not_supported(
            &path.child("fieldPath"),
            field_path,
            allowed,
        )]
    }
}

fn validate_key_selector(name: &str, key: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = each_invalid(&path.child("name"), name, dns1123_subdomain(name));
    errs.extend(required_name(&path.child("key"), key, config_map_key));
    errs
}

fn validate_env_from(sources: &[EnvFromSource], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let ip = path.index(i);
        if let Some(prefix) = s.prefix.as_deref().filter(|p| !p.is_empty()) {
            errs.extend(each_invalid(
                &ip.child("prefix"),
                prefix,
                env_var_name(prefix),
            ));
        }
        let refs = [
            (
                "configMapRef",
                s.config_map_ref.as_ref().map(|r| r.name.as_str()),
            ),
            ("secretRef", s.secret_ref.as_ref().map(|r| r.name.as_str())),
        ];
        let mut count = 0;
        for (field, name) in refs {
            let Some(name) = name else { continue };
            count += 1;
            errs.extend(required_name(
                &ip.child(field).child("name"),
                name,
                dns1123_subdomain,
            ));
        }
        if count == 0 {
            errs.push(FieldError::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if count > 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

fn validate_volume_mounts(
    c: &Container,
    volumes: &BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let ip = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(&ip.child("name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(FieldError::not_found(&ip.child("name"), m.name.as_str()));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(&ip.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                &ip.child("mountPath"),
                m.mount_path.as_str(),
                "must be unique",
            ));
        }
        let sub = m.sub_path.as_deref().unwrap_or_default();
        if !sub.is_empty() {
            errs.extend(super::volume::local_descending_path(
                sub,
                &path.child("subPath"),
            ));
        }
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if !sub.is_empty() {
                errs.push(FieldError::invalid(
                    &ip.child("subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            errs.extend(super::volume::local_descending_path(
                expr,
                &path.child("subPathExpr"),
            ));
        }
        if let Some(mp) = m.mount_propagation.as_deref() {
            let pp = path.child("mountPropagation");
            errs.extend(validate_optional_choice(
                Some(mp),
                &["Bidirectional", "HostToContainer", "None"],
                &pp,
            ));
            let privileged = c.security_context.as_ref().and_then(|s| s.privileged) == Some(true);
            if mp == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &pp,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn container(v: serde_json::Value) -> Container {
        serde_json::from_value(v).unwrap()
    }

    fn check(v: serde_json::Value, volumes: &[&str]) -> Vec<String> {
        let mut c = container(v);
        c.termination_message_policy.get_or_insert("File".into());
        c.image_pull_policy.get_or_insert("Always".into());
        let vols = volumes.iter().map(|s| s.to_string()).collect();
        error_messages(&validate_container_common(&c, &vols, &Path::new("c")))
    }

    #[test]
    fn valid_containers_pass() {
        let errs = check(
            json!({"name": "web", "image": "nginx",
            "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
            "env": [{"name": "A", "value": "1"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}}),
            &["data"],
        );
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn container_rules_report_upstream_messages() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (json!({"name": "web"}), "c.image: Required value"),
            (json!({"name": "", "image": "x"}), "c.name: Required value"),
            (
                json!({"name": "Web", "image": "x"}),
                "c.name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
            (
                json!({"name": "w", "image": "x", "ports": [{"containerPort": 70000, "protocol": "TCP"}]}),
                "c.ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                json!({"name": "w", "image": "x", "ports": [{"containerPort": 0, "protocol": "TCP"}]}),
                "c.ports[0].containerPort: Required value",
            ),
            (
                json!({"name": "w", "image": "x", "ports": [{"containerPort": 1, "protocol": "HTTP"}]}),
                "c.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ),
            (
                json!({"name": "w", "image": "x", "ports": [{"containerPort": 1, "hostPort": 70000, "protocol": "TCP"}]}),
                "c.ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                json!({"name": "w", "image": "x", "ports": [{"containerPort": 1, "protocol": "TCP", "name": "a"}, {"containerPort": 2, "protocol": "TCP", "name": "a"}]}),
                "c.ports[1].name: Duplicate value: \"a\"",
            ),
            (
                json!({"name": "w", "image": "x", "env": [{"name": "A", "valueFrom": {}}]}),
                "c.env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ),
            (
                json!({"name": "w", "image": "x", "env": [{"name": "A", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
                "c.env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
            ),
            (
                json!({"name": "w", "image": "x", "env": [{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.foo"}}}]}),
                "c.env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.foo\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"",
            ),
            (
                json!({"name": "w", "image": "x", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}),
                "c.volumeMounts[0].name: Not found: \"nope\"",
            ),
            (
                json!({"name": "w", "image": "x", "volumeMounts": [{"name": "v", "mountPath": ""}]}),
                "c.volumeMounts[0].mountPath: Required value",
            ),
            (
                json!({"name": "w", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}]}),
                "c.volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique",
            ),
            (
                json!({"name": "w", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
                "c.resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            ),
            (
                json!({"name": "w", "image": "x", "resources": {"limits": {"memory": "-1Gi"}}}),
                "c.resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ),
            (
                json!({"name": "w", "image": "x", "resources": {"limits": {"cpu": "lots"}}}),
                "c.resources.limits[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                json!({"name": "w", "image": "x", "resources": {"limits": {"gpu": "1"}}}),
                "c.resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
            ),
            (
                json!({"name": "w", "image": "x", "resources": {"requests": {"example.com/dev": "1"}}}),
                "c.resources.limits: Required value: Limit must be set for non overcommitable resources",
            ),
            (
                json!({"name": "w", "image": "x", "securityContext": {"runAsUser": -1}}),
                "c.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            ),
        ];
        for (c, want) in cases {
            let errs = check(c.clone(), &["v"]);
            assert!(errs.iter().any(|e| e == want), "{c}: got {errs:?}");
        }
    }

    #[test]
    fn env_names_must_be_valid() {
        let errs = check(
            json!({"name": "w", "image": "x", "env": [{"name": "1A", "value": "x"}, {"name": ""}]}),
            &[],
        );
        assert_eq!(errs.len(), 2);
        assert!(errs[0].starts_with(
            "c.env[0].name: Invalid value: \"1A\": a valid environment variable name"
        ));
        assert_eq!(errs[1], "c.env[1].name: Required value");
    }

    #[test]
    fn duplicate_host_ports_conflict() {
        let a = container(
            json!({"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}),
        );
        let b = container(
            json!({"name": "b", "ports": [{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}]}),
        );
        let errs = host_port_conflicts(
            [&a, &b].into_iter().enumerate(),
            &Path::new("spec").child("containers"),
            &mut BTreeSet::new(),
        );
        assert_eq!(
            errs[0].message(),
            "spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\""
        );
    }
}
