//! Keeps the `kubepods` hierarchy (see [`super::cgroup_layout`]) in step with the node's pods,
//! as the kubelet's QoS and pod container managers do: `kubepods` and its two tiers are made
//! (or brought to the current limits) at agent start; a pod's cgroup is made before its
//! sandbox and first container, and the Burstable tier's shares follow the pods in it; a
//! deleted pod's cgroup goes (in every v1 hierarchy runc made it in).
//!
//! What the agent knows of the pods here is rebuilt from the pods it syncs, so a restarted
//! agent gets the Burstable shares right again once each pod's worker has passed. Pods started
//! by an agent before this layout (containers in `/<namespace>/pod<uid>`) keep running where
//! they are; containers they start afterwards go to the new layout.

use super::cgroup_layout::{self, CgroupLimits, KUBEPODS};
use super::cgroups::{CgroupError, CgroupFs};
use crate::pod::qos::{self, QosClass};
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The pod worker's port to the pods' cgroups.
pub trait PodCgroups: Send + Sync + std::fmt::Debug {
    /// Makes the pod's cgroup with its limits (nothing when it is already made).
    fn ensure(&self, pod: &Pod) -> Result<(), CgroupError>;
    /// Removes the pod's cgroup (its containers removed first) and forgets the pod.
    fn release(&self, uid: &str) -> Result<(), CgroupError>;
}

/// A pod as its cgroups know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    qos: QosClass,
    cpu_request: i64,
    limits: CgroupLimits,
}

/// The agent's cgroups under `/<root>`.
#[derive(Debug)]
pub struct QosCgroups {
    fs: CgroupFs,
    root: String,
    pod_max_pids: i64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    pods: BTreeMap<String, Known>,
    /// The Burstable shares last written.
    burstable_shares: Option<u64>,
}

impl QosCgroups {
    /// The cgroups under `/<root>` of the host's cgroup filesystem.
    pub fn new(fs: CgroupFs, root: &str, pod_max_pids: i64) -> QosCgroups {
        QosCgroups {
            fs,
            root: root.trim_matches('/').to_string(),
            pod_max_pids,
            state: Mutex::default(),
        }
    }

    fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }

    /// Makes `kubepods` with `kubepods` limits and its two tiers (at agent start).
    pub fn start(&self, kubepods: &CgroupLimits) -> Result<(), CgroupError> {
        self.fs.apply(&self.path(KUBEPODS), kubepods)?;
        let best_effort = cgroup_layout::tier(QosClass::BestEffort).unwrap_or_default();
        self.fs.apply(
            &self.path(&format!("{KUBEPODS}/{best_effort}")),
            &cgroup_layout::best_effort_limits(),
        )?;
        let mut state = self.lock();
        self.apply_burstable(&mut state)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply_burstable(&self, state: &mut State) -> Result<(), CgroupError> {
        let limits = cgroup_layout::burstable_limits(
            state
                .pods
                .values()
                .filter(|k| k.qos == QosClass::Burstable)
                .map(|k| k.cpu_request),
        );
        if state.burstable_shares == limits.cpu_shares {
            return Ok(());
        }
        let burstable = cgroup_layout::tier(QosClass::Burstable).unwrap_or_default();
        self.fs
            .apply(&self.path(&format!("{KUBEPODS}/{burstable}")), &limits)?;
        state.burstable_shares = limits.cpu_shares;
        Ok(())
    }

    /// Removes everything under `/<root>` (uninstall: the containers are gone by then).
    pub fn remove_all(fs: &CgroupFs, root: &str) -> Result<(), CgroupError> {
        fs.remove(root)
    }
}

