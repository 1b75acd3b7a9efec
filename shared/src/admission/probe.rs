//! Probe and lifecycle-hook validation: exactly one handler, sane timings, liveness and startup
//! probes needing `successThreshold: 1`, and the handler-specific rules.

use k8s_openapi::api::core::v1::{
    ExecAction, GRPCAction, HTTPGetAction, Lifecycle, Probe, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::field::{FieldError, Path};
use super::names::{each_invalid, port_name, port_num};

/// Which container probe is being checked; they differ in `successThreshold` and grace rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

/// The handlers a probe or hook carries, by name.
struct Handlers<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: Option<&'a SleepAction>,
}

fn validate_handlers(h: &Handlers<'_>, grace: Option<i64>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut count = 0;
    let mut one = |field: &str, errs: &mut Vec<FieldError>| -> bool {
        if count > 0 {
            errs.push(FieldError::forbidden(
                &path.child(field),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            count += 1;
            true
        }
    };
    if let Some(e) = h.exec
        && one("exec", &mut errs)
        && e.command.as_ref().is_none_or(Vec::is_empty)
    {
        errs.push(FieldError::required(
            &path.child("exec").child("command"),
            "",
        ));
    }
    if let Some(g) = h.http_get
        && one("httpGet", &mut errs)
    {
        errs.extend(validate_http_get(g, &path.child("httpGet")));
    }
    if let Some(t) = h.tcp_socket
        && one("tcpSocket", &mut errs)
    {
        errs.extend(port_num_or_name(
            &t.port,
            &path.child("tcpSocket").child("port"),
        ));
    }
    if let Some(g) = h.grpc
        && one("grpc", &mut errs)
    {
        for m in port_num(g.port.into()) {
            errs.push(FieldError::invalid(
                &path.child("grpc").child("port"),
                g.port,
                m,
            ));
        }
    }
    if let Some(s) = h.sleep
        && one("sleep", &mut errs)
    {
        let grace = grace.unwrap_or(30);
        if s.seconds <= 0 || s.seconds > grace {
            errs.push(FieldError::invalid(
                &path.child("sleep").child("seconds"),
                s.seconds,
                format!(
                    "must be greater than 0 and less than terminationGracePeriodSeconds ({grace})"
                ),
            ));
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    errs
}

fn validate_http_get(g: &HTTPGetAction, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if g.path.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    errs.extend(port_num_or_name(&g.port, &path.child("port")));
    let scheme = g.scheme.as_deref().unwrap_or_default();
    if !matches!(scheme, "HTTP" | "HTTPS") {
        errs.push(FieldError::not_supported(
            &path.child("scheme"),
            scheme,
            &["HTTP", "HTTPS"],
        ));
    }
    for h in g.http_headers.iter().flatten() {
        let ok = !h.name.is_empty()
            && h.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !ok {
            errs.push(FieldError::invalid(&path.child("httpHeaders"), h.name.as_str(),
                "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')"));
        }
    }
    errs
}

/// A probe port: a number in 1..65535 or an IANA service name.
pub(crate) fn port_num_or_name(port: &IntOrString, path: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(n) => port_num((*n).into())
            .into_iter()
            .map(|m| FieldError::invalid(path, *n, m))
            .collect(),
        IntOrString::String(s) => each_invalid(path, s, port_name(s)),
    }
}

/// Upstream `validateLivenessProbe`/`validateReadinessProbe`/`validateStartupProbe`.
pub(crate) fn validate_probe(
    p: &Probe,
    kind: ProbeKind,
    grace: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    let handlers = Handlers {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        sleep: None,
    };
    let mut errs = validate_handlers(&handlers, grace, path);
    let fields = [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ];
    for (field, v) in fields {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                &path.child(field),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(t) = p.termination_grace_period_seconds {
        if kind == ProbeKind::Readiness {
            errs.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                t,
                "must not be set for readinessProbes",
            ));
        } else if t <= 0 {
            errs.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                t,
                "must be greater than 0",
            ));
        }
    }
    let success = p.success_threshold.unwrap_or(1);
    if kind != ProbeKind::Readiness && success != 1 {
        errs.push(FieldError::invalid(
            &path.child("successThreshold"),
            success,
            "must be 1",
        ));
    }
    errs
}

/// `postStart`/`preStop` hooks, each with exactly one handler.
pub(crate) fn validate_lifecycle(
    lc: &Lifecycle,
    grace: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, h) in [("postStart", &lc.post_start), ("preStop", &lc.pre_stop)] {
        if let Some(h) = h {
            let handlers = Handlers {
                exec: h.exec.as_ref(),
                http_get: h.http_get.as_ref(),
                tcp_socket: h.tcp_socket.as_ref(),
                grpc: None,
                sleep: h.sleep.as_ref(),
            };
            errs.extend(validate_handlers(&handlers, grace, &path.child(field)));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn probe(kind: ProbeKind, v: serde_json::Value) -> Vec<String> {
        let p: Probe = serde_json::from_value(v).unwrap();
        error_messages(&validate_probe(&p, kind, Some(30), &Path::new("p")))
    }

    #[test]
    fn probes_need_exactly_one_handler() {
        assert_eq!(
            probe(ProbeKind::Readiness, json!({})),
            vec!["p: Required value: must specify a handler type"]
        );
        assert_eq!(
            probe(
                ProbeKind::Readiness,
                json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}})
            ),
            vec!["p.tcpSocket: Forbidden: may not specify more than 1 handler type"]
        );
        assert!(
            probe(
                ProbeKind::Liveness,
                json!({"httpGet": {"port": "http", "path": "/", "scheme": "HTTP"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn timings_and_thresholds_are_checked() {
        assert_eq!(
            probe(
                ProbeKind::Readiness,
                json!({"exec": {"command": ["x"]}, "periodSeconds": -1})
            ),
            vec!["p.periodSeconds: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            probe(
                ProbeKind::Liveness,
                json!({"exec": {"command": ["x"]}, "successThreshold": 2})
            ),
            vec!["p.successThreshold: Invalid value: 2: must be 1"]
        );
        assert_eq!(
            probe(
                ProbeKind::Startup,
                json!({"exec": {"command": ["x"]}, "successThreshold": 3})
            ),
            vec!["p.successThreshold: Invalid value: 3: must be 1"]
        );
        assert!(
            probe(
                ProbeKind::Readiness,
                json!({"exec": {"command": ["x"]}, "successThreshold": 3})
            )
            .is_empty()
        );
    }

    #[test]
    fn handler_details_are_checked() {
        assert_eq!(
            probe(ProbeKind::Readiness, json!({"exec": {}})),
            vec!["p.exec.command: Required value"]
        );
        assert_eq!(
            probe(ProbeKind::Readiness, json!({"tcpSocket": {"port": 0}})),
            vec!["p.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive"]
        );
        assert_eq!(
            probe(
                ProbeKind::Readiness,
                json!({"httpGet": {"port": 80, "path": "/", "scheme": "FTP"}})
            ),
            vec![
                "p.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\""
            ]
        );
    }

    #[test]
    fn sleep_hooks_must_fit_the_grace_period() {
        let lc: Lifecycle =
            serde_json::from_value(json!({"preStop": {"sleep": {"seconds": 60}}})).unwrap();
        let errs = validate_lifecycle(&lc, Some(30), &Path::new("l"));
        assert_eq!(
            errs[0].message(),
            "l.preStop.sleep.seconds: Invalid value: 60: must be greater than 0 and less than terminationGracePeriodSeconds (30)"
        );
    }
}
