//! Issue 9 item 6, API fidelity: requests kube-apiserver refuses in a particular way are refused
//! the same way — status code and `Status` body — against a real controller over HTTPS:
//! evictions naming another pod, patches that rename an object, change its uid or drop its
//! metadata, PUTs whose body names another object or uid, creates carrying a resourceVersion,
//! scale PUTs without a Scale, list limits that are not integers; a client still sending an
//! over-limit body reads its 413; and the answers hyper gives by itself (unparsable request line,
//! URI or headers too large) carry a `Status` like every other error.

use std::time::Duration;

use berth_tests::client::Method;
use berth_tests::objects::{configmap, failure_status, pod, rv};
use berth_tests::{Controller, RawTls, Reply, Req, secs};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
/// The token of a user who may do everything (the tests' raw connections carry no certificate).
const TOKEN: &str = "fidelity-token";

/// Starts a controller that also knows the bearer token [`TOKEN`].
fn start() -> (Controller, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("tokens.csv");
    std::fs::write(
        &token_file,
        format!("{TOKEN},fidelity,1001,\"system:masters\"\n"),
    )
    .expect("token file");
    let c = Controller::start_with(&[
        "--token-auth-file",
        token_file.to_str().expect("UTF-8 path"),
    ]);
    (c, dir)
}

/// Requires `reply` to be a Failure `Status` with this code and reason and exactly `message`.
fn refused(c: &Controller, reply: &Reply, code: u16, reason: &str, message: &str) {
    let got = reply.failure_naming(code, reason, &[], || c.log_tail());
    assert_eq!(
        got,
        message,
        "message\n{}\n{}",
        reply.describe(),
        c.log_tail()
    );
}

/// Creates configmap `name` holding `k: v` as the admin; returns the admin client, the object
/// and its URL.
fn configmap_k_v(c: &Controller, name: &str) -> (berth_tests::Api, Value, String) {
    let api = c.admin_api();
    let created = api.create(CMS, &configmap(name, &[("k", "v")]));
    (api, created, format!("{CMS}/{name}"))
}

/// Like [`refused`] for a message that must contain each of `needles`.
fn refused_naming(c: &Controller, reply: &Reply, code: u16, reason: &str, needles: &[&str]) {
    reply.failure_naming(code, reason, needles, || c.log_tail());
}

/// A Failure `Status` with no reason (upstream's answer to an error it has no reason for).
fn reasonless(c: &Controller, status: &Value, code: u16, message: &str) {
    let context = || format!("{status:#}\n{}", c.log_tail());
    assert_eq!(status["kind"], "Status", "{}", context());
    assert_eq!(status["apiVersion"], "v1", "{}", context());
    assert_eq!(status["status"], "Failure", "{}", context());
    assert_eq!(status["code"], code, "{}", context());
    assert!(
        status.get("reason").is_none(),
        "no reason expected\n{}",
        context()
    );
    assert_eq!(status["message"], message, "{}", context());
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]}
            }
        }
    })
}

fn eviction(name: &str, namespace: Option<&str>) -> Value {
    let mut e = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name}, "deleteOptions": {}});
    if let Some(ns) = namespace {
        e["metadata"]["namespace"] = json!(ns);
    }
    e
}

#[test]
fn an_eviction_must_name_the_pod_of_its_url() {
    let (c, _tokens) = start();
    let api = c.admin_api();
    api.create(PODS, &pod("evictee", &[("app", "e")]));
    let url = format!("{PODS}/evictee/eviction");

    let bad_request = |body: Value, message: &str| {
        let reply = api.send(Req::post(&url, &body));
        refused(&c, &reply, 400, "BadRequest", message);
    };
    let wrong_name = "name in URL does not match name in Eviction object";
    bad_request(eviction("someone-else", Some("default")), wrong_name);
    bad_request(
        json!({"apiVersion": "policy/v1", "kind": "Eviction"}),
        wrong_name,
    );
    // The namespace is checked first (by the create handler), then the name.
    bad_request(
        eviction("someone-else", Some("kube-system")),
        "the namespace of the provided object does not match the namespace sent on the request",
    );
    api.get_ok(&format!("{PODS}/evictee"));

    // The right name evicts, with or without the namespace in the body.
    let done = api.expect(Req::post(&url, &eviction("evictee", None)), 201);
    assert_eq!(done["status"], "Success", "{done}");
}

