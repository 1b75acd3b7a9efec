//! End-to-end admission through the public entry points: decode, defaults, validation and the
//! encoded result, for each kind.

use super::*;
use serde_json::json;

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d-uid"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}})
}

fn invalid(kind: &str, op: Operation, mut obj: Value, old: Option<&Value>) -> Vec<String> {
    match admit(kind, op, &mut obj, old) {
        Err(AdmissionError::Invalid(errs)) => errs.iter().map(FieldError::message).collect(),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn admitted(kind: &str, mut obj: Value) -> Value {
    admit(kind, Operation::Create, &mut obj, None).unwrap();
    obj
}

#[test]
fn deployments_come_back_defaulted() {
    let d = admitted("Deployment", deployment());
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["spec"]["strategy"],
        json!({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"})
    );
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["securityContext"], json!({}));
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert!(
        pod.get("enableServiceLinks").is_none(),
        "templates do not get enableServiceLinks"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["resources"], json!({}));
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
}

#[test]
fn unknown_fields_are_pruned_from_the_result() {
    let mut d = deployment();
    d["spec"]["bogus"] = json!(true);
    let out = admitted("Deployment", d);
    assert!(out["spec"].get("bogus").is_none());
}

#[test]
fn common_messages_match_upstream() {
    let mut neg = deployment();
    neg["spec"]["replicas"] = json!(-1);
    let mut mismatch = deployment();
    mismatch["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let mut dup = deployment();
    dup["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "nginx", "image": "a"}, {"name": "nginx", "image": "b"}]);
    let mut no_image = deployment();
    no_image["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let mut bad_name = deployment();
    bad_name["metadata"]["name"] = json!("Web_1");
    let mut never = deployment();
    never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let mut zero = deployment();
    zero["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}});
    let cases = [
        (
            neg,
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            mismatch,
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
        ),
        (
            dup,
            "spec.template.spec.containers[1].name: Duplicate value: \"nginx\"",
        ),
        (
            no_image,
            "spec.template.spec.containers[0].image: Required value",
        ),
        (
            bad_name,
            "metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            never,
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            zero,
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
    ];
    for (obj, want) in cases {
        assert_eq!(
            invalid("Deployment", Operation::Create, obj, None),
            vec![want.to_string()]
        );
    }
}

#[test]
fn deployment_selectors_are_immutable() {
    let old = admitted("Deployment", deployment());
    let mut new = old.clone();
    new["spec"]["selector"]["matchLabels"]["app"] = json!("web2");
    new["spec"]["template"]["metadata"]["labels"]["app"] = json!("web2");
    assert_eq!(invalid("Deployment", Operation::Update, new, Some(&old)), vec![
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".to_string(),
    ]);
}

#[test]
fn updates_keep_the_stored_uid_when_omitted() {
    let old = admitted("Deployment", deployment());
    let mut new = deployment();
    new["metadata"].as_object_mut().unwrap().remove("uid");
    new["spec"]["replicas"] = json!(3);
    admit("Deployment", Operation::Update, &mut new, Some(&old)).unwrap();
    assert_eq!(new["metadata"]["uid"], "d-uid");
    assert_eq!(new["spec"]["replicas"], 3);
}

#[test]
fn invalid_bodies_are_left_untouched() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!(-1);
    let before = d.clone();
    assert!(admit("Deployment", Operation::Create, &mut d, None).is_err());
    assert_eq!(d, before);
}

#[test]
fn decode_errors_name_the_field_and_the_kind() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!("three");
    let err = admit("Deployment", Operation::Create, &mut d, None).unwrap_err();
    assert_eq!(err, AdmissionError::Decode(
        "Deployment in version \"v1\" cannot be handled as a Deployment: spec.replicas: invalid type: string \"three\", expected i32".into()));
    assert!(!err.is_transient());
}

#[test]
fn unknown_kinds_are_refused() {
    let mut v = json!({});
    assert!(matches!(
        admit("Widget", Operation::Create, &mut v, None),
        Err(AdmissionError::Decode(_))
    ));
}

#[test]
fn strict_decoding_lists_unknown_fields() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
    d["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
    d["metadata"]["annotations"] = json!({"anything/goes": "x"});
    assert_eq!(
        unknown_fields("Deployment", &d),
        vec!["unknown field \"spec.template.spec.containers[0].imagePullPolicyy\"".to_string(),]
    );
    assert!(unknown_fields("Deployment", &deployment()).is_empty());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}, "extra": {}});
    assert_eq!(
        unknown_fields("ConfigMap", &cm),
        vec!["unknown field \"extra\"".to_string()]
    );
}

#[test]
fn invalid_messages_aggregate_like_upstream() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["minReadySeconds"] = json!(-1);
    let err = admit("Deployment", Operation::Create, &mut d, None).unwrap_err();
    let AdmissionError::Invalid(errs) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        invalid_message("Deployment.apps", "web", errs),
        "Deployment.apps \"web\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0]"
    );
    assert_eq!(errs[0].reason(), "FieldValueInvalid");
    assert_eq!(
        errs[0].body(),
        "Invalid value: -1: must be greater than or equal to 0"
    );
}

