//! Ephemeral containers, which only the `pods/ephemeralcontainers` subresource adds: upstream's
//! defaults for them, `validateEphemeralContainers` (the container rules, unique names, a
//! target container that exists, and the fields an ephemeral container may not have) and
//! `ValidatePodEphemeralContainersUpdate` (once added, never changed or removed).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, PodSpec};

use super::container::validate_container_common;
use super::defaults::pull_policy_for;
use super::field::{FieldError, Path};

/// The kubelet-facing defaults every container gets (pull policy, termination message).
pub(crate) fn default_ephemeral_containers(spec: &mut PodSpec) {
    for ec in spec.ephemeral_containers.iter_mut().flatten() {
        if ec.image_pull_policy.as_deref().is_none_or(str::is_empty) {
            let policy = pull_policy_for(ec.image.as_deref().unwrap_or_default());
            ec.image_pull_policy = Some(policy.to_string());
        }
        for (field, value) in [
            (&mut ec.termination_message_path, "/dev/termination-log"),
            (&mut ec.termination_message_policy, "File"),
        ] {
            if field.as_deref().is_none_or(str::is_empty) {
                *field = Some(value.to_string());
            }
        }
    }
}

/// The checks of a pod update's ephemeral containers against the stored pod's.
pub(crate) fn validate_ephemeral_containers(new: &PodSpec, old: &PodSpec) -> Vec<FieldError> {
    let path = Path::new("spec").child("ephemeralContainers");
    let list = new.ephemeral_containers.as_deref().unwrap_or_default();
    let mut errs = Vec::new();
    let volumes: BTreeSet<String> = new
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect();
    let targets: BTreeSet<&str> = new
        .containers
        .iter()
        .chain(new.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    let mut names: BTreeSet<&str> = targets.clone();
    for (i, ec) in list.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_container_common(&as_container(ec), &volumes, &p));
        if !ec.name.is_empty() && !names.insert(ec.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), ec.name.as_str()));
        }
        errs.extend(disallowed_fields(ec, &p));
        if let Some(t) = ec
            .target_container_name
            .as_deref()
            .filter(|t| !t.is_empty())
            && !targets.contains(t)
        {
            errs.push(FieldError::not_found(&p.child("targetContainerName"), t));
        }
    }
    for before in old.ephemeral_containers.iter().flatten() {
        match list.iter().find(|e| e.name == before.name) {
            None => errs.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {:?} may not be removed\n",
                    before.name
                ),
            )),
            Some(now) if now != before => errs.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {:?} may not be changed\n",
                    before.name
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}

/// The same fields read as a [`Container`], for the rules all containers share.
fn as_container(ec: &EphemeralContainer) -> Container {
    Container {
        name: ec.name.clone(),
        image: ec.image.clone(),
        image_pull_policy: ec.image_pull_policy.clone(),
        command: ec.command.clone(),
        args: ec.args.clone(),
        working_dir: ec.working_dir.clone(),
        env: ec.env.clone(),
        env_from: ec.env_from.clone(),
        volume_mounts: ec.volume_mounts.clone(),
        volume_devices: ec.volume_devices.clone(),
        security_context: ec.security_context.clone(),
        stdin: ec.stdin,
        stdin_once: ec.stdin_once,
        tty: ec.tty,
        termination_message_path: ec.termination_message_path.clone(),
        termination_message_policy: ec.termination_message_policy.clone(),
        ..Default::default()
    }
}

/// Upstream's allow list, seen from the other side: what an ephemeral container may not set
/// (it gets no guarantees, so nothing that would promise any).
fn disallowed_fields(ec: &EphemeralContainer, p: &Path) -> Vec<FieldError> {
    let resources = ec.resources.as_ref().is_some_and(|r| {
        r.limits.as_ref().is_some_and(|l| !l.is_empty())
            || r.requests.as_ref().is_some_and(|q| !q.is_empty())
            || r.claims.as_ref().is_some_and(|c| !c.is_empty())
    });
    [
        ("ports", ec.ports.as_ref().is_some_and(|v| !v.is_empty())),
        ("livenessProbe", ec.liveness_probe.is_some()),
        ("readinessProbe", ec.readiness_probe.is_some()),
        ("startupProbe", ec.startup_probe.is_some()),
        ("lifecycle", ec.lifecycle.is_some()),
        ("resources", resources),
        (
            "resizePolicy",
            ec.resize_policy.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        ("restartPolicy", ec.restart_policy.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(field, _)| {
        FieldError::forbidden(&p.child(field), "cannot be set for an Ephemeral Container")
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::{Value, json};

    fn spec(ephemeral: Value) -> PodSpec {
        serde_json::from_value(json!({
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": ephemeral,
        }))
        .unwrap()
    }

    fn messages(new: &PodSpec, old: &PodSpec) -> Vec<String> {
        let mut new = new.clone();
        default_ephemeral_containers(&mut new);
        let mut old = old.clone();
        default_ephemeral_containers(&mut old);
        error_messages(&validate_ephemeral_containers(&new, &old))
    }

    #[test]
    fn a_debugger_targeting_a_container_is_added() {
        let new = spec(json!([{"name": "debugger", "image": "busybox",
                               "targetContainerName": "app", "stdin": true, "tty": true}]));
        assert_eq!(messages(&new, &spec(json!([]))), Vec::<String>::new());
    }

    #[test]
    fn ports_probes_and_resources_are_refused_naming_the_field() {
        let new = spec(json!([{"name": "debugger", "image": "busybox",
            "ports": [{"containerPort": 80}],
            "readinessProbe": {"exec": {"command": ["true"]}},
            "resources": {"limits": {"cpu": "1"}}}]));
        assert_eq!(
            messages(&new, &spec(json!([]))),
            vec![
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
    }

    #[test]
    fn names_are_unique_across_all_containers_and_targets_must_exist() {
        let new = spec(json!([{"name": "app", "image": "busybox"},
                              {"name": "d", "image": "busybox", "targetContainerName": "nope"}]));
        assert_eq!(
            messages(&new, &spec(json!([]))),
            vec![
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
            ]
        );
    }

    #[test]
    fn an_added_ephemeral_container_is_never_changed_or_removed() {
        let old = spec(json!([{"name": "debugger", "image": "busybox"}]));
        let changed = spec(json!([{"name": "debugger", "image": "alpine"}]));
        assert_eq!(
            messages(&changed, &old),
            vec![
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
            ]
        );
        let removed = spec(json!([]));
        assert_eq!(
            messages(&removed, &old),
            vec![
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
            ]
        );
        let added = spec(json!([{"name": "debugger", "image": "busybox"},
                                {"name": "second", "image": "busybox"}]));
        assert_eq!(messages(&added, &old), Vec::<String>::new());
    }
}
