//! Pods on a test cluster: fetch them, wait for phases, readiness, conditions of the tests'
//! choosing, or their disappearance (every wait with a deadline and the pod's last state in the
//! failure message), read their events, and run `kubectl exec` and `kubectl logs` in them.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Cluster;
use crate::api::Next;
use crate::pod_reading::{is_ready, phase, summary};
use crate::process::Run;
use crate::wait::wait_for_with;

impl Cluster {
    /// `GET /api/v1/namespaces/NS/pods/NAME`; `None` once it is gone.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        self.get(&format!("/api/v1/namespaces/{ns}/pods/{name}"))
    }

    /// Polls pod `ns/name` until `check` accepts it and returns what `check` returned. `Err` from
    /// `check` says what is still missing; it is printed with the pod's summary and events at
    /// the deadline.
    pub fn wait_pod<T>(
        &self,
        ns: &str,
        name: &str,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&Value) -> Result<T, String>,
    ) -> T {
        let logs = self.logs();
        wait_for_with(
            timeout,
            &format!("pod {ns}/{name}: {what}"),
            || format!("{}\n{}", self.event_lines(ns, name), logs.render()),
            || match self.pod(ns, name) {
                None => Err("the pod does not exist".to_string()),
                Some(pod) => check(&pod).map_err(|e| format!("{e}\n  pod: {}", summary(&pod))),
            },
        )
    }

    /// Like [`Cluster::wait_pod`], but sees every version of the pod the API stores (a watch
    /// from the version fetched first), so a state the agent writes only briefly is not missed
    /// between polls. `check` gets each version in order.
    pub fn watch_pod<T>(
        &self,
        ns: &str,
        name: &str,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&Value) -> Result<T, String>,
    ) -> T {
        let start = Instant::now();
        let mut last = String::from("nothing seen yet");
        let mut versions = 0usize;
        'reopen: while start.elapsed() < timeout {
            // Watch from the pod's version, or, while it does not exist, from the (empty) list's,
            // so its creation arrives as an event.
            let rv = match self.pod(ns, name) {
                Some(pod) => {
                    versions += 1;
                    match check(&pod) {
                        Ok(v) => return v,
                        Err(e) => last = format!("{e}\n  pod: {}", summary(&pod)),
                    }
                    pod["metadata"]["resourceVersion"].clone()
                }
                None => {
                    last = "the pod does not exist".into();
                    self.get(&format!(
                        "/api/v1/namespaces/{ns}/pods?fieldSelector=metadata.name%3D{name}"
                    ))
                    .map_or(Value::Null, |list| {
                        list["metadata"]["resourceVersion"].clone()
                    })
                }
            };
            let rv = rv.as_str().unwrap_or("0");
            let path = format!(
                "/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion={rv}\
                 &fieldSelector=metadata.name%3D{name}&allowWatchBookmarks=true"
            );
            let Ok(mut watch) = self.api().watch(&path) else {
                continue 'reopen;
            };
            loop {
                let left = timeout.saturating_sub(start.elapsed());
                if left.is_zero() {
                    break 'reopen;
                }
                match watch.next(left) {
                    Next::Event(e) if e["object"]["metadata"]["name"] == name => {
                        match e["type"].as_str() {
                            Some("ADDED" | "MODIFIED") => {
                                versions += 1;
                                match check(&e["object"]) {
                                    Ok(v) => return v,
                                    Err(err) => {
                                        last = format!("{err}\n  pod: {}", summary(&e["object"]))
                                    }
                                }
                            }
                            Some("DELETED") => last = "the pod was deleted".into(),
                            Some("ERROR") => continue 'reopen,
                            _ => {}
                        }
                    }
                    Next::Event(_) => {}
                    Next::Timeout => break 'reopen,
                    Next::Closed(_) => continue 'reopen,
                }
            }
        }
        panic!(
            "timed out after {:.1?} ({versions} versions of the pod seen) waiting for: pod \
             {ns}/{name}: {what}\nlast observation: {last}\n{}\n{}",
            start.elapsed(),
            self.event_lines(ns, name),
            self.logs().render()
        )
    }

    /// Waits until the pod's phase is `want`; returns the pod.
    pub fn wait_for_pod_phase(&self, ns: &str, name: &str, want: &str, timeout: Duration) -> Value {
        self.wait_pod(ns, name, timeout, &format!("phase {want}"), |pod| {
            if phase(pod) == want {
                Ok(pod.clone())
            } else {
                Err(format!("phase {:?}", phase(pod)))
            }
        })
    }

    /// Waits until container `container` of the pod waits with `reason`
    /// (`CreateContainerConfigError` …); returns the waiting message.
    pub fn wait_waiting(
        &self,
        ns: &str,
        name: &str,
        container: &str,
        reason: &str,
        timeout: Duration,
    ) -> String {
        self.wait_pod(ns, name, timeout, reason, |p| {
            let cs =
                crate::pod_reading::container_status(p, container).ok_or("no container status")?;
            match crate::pod_reading::waiting_reason(cs) {
                Some(r) if r == reason => Ok(cs["state"]["waiting"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()),
                other => Err(format!("waiting reason {other:?}")),
            }
        })
    }

    /// Waits until the pod is Running and Ready; returns the pod.
    pub fn wait_for_pod_ready(&self, ns: &str, name: &str, timeout: Duration) -> Value {
        self.wait_pod(ns, name, timeout, "Running and Ready", |pod| {
            if phase(pod) == "Running" && is_ready(pod) {
                Ok(pod.clone())
            } else {
                Err("not Running and Ready yet".into())
            }
        })
    }

    /// Waits until the pod object is gone from the API.
    pub fn wait_pod_gone(&self, ns: &str, name: &str, timeout: Duration) {
        self.wait_for(
            timeout,
            &format!("pod {ns}/{name} removed"),
            || match self.pod(ns, name) {
                None => Ok(()),
                Some(pod) => Err(summary(&pod)),
            },
        )
    }

    /// The pods in `ns` that match label selector `selector` (URL-encoded, e.g. `app%3Dweb`)
    /// and are not being deleted; none when the list cannot be read.
    pub fn live_pods(&self, ns: &str, selector: &str) -> Vec<Value> {
        let mut pods = self.list(&format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector={selector}"
        ));
        pods.retain(|p| p["metadata"]["deletionTimestamp"].is_null());
        pods
    }

    /// The events about pod `ns/name`, oldest first.
    pub fn pod_events(&self, ns: &str, name: &str) -> Vec<Value> {
        let mut events: Vec<Value> = self
            .list(&format!("/api/v1/namespaces/{ns}/events"))
            .into_iter()
            .filter(|e| e["involvedObject"]["kind"] == "Pod" && e["involvedObject"]["name"] == name)
            .collect();
        events.sort_by(|a, b| {
            let t = |e: &Value| {
                e["lastTimestamp"]
                    .as_str()
                    .or(e["eventTime"].as_str())
                    .unwrap_or("")
                    .to_string()
            };
            t(a).cmp(&t(b))
        });
        events
    }

    /// One line per event about the pod (`reason (count): message`), for failure messages.
    pub fn event_lines(&self, ns: &str, name: &str) -> String {
        let lines: Vec<String> = self
            .pod_events(ns, name)
            .iter()
            .map(|e| {
                format!(
                    "  {} ({}): {}",
                    e["reason"].as_str().unwrap_or("?"),
                    e["count"].as_u64().unwrap_or(1),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        format!(
            "----- events about pod {ns}/{name} -----\n{}",
            lines.join("\n")
        )
    }

    /// `reason` of each event about the pod.
    pub fn pod_event_reasons(&self, ns: &str, name: &str) -> Vec<String> {
        self.pod_events(ns, name)
            .iter()
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect()
    }

    /// Waits until there are events with each of `reasons` about pod `ns/name`; returns every
    /// event reason about it then.
    pub fn wait_pod_event_reasons(
        &self,
        ns: &str,
        name: &str,
        reasons: &[&str],
        timeout: Duration,
    ) -> Vec<String> {
        self.wait_for(
            timeout,
            &format!("events {reasons:?} about pod {ns}/{name}"),
            || {
                let seen = self.pod_event_reasons(ns, name);
                if reasons.iter().all(|r| seen.iter().any(|s| s == r)) {
                    Ok(seen)
                } else {
                    Err(seen)
                }
            },
        )
    }

    /// `kubectl exec -n NS POD [-c C] -- CMD…`, whatever the outcome.
    pub fn exec(&self, ns: &str, pod: &str, container: Option<&str>, cmd: &[&str]) -> Run {
        let mut args = vec!["exec", "-n", ns, pod];
        if let Some(c) = container {
            args.extend(["-c", c]);
        }
        args.push("--");
        args.extend(cmd);
        self.kubectl().run(&args)
    }

    /// `kubectl exec` that must succeed; returns stdout.
    pub fn exec_ok(&self, ns: &str, pod: &str, container: Option<&str>, cmd: &[&str]) -> String {
        let r = self.exec(ns, pod, container, cmd);
        if !r.success() {
            panic!(
                "kubectl exec failed\n{}\n{}",
                r.describe(),
                self.logs().render()
            );
        }
        r.stdout
    }

    /// `kubectl logs -n NS POD [-c C] [EXTRA…]`, whatever the outcome.
    pub fn logs_of(&self, ns: &str, pod: &str, container: Option<&str>, extra: &[&str]) -> Run {
        let mut args = vec!["logs", "-n", ns, pod];
        if let Some(c) = container {
            args.extend(["-c", c]);
        }
        args.extend(extra);
        self.kubectl().run(&args)
    }

    /// Deletes a pod without waiting (`kubectl delete --wait=false`).
    pub fn delete_pod(&self, ns: &str, name: &str) {
        self.kubectl()
            .ok(&["delete", "pod", "-n", ns, name, "--wait=false"]);
    }
}