impl PodCgroups for QosCgroups {
    fn ensure(&self, pod: &Pod) -> Result<(), CgroupError> {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return Ok(());
        };
        let qos = qos::class(pod);
        let known = Known {
            qos,
            cpu_request: cgroup_layout::pod_cpu_request(pod),
            limits: cgroup_layout::pod_limits(pod, qos, self.pod_max_pids),
        };
        let mut state = self.lock();
        let path = self.path(&cgroup_layout::pod_parent(qos, uid));
        if state.pods.get(uid) == Some(&known) && self.fs.exists(&path) {
            return Ok(());
        }
        self.fs.apply(&path, &known.limits)?;
        state.pods.insert(uid.to_string(), known);
        self.apply_burstable(&mut state)
    }

    fn release(&self, uid: &str) -> Result<(), CgroupError> {
        let mut state = self.lock();
        state.pods.remove(uid);
        let mut result = Ok(());
        for qos in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            if let Err(e) = self
                .fs
                .remove(&self.path(&cgroup_layout::pod_parent(qos, uid)))
            {
                result = Err(e);
            }
        }
        self.apply_burstable(&mut state)?;
        result
    }
}

/// Pod cgroups that are never made (unit tests of the pod worker).
#[derive(Debug, Default)]
pub struct NoCgroups;

impl PodCgroups for NoCgroups {
    fn ensure(&self, _: &Pod) -> Result<(), CgroupError> {
        Ok(())
    }
    fn release(&self, _: &str) -> Result<(), CgroupError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, qos: &str, cpu: Option<&str>) -> Pod {
        let resources = match cpu {
            Some(c) => json!({"requests": {"cpu": c}}),
            None => json!({}),
        };
        serde_json::from_value(json!({"metadata": {"uid": uid},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]},
            "status": {"qosClass": qos}}))
        .unwrap()
    }

    fn read(mount: &std::path::Path, p: &str) -> String {
        std::fs::read_to_string(mount.join(p)).unwrap_or_else(|e| format!("<{e}>"))
    }

    #[test]
    fn pods_come_and_go_in_their_tiers_and_burstable_shares_follow() {
        let mount = tempfile::tempdir().unwrap();
        let m = mount.path();
        let cg = QosCgroups::new(CgroupFs::at(m), "/ns/", 100);
        let kubepods = CgroupLimits {
            memory: Some(1 << 30),
            cpu_shares: Some(1024),
            cpu_quota: None,
            pids: Some(1000),
        };
        cg.start(&kubepods).unwrap();
        assert_eq!(
            read(m, "memory/ns/kubepods/memory.limit_in_bytes"),
            "1073741824"
        );
        assert_eq!(read(m, "cpu/ns/kubepods/besteffort/cpu.shares"), "2");
        assert_eq!(read(m, "cpu/ns/kubepods/burstable/cpu.shares"), "2");

        cg.ensure(&pod("a", "Burstable", Some("250m"))).unwrap();
        cg.ensure(&pod("b", "Burstable", Some("750m"))).unwrap();
        cg.ensure(&pod("c", "BestEffort", None)).unwrap();
        assert_eq!(read(m, "cpu/ns/kubepods/burstable/cpu.shares"), "1024");
        assert_eq!(read(m, "pids/ns/kubepods/burstable/poda/pids.max"), "100");
        assert_eq!(read(m, "cpu/ns/kubepods/besteffort/podc/cpu.shares"), "2");

        cg.release("b").unwrap();
        assert_eq!(read(m, "cpu/ns/kubepods/burstable/cpu.shares"), "256");
        assert!(!m.join("cpu/ns/kubepods/burstable/podb").exists());
        assert!(m.join("cpu/ns/kubepods/burstable/poda").exists());
        cg.release("never-seen").unwrap();

        QosCgroups::remove_all(&CgroupFs::at(m), "ns").unwrap();
        assert!(!m.join("memory/ns").exists());
    }

    #[test]
    fn a_pod_already_made_is_not_written_again() {
        let mount = tempfile::tempdir().unwrap();
        let m = mount.path();
        let cg = QosCgroups::new(CgroupFs::at(m), "ns", -1);
        let p = pod("a", "Guaranteed", Some("1"));
        cg.ensure(&p).unwrap();
        std::fs::write(m.join("cpu/ns/kubepods/poda/cpu.shares"), "marker").unwrap();
        cg.ensure(&p).unwrap();
        assert_eq!(read(m, "cpu/ns/kubepods/poda/cpu.shares"), "marker");
        assert!(
            !m.join("pids/ns/kubepods/poda/pids.max").exists(),
            "-1 writes no pid limit"
        );
    }
}
