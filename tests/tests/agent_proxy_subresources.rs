//! Issue 29, the proxy subresources: through `kubectl proxy`, `…/services/web:80/proxy/`
//! answers with the Service's page and `…/pods/web-0:80/proxy/` with the pod's; a directory's
//! redirect comes back with its `Location` pointing through the proxy, as do the absolute links
//! of an HTML page; `…/proxy` redirects to `…/proxy/`; `kubectl get --raw` reads through both
//! and `kubectl create --raw` POSTs a body to the pod; a user without `get services/proxy` gets
//! 403 until a Role grants it, and `nodes/proxy` still answers. Real controller, agent,
//! containerd and kubectl.

use std::time::Duration;

use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, http_get, secs};
use serde_json::json;

const START: Duration = secs(90);

/// busybox httpd on port 80 serving a page naming `name`, a directory and a CGI echo.
fn web_script(name: &str) -> String {
    format!(
        "mkdir -p /www/dir /www/cgi-bin; echo page-of-{name} > /www/index.html; \
         echo in-dir > /www/dir/index.html; \
         echo '<a href=\"/dir/\">d</a><a href=\"rel/\">r</a>' > /www/links.html; \
         printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho method=$REQUEST_METHOD\\ncat\\n' \
           > /www/cgi-bin/echo; chmod +x /www/cgi-bin/echo; \
         exec httpd -f -p 80 -h /www"
    )
}