fn job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}})
}

#[test]
fn jobs_get_a_selector_generated_from_their_uid() {
    let j = admitted("Job", job());
    assert_eq!(
        j["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}})
    );
    let want_labels = json!({"batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "pi",
        "controller-uid": "job-uid", "job-name": "pi"});
    assert_eq!(j["spec"]["template"]["metadata"]["labels"], want_labels);
    assert_eq!(j["metadata"]["labels"], want_labels);
    let s = &j["spec"];
    assert_eq!(
        (
            s["parallelism"].clone(),
            s["completions"].clone(),
            s["backoffLimit"].clone()
        ),
        (json!(1), json!(1), json!(6))
    );
    assert_eq!(s["completionMode"], "NonIndexed");
    assert_eq!(s["suspend"], false);
    assert_eq!(s["podReplacementPolicy"], "TerminatingOrFailed");
    assert!(s.get("manualSelector").is_none());
}

#[test]
fn job_defaults_follow_parallelism_and_per_index_backoff() {
    let mut j = job();
    j["spec"]["parallelism"] = json!(3);
    j["spec"]["completionMode"] = json!("Indexed");
    j["spec"]["completions"] = json!(5);
    j["spec"]["backoffLimitPerIndex"] = json!(1);
    let out = admitted("Job", j);
    assert_eq!(out["spec"]["backoffLimit"], i32::MAX);
    let mut j = job();
    j["spec"]["parallelism"] = json!(3);
    let out = admitted("Job", j);
    assert!(out["spec"].get("completions").is_none());
}

#[test]
fn job_templates_must_not_restart_always() {
    let mut j = job();
    j["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicy");
    assert_eq!(invalid("Job", Operation::Create, j, None),
        vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".to_string()]);
}

#[test]
fn job_rules_report_upstream_messages() {
    let mut j = job();
    j["spec"]["completionMode"] = json!("Indexed");
    j["spec"]["parallelism"] = json!(2);
    let msgs = invalid("Job", Operation::Create, j, None);
    assert_eq!(
        msgs,
        vec!["spec.completions: Required value: when completion mode is Indexed".to_string()]
    );
    let mut j = job();
    j["spec"]["backoffLimit"] = json!(-1);
    assert_eq!(
        invalid("Job", Operation::Create, j, None),
        vec![
            "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0".to_string()
        ]
    );
    let mut j = job();
    j["spec"]["manualSelector"] = json!(true);
    j["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
    j["spec"]["template"]["metadata"] = json!({"labels": {"a": "c"}});
    assert_eq!(invalid("Job", Operation::Create, j, None),
        vec!["spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`".to_string()]);
}

#[test]
fn job_templates_and_completions_are_immutable() {
    let old = admitted("Job", job());
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:2");
    new["spec"]["completions"] = json!(4);
    let msgs = invalid("Job", Operation::Update, new, Some(&old));
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(
        msgs[0],
        "spec.completions: Invalid value: 4: field is immutable"
    );
    assert!(msgs[1].starts_with("spec.template: Invalid value: "));
    assert!(msgs[1].ends_with(": field is immutable"));
}

#[test]
fn suspended_jobs_may_change_scheduling_directives() {
    let mut j = job();
    j["spec"]["suspend"] = json!(true);
    let old = admitted("Job", j);
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
    admit("Job", Operation::Update, &mut new, Some(&old)).unwrap();
}

fn cron_job(schedule: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}})
}