#[test]
fn patches_that_rename_an_object_change_its_uid_or_drop_its_metadata_are_refused() {
    let (c, _tokens) = start();
    let (api, created, url) = configmap_k_v(&c, "patched");
    let renamed = "the name of the object (other) does not match the name on the URL (patched)";
    let nameless =
        "the name of the object (patched based on URL) was undeterminable: name must be provided";
    let immutable = "ConfigMap \"patched\" is invalid: metadata.uid: Invalid value: \"forged\": field is \
         immutable";

    let json_patch = |ops: Value| Req::patch(&url, "application/json-patch+json", &ops);
    let merge = |doc: Value| Req::patch(&url, "application/merge-patch+json", &doc);
    let strategic = |doc: Value| Req::patch(&url, "application/strategic-merge-patch+json", &doc);
    let apply = |doc: Value| {
        Req::patch(
            format!("{url}?fieldManager=fidelity&force=true"),
            "application/apply-patch+yaml",
            &doc,
        )
    };
    let applied = |name: &str, uid: Option<&str>| {
        let mut doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        if let Some(uid) = uid {
            doc["metadata"]["uid"] = json!(uid);
        }
        doc
    };

    for (what, req) in [
        (
            "json rename",
            json_patch(json!([{"op": "replace", "path": "/metadata/name", "value": "other"}])),
        ),
        (
            "merge rename",
            merge(json!({"metadata": {"name": "other"}})),
        ),
        (
            "strategic rename",
            strategic(json!({"metadata": {"name": "other"}})),
        ),
        ("apply rename", apply(applied("other", None))),
    ] {
        let reply = api.send(req);
        assert_eq!(reply.status, 400, "{what}: {}", reply.describe());
        refused(&c, &reply, 400, "BadRequest", renamed);
    }
    for (what, req) in [
        (
            "json uid",
            json_patch(json!([{"op": "replace", "path": "/metadata/uid", "value": "forged"}])),
        ),
        ("merge uid", merge(json!({"metadata": {"uid": "forged"}}))),
        (
            "strategic uid",
            strategic(json!({"metadata": {"uid": "forged"}})),
        ),
        ("apply uid", apply(applied("patched", Some("forged")))),
    ] {
        let reply = api.send(req);
        assert_eq!(reply.status, 422, "{what}: {}", reply.describe());
        refused(&c, &reply, 422, "Invalid", immutable);
        let cause = &reply.json()["details"]["causes"][0];
        assert_eq!(
            cause["field"],
            "metadata.uid",
            "{what}: {}",
            reply.describe()
        );
        assert_eq!(
            cause["reason"],
            "FieldValueInvalid",
            "{what}: {}",
            reply.describe()
        );
    }
    for (what, req) in [
        (
            "json remove",
            json_patch(json!([{"op": "remove", "path": "/metadata"}])),
        ),
        ("merge null", merge(json!({"metadata": null}))),
        (
            "json name remove",
            json_patch(json!([{"op": "remove", "path": "/metadata/name"}])),
        ),
    ] {
        let reply = api.send(req);
        assert_eq!(reply.status, 400, "{what}: {}", reply.describe());
        refused(&c, &reply, 400, "BadRequest", nameless);
    }

    // Nothing was written: same object, same resourceVersion.
    let now = api.get_ok(&url);
    assert_eq!(rv(&now), rv(&created), "{now:#}");
    assert_eq!(now["metadata"]["uid"], created["metadata"]["uid"]);
    // A patch that removes the uid keeps it, as upstream does.
    let kept = api.expect(
        merge(json!({"metadata": {"uid": null}, "data": {"k": "w"}})),
        200,
    );
    assert_eq!(
        kept["metadata"]["uid"], created["metadata"]["uid"],
        "{kept:#}"
    );
}