#[test]
fn services_and_pods_proxy_reach_the_pods_page_with_rbac() {
    let (c, node) = Cluster::start_one();
    let ns = format!("proxy-{}", c.suffix());
    let k = c.kubectl();
    k.ok(&["create", "namespace", &ns]);
    let mut pod = bound_pod(
        "web-0",
        &node,
        json!({"containers": [sh_container("main", &web_script("web-0"))]}),
    );
    pod["metadata"]["namespace"] = json!(ns);
    pod["metadata"]["labels"] = json!({"app": "web"});
    pod["spec"]["containers"][0]["ports"] = json!([{"name": "http", "containerPort": 80}]);
    c.apply(&pod);
    c.apply(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 80}]},
    }));
    c.wait_for_pod_ready(&ns, "web-0", START);

    let svc = format!("/api/v1/namespaces/{ns}/services/web:80/proxy");
    let pod = format!("/api/v1/namespaces/{ns}/pods/web-0:80/proxy");
    // The Endpoints list the ready pod shortly after it is ready.
    c.wait_for(secs(30), "the service proxy to answer", || {
        let r = k.run(&["get", "--raw", &format!("{svc}/")]);
        ok_if(r.success() && r.stdout == "page-of-web-0\n", r.describe())
    });
    assert_eq!(
        k.ok(&["get", "--raw", &format!("{pod}/")]),
        "page-of-web-0\n"
    );
    // A port name works as a port number does, and a bare name takes the unnamed-or-only port.
    assert_eq!(
        k.ok(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{ns}/services/web:http/proxy/")
        ]),
        "page-of-web-0\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{ns}/pods/web-0/proxy/dir/")
        ]),
        "in-dir\n"
    );
    // A POST carries its body to the pod.
    let dir = tempfile::tempdir().expect("tempdir");
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "posted-through-proxy").expect("writes");
    let echoed = k.ok(&[
        "create",
        "--raw",
        &format!("{svc}/cgi-bin/echo"),
        "-f",
        &body.to_string_lossy(),
    ]);
    assert!(echoed.contains("method=POST"), "{echoed}");
    assert!(echoed.contains("posted-through-proxy"), "{echoed}");

    // Through `kubectl proxy`, as a browser would go.
    let mut proxy = k.spawn(&["proxy", "--port=0"]);
    const PREFIX: &str = "Starting to serve on 127.0.0.1:";
    let line = proxy.expect_line(secs(30), PREFIX, |l| l.starts_with(PREFIX));
    let port: u16 = line
        .trim_start_matches(PREFIX)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no port in {line:?}"));
    let get = |path: &str| {
        http_get("127.0.0.1", port, path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", proxy.describe()))
    };
    let r = get(&format!("{svc}/"));
    assert_eq!((r.status, r.body.as_str()), (200, "page-of-web-0\n"));
    let r = get(&format!("{pod}/"));
    assert_eq!((r.status, r.body.as_str()), (200, "page-of-web-0\n"));
    // httpd redirects a directory to its slash form: the link leads back through the proxy.
    let r = get(&format!("{svc}/dir"));
    assert!(matches!(r.status, 301 | 302), "{r:?}");
    let location = r.header("location").unwrap_or_default();
    assert!(
        location.ends_with(&format!("{svc}/dir/")),
        "Location {location:?}"
    );
    // An HTML page's absolute links lead back through the proxy; relative ones stay.
    let r = get(&format!("{svc}/links.html"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body.trim(),
        format!(r#"<a href="{svc}/dir/">d</a><a href="rel/">r</a>"#)
    );
    // The proxy root redirects to its slash form, as upstream.
    let r = get(&pod);
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some(format!("{pod}/").as_str()));
    // No such service port, and no such service.
    let r = get(&format!("/api/v1/namespaces/{ns}/services/web:81/proxy/"));
    assert_eq!(r.status, 503, "{r:?}");
    let r = get(&format!("/api/v1/namespaces/{ns}/services/nope:80/proxy/"));
    assert_eq!(r.status, 404, "{r:?}");
    drop(proxy);

    // A user who may read Services but not proxy to them is refused; a Role granting
    // `get services/proxy` lets them through (pods/proxy stays refused).
    let user = format!("viewer-{}", c.suffix());
    let as_user = ["--as", user.as_str()];
    k.ok(&[
        "-n",
        &ns,
        "create",
        "role",
        "svc-reader",
        "--verb=get,list",
        "--resource=services",
    ]);
    k.ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "svc-reader",
        "--role=svc-reader",
        &format!("--user={user}"),
    ]);
    c.wait_for(secs(10), "the user to read the Service", || {
        let r = k.run(&[&as_user[..], &["-n", &ns, "get", "service", "web"]].concat());
        ok_if(r.success(), r.describe())
    });
    let refused = k.fails(&[&as_user[..], &["get", "--raw", &format!("{svc}/")]].concat());
    assert!(
        refused.stderr.contains("Forbidden") || refused.stderr.contains("forbidden"),
        "{}",
        refused.describe()
    );
    k.ok(&[
        "-n",
        &ns,
        "create",
        "role",
        "svc-proxy",
        "--verb=get",
        "--resource=services/proxy",
    ]);
    k.ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "svc-proxy",
        "--role=svc-proxy",
        &format!("--user={user}"),
    ]);
    c.wait_for(secs(10), "the user to get through the proxy", || {
        let r = k.run(&[&as_user[..], &["get", "--raw", &format!("{svc}/")]].concat());
        ok_if(r.success() && r.stdout == "page-of-web-0\n", r.describe())
    });
    let refused = k.fails(&[&as_user[..], &["get", "--raw", &format!("{pod}/")]].concat());
    assert!(
        refused.stderr.contains("forbidden") || refused.stderr.contains("Forbidden"),
        "{}",
        refused.describe()
    );
    // `get` does not grant `create`: a POST is refused.
    let refused = k.fails(
        &[
            &as_user[..],
            &[
                "create",
                "--raw",
                &format!("{svc}/cgi-bin/echo"),
                "-f",
                &body.to_string_lossy(),
            ],
        ]
        .concat(),
    );
    assert!(
        refused.stderr.to_lowercase().contains("forbidden"),
        "{}",
        refused.describe()
    );

    // nodes/proxy keeps answering (the agent's metrics).
    let metrics = k.ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/metrics/resource"),
    ]);
    assert!(
        metrics.contains("node_cpu_usage_seconds_total"),
        "{metrics}"
    );
}
