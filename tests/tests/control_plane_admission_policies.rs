//! ValidatingAdmissionPolicies with the real kubectl (the default one and 1.27): a policy that
//! allows at most 5 replicas to Deployments in namespaces labelled `env=test` refuses a
//! bigger one there with upstream's message and lets it through elsewhere; with
//! `validationActions: [Warn]` the write goes through and kubectl prints the warning; a
//! policy with a ConfigMap as its `paramKind` reads its limit from it; and deleting the
//! binding lifts the policy within a couple of seconds (the cache follows the informer).

use std::path::Path;
use std::time::{Duration, Instant};

use berth_tests::{Controller, Kubectl, Run, Table};

const KUBECTL_1_27: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";

fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: web
        image: nginx:1.14.2
"
    )
}

const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-replicas
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
    message: replicas must be at most 5
";

fn binding(name: &str, action: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: max-replicas
  validationActions: [{action}]
  matchResources:
    namespaceSelector:
      matchLabels:
        env: test
"
    )
}

/// Namespaces `vap-test` (labelled `env=test`) and `vap-prod`.
fn namespaces(c: &Controller) {
    c.kubectl_ok(&["create", "namespace", "vap-test"]);
    c.kubectl_ok(&["label", "namespace", "vap-test", "env=test"]);
    c.kubectl_ok(&["create", "namespace", "vap-prod"]);
}

/// Waits until a server-side dry run of a 6-replica Deployment in `vap-test` is refused:
/// the binding has reached the cache.
fn wait_until_enforced(c: &Controller) {
    wait_for_dry_run(c, Duration::from_secs(10), "the policy to apply", 6, |r| {
        !r.success()
    });
}

