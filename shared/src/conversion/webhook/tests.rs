//! Table tests of the conversion review and the checks of its answer.

use super::*;
use serde_json::json;

fn webhook(versions: &[&str]) -> ConversionWebhook {
    ConversionWebhook {
        client: WebhookClient::Url("https://conv.example.com/convert".into()),
        ca_bundle: None,
        review_versions: versions.iter().map(|v| v.to_string()).collect(),
    }
}

fn tab(name: &str, version: &str) -> Value {
    json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
           "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                        "resourceVersion": "7", "labels": {"app": "a"}, "generation": 2},
           "spec": {"host": "h", "port": 80}})
}

/// The webhook's conversion of `obj`: v2's `endpoint` from v1's `host` and `port`.
fn converted(obj: &Value) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = json!("stable.example.com/v2");
    out["spec"] = json!({"endpoint": "h:80"});
    out
}

fn answer(uid: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}}),
    )
    .unwrap_or_default()
}

fn run(
    objects: &mut [Value],
    list: bool,
    respond: impl FnOnce(&Value) -> Result<Vec<u8>, String>,
) -> Result<(), String> {
    let hook = webhook(&["v1"]);
    let c = Conversion {
        webhook: &hook,
        desired: "stable.example.com/v2",
        gvk: "stable.example.com/v1, Kind=CronTab",
        list,
        uid: "u-1",
    };
    c.run(objects, |body| {
        let review: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        respond(&review)
    })
    .map_err(|e| e.to_string())
}

#[test]
fn the_review_carries_only_the_objects_not_in_the_desired_version() {
    let mut objects = vec![tab("a", "v1"), tab("b", "v2"), tab("c", "v1")];
    let mut seen = Value::Null;
    let result = run(&mut objects, true, |review| {
        seen = review.clone();
        let sent = review["request"]["objects"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(answer("u-1", sent.iter().map(converted).collect()))
    });
    assert_eq!(result, Ok(()));
    assert_eq!(seen["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(seen["kind"], "ConversionReview");
    assert_eq!(seen["request"]["uid"], "u-1");
    assert_eq!(
        seen["request"]["desiredAPIVersion"],
        "stable.example.com/v2"
    );
    let names: Vec<&Value> = seen["request"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| &o["metadata"]["name"])
        .collect();
    assert_eq!(names, [&json!("a"), &json!("c")]);
    assert_eq!(objects[0]["spec"], json!({"endpoint": "h:80"}));
    assert_eq!(objects[1]["spec"], json!({"host": "h", "port": 80}));
    assert_eq!(objects[2]["apiVersion"], "stable.example.com/v2");
}

#[test]
fn nothing_is_sent_when_every_object_is_in_the_desired_version() {
    let mut objects = vec![tab("a", "v2")];
    let result = run(&mut objects, false, |_| Err("called".into()));
    assert_eq!(result, Ok(()));
}

#[test]
fn the_review_version_is_the_first_listed_one_this_server_speaks() {
    assert_eq!(
        webhook(&["v2", "v1beta1", "v1"]).review_version(),
        Some(ReviewVersion::V1beta1)
    );
    assert_eq!(
        webhook(&["v1", "v1beta1"]).review_version(),
        Some(ReviewVersion::V1)
    );
    assert_eq!(webhook(&["v3"]).review_version(), None);
}

#[test]
fn answers_are_checked_as_upstream_checks_them() {
    type Respond = Box<dyn Fn(&Value) -> Result<Vec<u8>, String>>;
    let with = |f: fn(&mut Value)| -> Respond {
        Box::new(move |review: &Value| {
            let sent = review["request"]["objects"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut out: Vec<Value> = sent.iter().map(converted).collect();
            if let Some(first) = out.first_mut() {
                f(first);
            }
            Ok(answer("u-1", out))
        })
    };
    let raw = |v: Value| -> Respond {
        Box::new(move |_: &Value| Ok(serde_json::to_vec(&v).unwrap_or_default()))
    };
    let gvk = "conversion webhook for stable.example.com/v1, Kind=CronTab";
    let cases: Vec<(&str, bool, Respond, String)> = vec![
        (
            "the call fails",
            false,
            Box::new(|_: &Value| {
                Err("Post \"https://conv.ops.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:1: connect: connection refused".to_string())
            }),
            format!(
                "{gvk} failed: Post \"https://conv.ops.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:1: connect: connection refused"
            ),
        ),
        (
            "the webhook says it failed",
            false,
            raw(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "u-1", "result": {"status": "Failure", "message": "no port"}}}),
            ),
            format!("{gvk} failed: no port"),
        ),
        (
            "a failure without a message",
            false,
            raw(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "u-1", "result": {"status": "Failure"}}}),
            ),
            format!("{gvk} failed: response.result.status was 'Failure', not 'Success'"),
        ),
        (
            "another review's uid",
            false,
            raw(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "u-2", "result": {"status": "Success"}}}),
            ),
            format!("{gvk} failed: expected response.uid=\"u-1\", got \"u-2\""),
        ),
        (
            "not a ConversionReview",
            false,
            raw(json!({"apiVersion": "v1", "kind": "Status"})),
            format!(
                "{gvk} failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got v1, Kind=Status"
            ),
        ),
        (
            "no response",
            false,
            raw(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"})),
            format!("{gvk} failed: no response provided"),
        ),
        (
            "too few objects",
            true,
            raw(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "u-1", "result": {"status": "Success"}, "convertedObjects": []}}),
            ),
            format!("{gvk} returned 0 objects, expected 2"),
        ),
        (
            "the version not converted",
            false,
            with(|o| o["apiVersion"] = json!("stable.example.com/v1")),
            format!(
                "{gvk} returned invalid object: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)"
            ),
        ),
        (
            "another kind, in a list",
            true,
            with(|o| o["kind"] = json!("Other")),
            format!(
                "{gvk} returned invalid converted object at index 0: invalid kind (expected CronTab, received Other)"
            ),
        ),
        (
            "another name",
            false,
            with(|o| o["metadata"]["name"] = json!("z")),
            format!("{gvk} returned invalid object: must have the same name: a != z"),
        ),
        (
            "another uid",
            false,
            with(|o| o["metadata"]["uid"] = json!("x")),
            format!("{gvk} returned invalid object: must have the same UID: uid-a != x"),
        ),
        (
            "another namespace",
            false,
            with(|o| o["metadata"]["namespace"] = json!("kube-system")),
            format!(
                "{gvk} returned invalid object: must have the same namespace: default != kube-system"
            ),
        ),
        (
            "a label that is not a string",
            false,
            with(|o| o["metadata"]["labels"] = json!({"n": 1})),
            format!(
                "{gvk} returned invalid metadata: metadata.labels[n] must be a string, but is int64 in converted object"
            ),
        ),
        (
            "an invalid label value, in a list",
            true,
            with(|o| o["metadata"]["labels"] = json!({"app": "not valid!"})),
            format!(
                "{gvk} returned invalid metadata in object at index 0: metadata.labels: Invalid value: \"not valid!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ),
        ),
        (
            "no metadata (the name is checked first)",
            false,
            with(|o| {
                if let Some(m) = o.as_object_mut() {
                    m.remove("metadata");
                }
            }),
            format!("{gvk} returned invalid object: must have the same name: a != "),
        ),
    ];
    for (name, list, respond, want) in cases {
        let mut objects = if list {
            vec![tab("a", "v1"), tab("b", "v1")]
        } else {
            vec![tab("a", "v1")]
        };
        assert_eq!(run(&mut objects, list, respond), Err(want), "{name}");
    }
}