#[test]
fn a_put_must_name_the_urls_object_and_its_uid_is_a_precondition() {
    let (c, _tokens) = start();
    let (api, created, url) = configmap_k_v(&c, "replaced");
    let uid = created["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();

    let mut nameless = created.clone();
    nameless["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("name");
    let reply = api.send(Req::put(&url, &nameless));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "the name of the object (replaced based on URL) was undeterminable: name must be provided",
    );
    let reply = api.send(Req::put(&url, &Value::Null));
    refused_naming(&c, &reply, 400, "BadRequest", &["was undeterminable"]);

    let mut forged = created.clone();
    forged["metadata"]["uid"] = json!("forged");
    let reply = api.send(Req::put(&url, &forged));
    let message = format!(
        "Operation cannot be fulfilled on configmaps \"replaced\": StorageError: invalid \
         object, Code: 4, Key: /registry/configmaps/default/replaced, ResourceVersion: 0, \
         AdditionalErrorMsg: Precondition failed: UID in precondition: forged, UID in object \
         meta: {uid}"
    );
    refused(&c, &reply, 409, "Conflict", &message);
    let now = api.get_ok(&url);
    assert_eq!(rv(&now), rv(&created), "nothing may be written: {now:#}");
    // The right uid, or none, updates.
    let mut right = created.clone();
    right["data"]["k"] = json!("w");
    api.expect(Req::put(&url, &right), 200);
}

#[test]
fn a_create_carrying_a_resource_version_is_refused_as_upstreams_storage_refuses_it() {
    let (c, _tokens) = start();
    let api = c.admin_api();
    let message = "resourceVersion should not be set on objects to be created";
    let mut body = configmap("versioned", &[("k", "v")]);
    body["metadata"]["resourceVersion"] = json!("12");
    let reply = api.send(Req::post(CMS, &body));
    assert_eq!(reply.status, 500, "{}", reply.describe());
    reasonless(&c, &reply.json(), 500, message);
    assert_eq!(api.get(&format!("{CMS}/versioned")).status, 404);

    // Validation comes first: an invalid object is 422 whatever its resourceVersion.
    let mut invalid = configmap("Not_Valid", &[]);
    invalid["metadata"]["resourceVersion"] = json!("12");
    assert_eq!(api.send(Req::post(CMS, &invalid)).status, 422);
    // A dry run never reaches the storage; "0" and an unparsable version are no version.
    api.expect(Req::post(format!("{CMS}?dryRun=All"), &body), 201);
    for (name, version) in [("zero", "0"), ("garbled", "x1")] {
        let mut body = configmap(name, &[]);
        body["metadata"]["resourceVersion"] = json!(version);
        let made = api.expect(Req::post(CMS, &body), 201);
        assert_ne!(
            made["metadata"]["resourceVersion"],
            json!(version),
            "{made:#}"
        );
    }

    // kubectl clears the resourceVersion itself before it creates (its resource helper does),
    // so a manifest saved with `get -o yaml` creates, as it does against kube-apiserver.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\n  \
                resourceVersion: \"7\"\ndata:\n  k: v\n";
    let out = c.kubectl().ok_stdin(&["create", "-f", "-"], yaml);
    assert!(out.contains("configmap/from-kubectl created"), "{out}");
}

#[test]
fn a_scale_put_without_a_scale_is_400_and_changes_nothing() {
    let (c, _tokens) = start();
    let api = c.admin_api();
    let created = api.create(DEPLOYS, &deployment("scaled", 2));
    let url = format!("{DEPLOYS}/scaled/scale");
    let nameless =
        "the name of the object (scaled based on URL) was undeterminable: name must be provided";
    // kubectl's PUT of a Scale carries no Content-Type.
    let put = |body: &[u8]| Req {
        body: Some(body.to_vec()),
        ..Req::new(Method::PUT, &url)
    };
    for body in [&b"null"[..], b"{}", b"{\"spec\":{\"replicas\":5}}"] {
        let reply = api.send(put(body));
        refused(&c, &reply, 400, "BadRequest", nameless);
    }
    let reply = api.send(put(
        b"{\"metadata\":{\"name\":\"other\"},\"spec\":{\"replicas\":5}}",
    ));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "the name of the object (other) does not match the name on the URL (scaled)",
    );

    // A uid that is not the deployment's is a failed precondition.
    let uid = created["metadata"]["uid"].as_str().expect("uid");
    let forged = json!({"metadata": {"name": "scaled", "uid": "forged"}, "spec": {"replicas": 5}});
    let reply = api.send(put(forged.to_string().as_bytes()));
    refused_naming(
        &c,
        &reply,
        409,
        "Conflict",
        &[
            "Operation cannot be fulfilled on deployments.apps \"scaled\"",
            &format!("Precondition failed: UID in precondition: forged, UID in object meta: {uid}"),
        ],
    );
    // A patch that changes the Scale's uid conflicts on the scale subresource.
    let reply = api.send(Req::patch(
        &url,
        "application/merge-patch+json",
        &json!({"metadata": {"uid": "forged"}, "spec": {"replicas": 5}}),
    ));
    let message = format!(
        "Operation cannot be fulfilled on deployments/scale.apps \"scaled\": Precondition \
         failed: UID in precondition: forged, UID in object meta: {uid}"
    );
    refused(&c, &reply, 409, "Conflict", &message);
    let scale = api.get_ok(&url);
    assert_eq!(
        scale["spec"]["replicas"], 2,
        "nothing may be written: {scale:#}"
    );

    // A named Scale scales; negative replicas stay 422.
    let ok = json!({"metadata": {"name": "scaled"}, "spec": {"replicas": 3}});
    let scaled = api.expect(put(ok.to_string().as_bytes()), 200);
    assert_eq!(scaled["spec"]["replicas"], 3, "{scaled:#}");
    let negative = json!({"metadata": {"name": "scaled"}, "spec": {"replicas": -1}});
    let reply = api.send(put(negative.to_string().as_bytes()));
    refused_naming(&c, &reply, 422, "Invalid", &["spec.replicas"]);
}