/// Waits until a server-side dry run of a Deployment with `replicas` in `vap-test` gets the
/// answer `answered` looks for: policies and bindings reach the cache through the informer.
fn wait_for_dry_run(
    c: &Controller,
    deadline: Duration,
    what: &str,
    replicas: u32,
    answered: impl Fn(&Run) -> bool,
) {
    c.wait_for(deadline, what, || {
        let r = c.kubectl().run_stdin(
            &["apply", "--dry-run=server", "-n", "vap-test", "-f", "-"],
            &deployment("probe", replicas),
        );
        if answered(&r) {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
}

#[test]
fn a_deny_policy_refuses_big_deployments_in_test_namespaces_only() {
    let c = Controller::start();
    namespaces(&c);
    c.apply_stdin(POLICY);
    c.apply_stdin(&binding("max-replicas-test", "Deny"));
    wait_until_enforced(&c);
    let denied = "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-test' \
                  denied request: replicas must be at most 5";

    for kubectl in [
        c.kubectl(),
        c.kubectl().with_binary(Path::new(KUBECTL_1_27)),
    ] {
        // apply: upstream answers 422 Invalid with the denial as the one cause, which kubectl
        // prints as `The deployments "web" is invalid: : <denial>`.
        let r = kubectl.fails_stdin(
            &["apply", "-n", "vap-test", "-f", "-"],
            &deployment("web", 6),
        );
        assert!(
            r.stderr
                .contains(&format!("The deployments \"web\" is invalid: : {denied}")),
            "{}",
            r.describe()
        );
        // create: kubectl prints the Status message, admission's `is forbidden` wording.
        let r = kubectl.fails(&[
            "create",
            "deployment",
            "big",
            "--image=nginx:1.14.2",
            "--replicas=6",
            "-n",
            "vap-test",
        ]);
        assert!(
            r.stderr
                .contains(&format!("deployments.apps \"big\" is forbidden: {denied}")),
            "{}",
            r.describe()
        );
    }
    c.kubectl().ok_stdin(
        &["apply", "-n", "vap-prod", "-f", "-"],
        &deployment("web", 6),
    );
    c.kubectl().ok_stdin(
        &["apply", "-n", "vap-test", "-f", "-"],
        &deployment("web", 5),
    );
    // An update past the limit is refused as well.
    let r = c.kubectl().fails(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "vap-test",
        "-p",
        r#"{"spec":{"replicas":7}}"#,
    ]);
    assert!(r.stderr.contains(denied), "{}", r.describe());
    let replicas = c.kubectl_ok(&[
        "get",
        "deployment",
        "web",
        "-n",
        "vap-test",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas, "5");

    // Without its binding the policy applies nowhere, as soon as the informer says so.
    c.kubectl_ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "max-replicas-test",
    ]);
    let start = Instant::now();
    c.wait_for(Duration::from_secs(5), "the policy to be lifted", || {
        let r = c.kubectl().run_stdin(
            &["apply", "-n", "vap-test", "-f", "-"],
            &deployment("after", 6),
        );
        if r.success() { Ok(()) } else { Err(r.stderr) }
    });
    let lifted = start.elapsed();
    println!("policy lifted {lifted:?} after its binding was deleted (kubectl runs included)");
    assert!(lifted < Duration::from_secs(3), "{lifted:?}");
}

#[test]
fn a_warn_policy_admits_and_kubectl_prints_the_warning() {
    let c = Controller::start();
    namespaces(&c);
    c.apply_stdin(POLICY);
    c.apply_stdin(&binding("max-replicas-warn", "Warn"));
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with \
                   binding 'max-replicas-warn': replicas must be at most 5";
    wait_for_dry_run(&c, Duration::from_secs(10), "the warning", 6, |r| {
        r.success() && r.stderr.contains(warning)
    });
    for (i, kubectl) in [
        c.kubectl(),
        c.kubectl().with_binary(Path::new(KUBECTL_1_27)),
    ]
    .iter()
    .enumerate()
    {
        let name = format!("web-{i}");
        let r = kubectl.run_stdin(
            &["apply", "-n", "vap-test", "-f", "-"],
            &deployment(&name, 6),
        );
        assert!(r.success(), "{}", r.describe());
        assert!(r.stderr.contains(warning), "{}", r.describe());
        assert!(
            r.stdout
                .contains(&format!("deployment.apps/{name} created")),
            "{}",
            r.describe()
        );
        // Elsewhere nothing is said.
        let r = kubectl.run_stdin(
            &["apply", "-n", "vap-prod", "-f", "-"],
            &deployment(&name, 6),
        );
        assert!(
            r.success() && !r.stderr.contains("Warning"),
            "{}",
            r.describe()
        );
    }
    // A changed policy (kubectl apply patches it) is in force at the next write.
    let out = c.apply_stdin(&POLICY.replace(
        "message: replicas must be at most 5",
        "message: five replicas at most",
    ));
    assert!(
        out.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/max-replicas configured"
        ),
        "{out}"
    );
    let changed = "Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with \
                   binding 'max-replicas-warn': five replicas at most";
    wait_for_dry_run(&c, Duration::from_secs(5), "the changed message", 6, |r| {
        r.success() && r.stderr.contains(changed)
    });
}