#[test]
fn cron_jobs_come_back_defaulted() {
    let c = admitted("CronJob", cron_job("*/5 * * * *"));
    let s = &c["spec"];
    assert_eq!(s["concurrencyPolicy"], "Allow");
    assert_eq!(s["suspend"], false);
    assert_eq!(s["successfulJobsHistoryLimit"], 3);
    assert_eq!(s["failedJobsHistoryLimit"], 1);
    assert_eq!(
        s["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirst"
    );
}

#[test]
fn cron_job_rules_report_upstream_messages() {
    let cases = [
        (
            cron_job("61 * * * *"),
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
        ),
        (
            cron_job("TZ=Mars/Base 0 * * * *"),
            "spec.schedule: Invalid value: \"TZ=Mars/Base 0 * * * *\": provided bad location Mars/Base: unknown time zone Mars/Base",
        ),
        (cron_job(""), "spec.schedule: Required value"),
    ];
    for (obj, want) in cases {
        assert_eq!(
            invalid("CronJob", Operation::Create, obj, None),
            vec![want.to_string()]
        );
    }
    let mut c = cron_job("@daily");
    c["spec"]["concurrencyPolicy"] = json!("Sometimes");
    c["spec"]["timeZone"] = json!("Local");
    c["metadata"]["name"] = json!("x".repeat(53));
    assert_eq!(invalid("CronJob", Operation::Create, c, None), vec![
        "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones".to_string(),
        "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"".to_string(),
        "metadata.name: Invalid value: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be no more than 52 characters".to_string(),
    ]);
    let mut c = cron_job("@daily");
    c["spec"]["timeZone"] = json!("Europe/Ber lin");
    assert_eq!(
        invalid("CronJob", Operation::Create, c, None),
        vec![
            "spec.timeZone: Invalid value: \"Europe/Ber lin\": unknown time zone Europe/Ber lin"
                .to_string()
        ]
    );
    let mut c = cron_job("@daily");
    c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    assert_eq!(invalid("CronJob", Operation::Create, c, None),
        vec!["spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".to_string()]);
}

#[test]
fn pods_come_back_with_status_and_admission_defaults() {
    let p = admitted(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "livenessProbe": {"httpGet": {"port": 8080}}}]}}),
    );
    assert_eq!(
        p["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    assert_eq!(p["spec"]["enableServiceLinks"], true);
    assert_eq!(p["spec"]["priority"], 0);
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(
        p["spec"]["containers"][0]["livenessProbe"]["httpGet"],
        json!({"path": "/", "port": 8080, "scheme": "HTTP"})
    );
}

#[test]
fn pod_updates_may_change_images_only() {
    let old = admitted(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    );
    let mut ok = old.clone();
    ok["spec"]["containers"][0]["image"] = json!("busybox:2");
    admit("Pod", Operation::Update, &mut ok, Some(&old)).unwrap();
    let mut bad = old.clone();
    bad["spec"]["restartPolicy"] = json!("Never");
    let msgs = invalid("Pod", Operation::Update, bad, Some(&old));
    assert!(
        msgs[0].starts_with("spec: Forbidden: pod updates may not change fields other than"),
        "{msgs:?}"
    );
}

#[test]
fn namespaces_nodes_and_config_kinds_admit() {
    let ns = admitted(
        "Namespace",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    );
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    let node = admitted(
        "Node",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"podCIDR": "10.1.0.0/24"}}),
    );
    assert_eq!(node["spec"]["podCIDRs"], json!(["10.1.0.0/24"]));
    let secret = admitted(
        "Secret",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "d"}, "stringData": {"k": "v"}}),
    );
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["k"], "dg==");
    admitted(
        "ConfigMap",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": {"a": "b"}}),
    );
    admitted(
        "Lease",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "d"}, "spec": {"holderIdentity": "x"}}),
    );
    admitted(
        "PodDisruptionBudget",
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}),
    );
    admitted(
        "Event",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e.1", "namespace": "d"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "d"}, "reason": "Started", "message": "ok"}),
    );
    admitted(
        "ControllerRevision",
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r", "namespace": "d"},
        "data": {"spec": {}}, "revision": 1}),
    );
}

#[test]
fn workload_kinds_admit_with_their_defaults() {
    let tmpl = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let rs = admitted(
        "ReplicaSet",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "namespace": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tmpl}}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
    let sts = admitted(
        "StatefulSet",
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "serviceName": "s", "template": tmpl}}),
    );
    assert_eq!(
        sts["spec"]["updateStrategy"],
        json!({"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"})
    );
    let ds = admitted(
        "DaemonSet",
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tmpl}}),
    );
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"})
    );
    let rc = admitted(
        "ReplicationController",
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "d"},
        "spec": {"template": tmpl}}),
    );
    assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
}