#[test]
fn list_options_that_do_not_parse_are_400_and_a_negative_limit_lists_everything() {
    let (c, _tokens) = start();
    let api = c.admin_api();
    for name in ["a", "b", "c"] {
        api.create(CMS, &configmap(name, &[]));
    }
    for (query, value) in [("limit=abc", "abc"), ("limit=", ""), ("limit=1.5", "1.5")] {
        let reply = api.send(Req::get(format!("{CMS}?{query}")));
        refused(
            &c,
            &reply,
            400,
            "BadRequest",
            &format!("strconv.ParseInt: parsing {value:?}: invalid syntax"),
        );
    }
    let reply = api.send(Req::get(format!("{CMS}?limit=99999999999999999999")));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
    );
    let reply = api.send(Req::get(format!("{CMS}?watch=true&limit=abc")));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "strconv.ParseInt: parsing \"abc\": invalid syntax",
    );
    let reply = api.send(Req::get(format!("{CMS}?watch=1&timeoutSeconds=soon")));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "strconv.ParseInt: parsing \"soon\": invalid syntax",
    );

    // A selector's parse error is the message, once.
    let reply = api.send(Req::get(format!("{CMS}?labelSelector=a%20in")));
    refused(
        &c,
        &reply,
        400,
        "BadRequest",
        "unable to parse requirement: found '' expected: '('",
    );

    // A negative or zero limit is no limit (upstream's storage pages only a positive one).
    for limit in ["-1", "0"] {
        let list = api.get_ok(&format!("{CMS}?limit={limit}"));
        // Besides the three, the namespace's CA bundle (kube-root-ca.crt) the controller keeps.
        let ours = list["items"].as_array().map(|items| {
            items
                .iter()
                .filter(|i| i["metadata"]["name"] != "kube-root-ca.crt")
                .count()
        });
        assert_eq!(ours, Some(3), "limit={limit}: {list:#}");
        assert!(list["metadata"].get("continue").is_none(), "{list:#}");
    }
    let page = api.get_ok(&format!("{CMS}?limit=2"));
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2), "{page:#}");
}

/// The head of a POST of `len` body bytes to the configmaps, with the token.
fn post_head(len: Option<usize>, extra: &str) -> Vec<u8> {
    let framing = match len {
        Some(n) => format!("Content-Length: {n}\r\n"),
        None => "Transfer-Encoding: chunked\r\n".to_string(),
    };
    format!(
        "POST {CMS} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\n{framing}{extra}\r\n"
    )
    .into_bytes()
}

fn connect(c: &Controller) -> RawTls {
    RawTls::connect(c.port(), &c.ca_pem(), secs(20))
        .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail()))
}

/// Requires a 413 `Status` as the answer on `conn`.
fn reads_413(c: &Controller, conn: &mut RawTls, what: &str) {
    let (status, head, text) = conn
        .read_answer(secs(20))
        .unwrap_or_else(|e| panic!("{what}: no answer: {e}\n{}", c.log_tail()));
    assert_eq!(status, 413, "{what}: {head}\n{text}");
    // The rest of an over-limit body is never read as a request: the connection closes, and
    // the client says so (as upstream's HTTP/1 server answers it).
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{what}: a 413 without Connection: close: {head}"
    );
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
    let message = failure_status(&body, 413, "RequestEntityTooLarge")
        .unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
    assert_eq!(
        message, "Request entity too large: limit is 3145728",
        "{what}"
    );
}

/// Sends `request` in one write on a fresh connection and expects the 413 ([`reads_413`]).
fn sent_at_once_reads_413(c: &Controller, request: &[u8], what: &str) {
    let mut conn = connect(c);
    conn.send(request)
        .unwrap_or_else(|e| panic!("{what}: the send failed: {e}\n{}", c.log_tail()));
    reads_413(c, &mut conn, what);
}

const FIVE_MIB: usize = 5 * 1024 * 1024;