#[test]
fn a_policy_reads_its_limit_from_a_config_map_parameter() {
    let c = Controller::start();
    namespaces(&c);
    let k: Kubectl = c.kubectl();
    k.ok(&[
        "create",
        "configmap",
        "replica-limit",
        "-n",
        "vap-test",
        "--from-literal=max=3",
    ]);
    c.apply_stdin(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: max
    expression: int(params.data.max)
  validations:
  - expression: object.spec.replicas <= variables.max
    reason: Forbidden
    messageExpression: \"'at most ' + params.data.max + ' replicas in ' + namespaceObject.metadata.name + ', asked by ' + request.userInfo.username\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef:
    name: replica-limit
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        env: test
",
    );
    // Upstream's printers.
    let printed = [
        (
            "validatingadmissionpolicies",
            ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
            [("VALIDATIONS", "1"), ("PARAMKIND", "v1/ConfigMap")],
        ),
        (
            "validatingadmissionpolicybindings",
            ["NAME", "POLICYNAME", "PARAMREF", "AGE"],
            [
                ("POLICYNAME", "replica-limit"),
                ("PARAMREF", "*/replica-limit"),
            ],
        ),
    ];
    for kubectl in [k.clone(), k.clone().with_binary(Path::new(KUBECTL_1_27))] {
        for (resource, headers, cells) in &printed {
            let out = kubectl.ok(&["get", resource]);
            let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.headers, *headers, "{out}");
            for (column, want) in cells {
                assert_eq!(t.cell("replica-limit", column), Some(*want), "{out}");
            }
        }
    }
    wait_for_dry_run(
        &c,
        Duration::from_secs(10),
        "the parameterised policy",
        4,
        |r| !r.success(),
    );
    let r = k.fails_stdin(
        &["apply", "-n", "vap-test", "-f", "-"],
        &deployment("web", 4),
    );
    // reason Forbidden: 403, printed by kubectl as the Status message.
    assert!(
        r.stderr.contains(
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' \
             with binding 'replica-limit' denied request: at most 3 replicas in vap-test, asked by"
        ),
        "{}",
        r.describe()
    );
    k.ok_stdin(
        &["apply", "-n", "vap-test", "-f", "-"],
        &deployment("web", 3),
    );
    // The parameter is read on each request: raising it admits at once.
    k.ok(&[
        "patch",
        "configmap",
        "replica-limit",
        "-n",
        "vap-test",
        "-p",
        r#"{"data":{"max":"4"}}"#,
    ]);
    k.ok_stdin(
        &["apply", "-n", "vap-test", "-f", "-"],
        &deployment("web", 4),
    );
    // Without the parameter object, `parameterNotFoundAction: Deny` refuses.
    k.ok(&["delete", "configmap", "replica-limit", "-n", "vap-test"]);
    let r = k.fails_stdin(
        &["apply", "-n", "vap-test", "-f", "-"],
        &deployment("other", 1),
    );
    assert!(
        r.stderr.contains(
            "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        r.describe()
    );
}

#[test]
fn invalid_policies_are_refused_with_upstream_messages() {
    let c = Controller::start();
    let cases: [(&str, &[&str]); 2] = [
        (
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: broken
spec:
  failurePolicy: Sometimes
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: 'object.spec.replicas <='
",
            &[
                "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
                "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ",
            ],
        ),
        (
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: broken
spec:
  policyName: p
  validationActions: [Deny, Warn]
",
            &["must not contain both Deny and Warn"],
        ),
    ];
    for (manifest, wants) in cases {
        let r = c.kubectl().fails_stdin(&["apply", "-f", "-"], manifest);
        for want in wants {
            assert!(r.stderr.contains(want), "{}", r.describe());
        }
    }
}

#[test]
fn a_delete_is_judged_with_the_user_who_makes_it() {
    let c = Controller::start();
    c.apply_stdin(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: keep-protected
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ['']
      apiVersions: [v1]
      operations: [DELETE]
      resources: [configmaps]
    objectSelector:
      matchLabels:
        protected: 'true'
  validations:
  - expression: 'false'
    messageExpression: \"request.userInfo.username + ' may not delete ' + oldObject.metadata.name\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: keep-protected
spec:
  policyName: keep-protected
  validationActions: [Deny]
",
    );
    let k = c.kubectl();
    for name in ["kept", "free"] {
        k.ok(&["create", "configmap", name, "--from-literal=a=b"]);
    }
    k.ok(&["label", "configmap", "kept", "protected=true"]);
    let whoami = k.ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    let want = format!(
        "ValidatingAdmissionPolicy 'keep-protected' with binding 'keep-protected' denied \
         request: {whoami} may not delete kept"
    );
    c.wait_for(Duration::from_secs(10), "the delete to be refused", || {
        let r = k.run(&["delete", "configmap", "kept", "--dry-run=server"]);
        if !r.success() && r.stderr.contains(&want) {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
    let r = k.fails(&["delete", "configmap", "kept"]);
    assert!(r.stderr.contains(&want), "{}", r.describe());
    k.ok(&["delete", "configmap", "free"]);
    k.ok(&["get", "configmap", "kept"]);
}
