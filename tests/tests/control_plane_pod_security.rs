//! Issue 30, acceptance 8: Pod Security admission. A namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted` refuses a privileged pod with upstream's
//! message (kubectl 1.33 and Debian's 1.20) and admits a restricted-compliant one;
//! `warn=baseline` lets the privileged pod in with kubectl printing the warning, and `audit`
//! logs it (Berth has no audit log); a Deployment in a restricted namespace is created with a
//! warning and its ReplicaSet reports `FailedCreate` for each refused pod;
//! `--pod-security-default baseline` refuses privileged pods in unlabelled namespaces, except
//! in an exempt one; raising `enforce` warns about the pods already there, and a label that is
//! no level is refused.

use berth_tests::Controller;
use berth_tests::kubectl::{Kubectl, kubectl_1_20};
use std::path::PathBuf;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Runs `kubectl args` until `done` accepts its output (for [`WAIT`] at most); returns that
/// output.
fn wait_output(
    c: &Controller,
    k: &Kubectl,
    what: &str,
    args: &[&str],
    done: impl Fn(&str) -> bool,
) -> String {
    c.wait_for(WAIT, what, || {
        let out = k.ok(args);
        if done(&out) { Ok(out) } else { Err(out) }
    })
}

fn kubectl_1_33() -> PathBuf {
    PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
}

fn privileged_pod(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  \
         containers:\n  - name: c\n    image: busybox:1.28\n    securityContext:\n      \
         privileged: true\n"
    )
}

/// A pod that meets every restricted check.
fn restricted_pod(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  \
         securityContext:\n    runAsNonRoot: true\n    runAsUser: 1000\n    seccompProfile:\n      \
         type: RuntimeDefault\n  containers:\n  - name: c\n    image: busybox:1.28\n    \
         securityContext:\n      allowPrivilegeEscalation: false\n      capabilities:\n        \
         drop: [ALL]\n"
    )
}

const PRIVILEGED_VS_RESTRICTED: &str = r#"violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

const PRIVILEGED_VS_BASELINE: &str = r#"would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#;

fn labelled_namespace(k: &Kubectl, ns: &str, label: &str) {
    k.ok(&["create", "namespace", ns]);
    k.ok(&["label", "namespace", ns, label]);
}

fn enforce_and_warn(bin: PathBuf, tag: &str) {
    let c = Controller::start();
    let k = c.kubectl().with_binary(&bin);

    let strict = format!("psa-restricted-{tag}");
    labelled_namespace(&k, &strict, "pod-security.kubernetes.io/enforce=restricted");
    let refused = k.fails_stdin(&["apply", "-f", "-"], &privileged_pod("priv", &strict));
    let want = format!(
        r#"Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: {PRIVILEGED_VS_RESTRICTED}"#
    );
    assert!(refused.stderr.contains(&want), "{}", refused.describe());
    // Refused, so no warning as well.
    assert!(
        !refused.stderr.contains("Warning:"),
        "{}",
        refused.describe()
    );
    let none = k.run(&["get", "pod", "priv", "-n", &strict]);
    assert!(!none.success(), "{}", none.describe());
    // A pod that meets restricted is admitted, without warnings.
    let admitted = k.run_stdin(&["apply", "-f", "-"], &restricted_pod("tight", &strict));
    assert!(admitted.success(), "{}", admitted.describe());
    assert!(
        !admitted.stderr.contains("Warning:"),
        "{}",
        admitted.describe()
    );

    let warned = format!("psa-warn-{tag}");
    labelled_namespace(&k, &warned, "pod-security.kubernetes.io/warn=baseline");
    let r = k.run_stdin(&["apply", "-f", "-"], &privileged_pod("priv", &warned));
    assert!(r.success(), "{}", r.describe());
    r.assert_stderr_has(&format!("Warning: {PRIVILEGED_VS_BASELINE}"));
    k.ok(&["get", "pod", "priv", "-n", &warned]);

    // Berth has no audit log: audit violations are logged by the controller.
    let audited = format!("psa-audit-{tag}");
    labelled_namespace(&k, &audited, "pod-security.kubernetes.io/audit=baseline");
    let r = k.run_stdin(&["apply", "-f", "-"], &privileged_pod("priv", &audited));
    assert!(
        r.success() && !r.stderr.contains("Warning:"),
        "{}",
        r.describe()
    );
    c.wait_for(WAIT, "the audit line in the controller's log", || {
        let log = [c.stderr_log(), c.stdout_log()]
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect::<String>();
        let found = log.lines().any(|l| {
            l.contains("pod_security_audit")
                && l.contains(&audited)
                && l.contains(PRIVILEGED_VS_BASELINE)
        });
        if found { Ok(()) } else { Err(c.log_tail()) }
    });
}