#[test]
fn names_are_validated_per_kind() {
    assert!(validate_name("Pod", "web-1.a").is_empty());
    assert_eq!(
        validate_name("Namespace", "web.a")[0].message(),
        "metadata.name: Invalid value: \"web.a\": must not contain dots"
    );
}

#[test]
fn stateful_set_mounts_may_name_claim_templates() {
    admitted(
        "StatefulSet",
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "d"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "x",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    );
}

#[test]
fn daemon_sets_without_a_selector_only_mismatch() {
    let msgs = invalid(
        "DaemonSet",
        Operation::Create,
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": "d"},
        "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        None,
    );
    assert_eq!(msgs, vec!["spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"a\"}: `selector` does not match template `labels`".to_string()]);
}

#[test]
fn events_need_an_involved_object() {
    let msgs = invalid(
        "Event",
        Operation::Create,
        json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"}, "reason": "x"}),
        None,
    );
    assert_eq!(msgs, vec!["involvedObject: Required value".to_string()]);
}

#[test]
fn bidirectional_mounts_need_privileged_containers() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["volumes"] = json!([{"name": "v", "hostPath": {"path": "/x"}}]);
    d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "v", "mountPath": "/x", "mountPropagation": "Bidirectional"}]);
    assert_eq!(invalid("Deployment", Operation::Create, d, None), vec![
        "spec.template.spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers".to_string(),
    ]);
}

#[test]
fn long_lists_are_validated_in_linear_time() {
    // Regression: duplicate checks and the aggregate message scanned a list per item, so a
    // 2 MB Node of 50,000 taints took 200 s to admit, and as many invalid ConfigMap keys
    // as long to render the error.
    let taints: Vec<Value> = (0..50_000)
        .map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule"}))
        .collect();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "u"},
        "spec": {"taints": taints}});
    admitted("Node", node);
    let data: serde_json::Map<String, Value> =
        (0..50_000).map(|i| (format!("k {i}"), json!(""))).collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"}, "data": data});
    let err = admit("ConfigMap", Operation::Create, &mut cm.clone(), None).unwrap_err();
    assert!(err.to_string().len() > 50_000);
    let tolerations: Vec<Value> = (0..20_000)
        .map(|i| json!({"key": format!("k{i}"), "operator": "Exists"}))
        .collect();
    let pod = admitted(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": tolerations}}),
    );
    let mut update = pod.clone();
    admit("Pod", Operation::Update, &mut update, Some(&pod)).unwrap();
}

#[test]
fn cron_job_zone_prefix_is_accepted_with_upstreams_warning_unless_time_zone_is_set() {
    let c = admitted("CronJob", cron_job("CRON_TZ=UTC * * * * *"));
    assert_eq!(
        berth_shared_warnings(&c),
        vec!["CRON_TZ or TZ used in spec.spec.schedule is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details".to_string()]
    );
    assert!(berth_shared_warnings(&admitted("CronJob", cron_job("* * * * *"))).is_empty());
    let mut c = cron_job("TZ=UTC 0 * * * *");
    c["spec"]["timeZone"] = json!("Etc/UTC");
    assert_eq!(invalid("CronJob", Operation::Create, c, None), vec![
        "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule".to_string()
    ]);
}

#[test]
fn cron_job_time_zones_must_be_in_the_database() {
    for tz in ["Etc/UTC", "Asia/Kolkata", "America/New_York", "UTC"] {
        let mut c = cron_job("@daily");
        c["spec"]["timeZone"] = json!(tz);
        admitted("CronJob", c);
    }
    let mut c = cron_job("@daily");
    c["spec"]["timeZone"] = json!("Mars/Base");
    assert_eq!(
        invalid("CronJob", Operation::Create, c, None),
        vec![
            "spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base".to_string()
        ]
    );
}

fn berth_shared_warnings(obj: &Value) -> Vec<String> {
    crate::admission::warnings("CronJob", obj)
}

#[test]
fn a_pod_image_with_surrounding_whitespace_is_refused_on_create_as_on_update() {
    // Found by the `create` fuzz target: a sidecar's image with leading newlines passed create
    // and then failed as its own update.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}],
            "initContainers": [{"name": "side", "image": "\n\nbusybox", "restartPolicy": "Always"}]}});
    assert_eq!(
        invalid("Pod", Operation::Create, pod, None),
        vec![
            "spec.initContainers[0].image: Invalid value: \"\\n\\nbusybox\": must not have leading or trailing whitespace"
        ]
    );
}