#[test]
fn a_client_sending_5_mib_reads_a_413_status() {
    let (c, _tokens) = start();
    let body = configmap("huge", &[("blob", &"x".repeat(FIVE_MIB))])
        .to_string()
        .into_bytes();

    // Written whole before reading, with its length declared: answered before it is read, the
    // rest discarded while the connection lingers.
    let mut request = post_head(Some(body.len()), "");
    request.extend_from_slice(&body);
    sent_at_once_reads_413(&c, &request, "whole");

    // Slowly, in 256 KiB pieces: the connection lingers as long as the client keeps sending.
    let mut conn = connect(&c);
    conn.send(&post_head(Some(body.len()), ""))
        .unwrap_or_else(|e| panic!("slow head: {e}"));
    for (i, piece) in body.chunks(256 * 1024).enumerate() {
        std::thread::sleep(Duration::from_millis(150)); // not ordering: a slow client on purpose
        conn.send(piece)
            .unwrap_or_else(|e| panic!("slow: piece {i} failed: {e}\n{}", c.log_tail()));
    }
    reads_413(&c, &mut conn, "slow");

    // Chunked, with no length to refuse up front: read up to the limit, then refused.
    let mut request = post_head(None, "");
    for piece in body.chunks(64 * 1024) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    sent_at_once_reads_413(&c, &request, "chunked");

    // Expect: 100-continue: the 413 comes instead of the go-ahead, and no body is sent.
    let mut conn = connect(&c);
    conn.send(&post_head(Some(body.len()), "Expect: 100-continue\r\n"))
        .unwrap_or_else(|e| panic!("expect: {e}"));
    reads_413(&c, &mut conn, "expect 100-continue");

    let after = c.admin_api().get(&format!("{CMS}/huge"));
    assert_eq!(after.status, 404, "{}", after.describe());
}

/// Sends `request` on a fresh connection and reads the answer (hyper closes after these).
fn raw_answer(c: &Controller, request: &[u8]) -> (u16, String, Value) {
    let mut conn = connect(c);
    // The server may answer and stop reading before all of a huge head is in: what it answers
    // is the point, not whether every byte was taken.
    let sent = conn.send(request);
    let (status, head, text) = conn
        .read_answer(secs(20))
        .unwrap_or_else(|e| panic!("no answer (send: {sent:?}): {e}\n{}", c.log_tail()));
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {head}\n{text}"));
    (status, head, body)
}

#[test]
fn the_answers_hyper_gives_by_itself_carry_a_status() {
    let (c, _tokens) = start();

    // A request line that is not HTTP.
    for garbage in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /readyz HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let (status, head, body) = raw_answer(&c, garbage);
        assert_eq!(status, 400, "{head}\n{body}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        failure_status(&body, 400, "BadRequest").unwrap_or_else(|e| panic!("{e}: {body}"));
    }

    // A URI over hyper's 65,534 bytes.
    let long = format!(
        "GET {CMS}?labelSelector={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    let (status, head, body) = raw_answer(&c, long.as_bytes());
    assert_eq!(status, 414, "{head}\n{body}");
    reasonless(
        &c,
        &body,
        414,
        "the request URI is longer than the server accepts (65534 bytes)",
    );

    // Header fields over 1 MiB, and over 100 fields.
    let big = format!(
        "GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(1_100_000)
    );
    let (status, head, body) = raw_answer(&c, big.as_bytes());
    assert_eq!(status, 431, "{head}\n{body}");
    let message =
        "the request header fields are larger than the server accepts (1048576 bytes, 100 fields)";
    reasonless(&c, &body, 431, message);
    let many: String = (0..150).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    let many = format!("GET /readyz HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    let (status, head, body) = raw_answer(&c, many.as_bytes());
    assert_eq!(status, 431, "{head}\n{body}");
    reasonless(&c, &body, 431, message);

    // A head under the limit is served: 900 KiB of header fields.
    let fine = format!(
        "GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(900_000)
    );
    let mut conn = connect(&c);
    conn.send(fine.as_bytes()).expect("send");
    let (status, head, text) = conn.read_answer(secs(20)).expect("answer");
    assert_eq!((status, text.as_str()), (200, "ok"), "{head}");

    // Methods and paths the router does not serve.
    let api = c.admin_api();
    let foo = Method::from_bytes(b"FOO").expect("method");
    for path in [
        CMS,
        "/api/v1/namespaces/default/configmaps/x",
        "/healthz",
        "/version",
    ] {
        let reply = api.send(Req::new(foo.clone(), path));
        refused(
            &c,
            &reply,
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
    }
    for path in [
        "/nope",
        "/apis/nope/v1/things",
        "/api/v1/frobs",
        "/api/v1/namespaces/default/pods/x/y/z",
    ] {
        let reply = api.send(Req::get(path));
        refused(
            &c,
            &reply,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    // Still serving.
    api.get_ok("/api/v1/namespaces/default");
}