#[test]
fn enforce_refuses_and_warn_warns_with_kubectl_1_33() {
    enforce_and_warn(kubectl_1_33(), "133");
}

#[test]
fn enforce_refuses_and_warn_warns_with_kubectl_1_20() {
    enforce_and_warn(kubectl_1_20(), "120");
}

#[test]
fn a_deployment_in_a_restricted_namespace_warns_and_its_pods_fail_to_create() {
    let c = Controller::start();
    let k = c.kubectl().with_binary(&kubectl_1_33());
    let ns = "psa-deploy";
    labelled_namespace(&k, ns, "pod-security.kubernetes.io/enforce=restricted");
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
         spec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    \
         metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: c\n        \
         image: busybox:1.28\n        securityContext:\n          privileged: true\n"
    );
    let r = k.run_stdin(&["apply", "-f", "-"], &deployment);
    assert!(r.success(), "{}", r.describe());
    // Upstream's warn level follows an explicit, stricter enforce level.
    let warning = PRIVILEGED_VS_RESTRICTED.replacen("violates", "Warning: would violate", 1);
    assert!(r.stderr.contains(&warning), "{}", r.describe());

    let rs = wait_output(
        &c,
        &k,
        "the deployment's ReplicaSet",
        &[
            "get",
            "rs",
            "-n",
            ns,
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
        |out| !out.trim().is_empty(),
    )
    .trim()
    .to_string();
    let events = wait_output(
        &c,
        &k,
        "a FailedCreate event on the ReplicaSet",
        &[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            &format!("involvedObject.kind=ReplicaSet,involvedObject.name={rs}"),
            "-o",
            "custom-columns=REASON:.reason,MESSAGE:.message",
        ],
        |out| out.contains("FailedCreate"),
    );
    let line = events
        .lines()
        .find(|l| l.starts_with("FailedCreate"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!(r#"Error creating: pods "{rs}-"#))
            && line.ends_with(&format!("is forbidden: {PRIVILEGED_VS_RESTRICTED}")),
        "{events}"
    );
    let pods = k.ok(&["get", "pods", "-n", ns, "-o", "name"]);
    assert!(pods.trim().is_empty(), "{pods}");
}

#[test]
fn the_default_level_applies_to_unlabelled_namespaces_but_not_exempt_ones() {
    let c = Controller::start_with(&[
        "--pod-security-default",
        "baseline",
        "--pod-security-exempt-namespaces",
        "psa-exempt",
    ]);
    let k = c.kubectl().with_binary(&kubectl_1_33());
    k.ok(&["create", "namespace", "psa-plain"]);
    let r = k.fails_stdin(&["apply", "-f", "-"], &privileged_pod("priv", "psa-plain"));
    r.assert_stderr_has(r#"pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#);
    k.ok(&["create", "namespace", "psa-exempt"]);
    let r = k.run_stdin(&["apply", "-f", "-"], &privileged_pod("priv", "psa-exempt"));
    assert!(
        r.success() && !r.stderr.contains("Warning:"),
        "{}",
        r.describe()
    );
    // A namespace may still ask for privileged.
    labelled_namespace(
        &k,
        "psa-open",
        "pod-security.kubernetes.io/enforce=privileged",
    );
    let r = k.run_stdin(&["apply", "-f", "-"], &privileged_pod("priv", "psa-open"));
    assert!(r.success(), "{}", r.describe());
}

#[test]
fn raising_enforce_warns_about_existing_pods_and_bad_labels_are_refused() {
    let c = Controller::start();
    let k = c.kubectl().with_binary(&kubectl_1_33());
    let ns = "psa-existing";
    k.ok(&["create", "namespace", ns]);
    k.ok_stdin(&["apply", "-f", "-"], &privileged_pod("priv", ns));
    let r = k.run(&[
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(r.success(), "{}", r.describe());
    for want in [
        r#"Warning: existing pods in namespace "psa-existing" violate the new PodSecurity enforce level "baseline:latest""#,
        "Warning: priv: privileged",
    ] {
        assert!(r.stderr.contains(want), "{want}\n{}", r.describe());
    }
    let r = k.fails(&[
        "label",
        "namespace",
        ns,
        "--overwrite",
        "pod-security.kubernetes.io/enforce=bogus",
    ]);
    r.assert_stderr_has(r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted"#);
}
