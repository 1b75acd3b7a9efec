//! Stopping: one container (preStop hook, its stop signal, SIGKILL when the grace period is
//! up) and the whole pod (apps together, then sidecars one by one in the order given).

use super::{PodWorker, all_containers};
use crate::pod::hooks;
use crate::pod::plan::KillTarget;
use crate::runtime::ContainerId;
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

impl PodWorker {
    /// Stops one container: preStop, then its stop signal, then SIGKILL when `grace` is up.
    pub(super) async fn kill(
        &self,
        pod: &Pod,
        name: &str,
        id: &str,
        grace: Duration,
        pre_stop: bool,
    ) {
        let Ok(cid) = ContainerId::new(id.to_string()) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + grace;
        let c = all_containers(pod).into_iter().find(|c| c.name == name);
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        if pre_stop
            && let Some(hook) = c
                .as_ref()
                .and_then(|c| c.lifecycle.as_ref())
                .and_then(|l| l.pre_stop.as_ref())
            && let Err(msg) = hooks::run(self.cx.runtime.as_ref(), &cid, hook, &ip, grace).await
        {
            self.cx
                .events
                .record(
                    pod,
                    true,
                    "FailedPreStopHook",
                    &msg,
                    Some(&format!("spec.containers{{{name}}}")),
                )
                .await;
        }
        let signal = self
            .cx
            .images
            .get(&c.and_then(|c| c.image).unwrap_or_default())
            .await
            .ok()
            .flatten()
            .and_then(|i| i.config.stop_signal)
            .and_then(|s| signal_number(&s))
            .unwrap_or(15);
        let _ = self.cx.runtime.kill(&cid, signal).await;
        let waited = tokio::time::timeout_at(deadline, self.cx.runtime.wait_exit(&cid)).await;
        if waited.is_err() {
            let _ = self.cx.runtime.kill(&cid, 9).await;
            let _ = tokio::time::timeout(Duration::from_secs(10), self.cx.runtime.wait_exit(&cid))
                .await;
        }
    }

    pub(super) async fn kill_pod(
        &self,
        pod: &Pod,
        grace: Duration,
        apps: &[KillTarget],
        sidecars: &[KillTarget],
    ) {
        let start = tokio::time::Instant::now();
        let ids: Vec<String> = apps.iter().map(|t| t.id.to_string()).collect();
        let kills = apps
            .iter()
            .zip(&ids)
            .map(|(t, id)| self.kill(pod, &t.name, id, grace, t.pre_stop));
        futures::future::join_all(kills).await;
        for t in sidecars {
            let left = grace
                .saturating_sub(start.elapsed())
                .max(Duration::from_secs(2));
            self.kill(pod, &t.name, &t.id.to_string(), left, t.pre_stop)
                .await;
        }
    }
}

/// A signal by name (`SIGQUIT`, `QUIT`) or number, as an image's STOPSIGNAL gives it.
fn signal_number(s: &str) -> Option<i32> {
    let name = s.trim().trim_start_matches("SIG");
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "WINCH" => 28,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_signals_parse_by_name_or_number() {
        assert_eq!(signal_number("SIGQUIT"), Some(3));
        assert_eq!(signal_number("15"), Some(15));
        assert_eq!(signal_number("SIGNOPE"), None);
    }
}