#[test]
fn labels_and_annotations_may_change_and_other_metadata_is_kept() {
    let mut objects = vec![tab("a", "v1")];
    let result = run(&mut objects, false, |review| {
        let mut out = converted(&review["request"]["objects"][0]);
        out["metadata"]["labels"] = json!({"app": "b", "tier": "web"});
        out["metadata"]["annotations"] = json!({"converted": "yes"});
        out["metadata"]["generation"] = json!(9);
        out["metadata"]["resourceVersion"] = json!("1");
        Ok(answer("u-1", vec![out]))
    });
    assert_eq!(result, Ok(()));
    let meta = &objects[0]["metadata"];
    assert_eq!(meta["labels"], json!({"app": "b", "tier": "web"}));
    assert_eq!(meta["annotations"], json!({"converted": "yes"}));
    assert_eq!(
        (&meta["generation"], &meta["resourceVersion"]),
        (&json!(2), &json!("7"))
    );
    let mut objects = vec![tab("a", "v1")];
    let dropped = run(&mut objects, false, |review| {
        let mut out = converted(&review["request"]["objects"][0]);
        if let Some(m) = out["metadata"].as_object_mut() {
            m.remove("labels");
        }
        Ok(answer("u-1", vec![out]))
    });
    assert_eq!(dropped, Ok(()));
    assert_eq!(objects[0]["metadata"].get("labels"), None);
}

#[test]
fn a_definitions_webhook_is_read_with_its_defaults() {
    let conversion = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"namespace": "ops", "name": "conv", "path": "/convert"},
                         "caBundle": "UEVN"},
        "conversionReviewVersions": ["v1"]}});
    assert_eq!(
        ConversionWebhook::parse(&conversion),
        Some(ConversionWebhook {
            client: WebhookClient::Service {
                namespace: "ops".into(),
                name: "conv".into(),
                path: "/convert".into(),
                port: 443
            },
            ca_bundle: Some(b"PEM".to_vec()),
            review_versions: vec!["v1".into()],
        })
    );
    assert_eq!(ConversionWebhook::parse(&json!({"strategy": "None"})), None);
}
