//! Test builders for the Deployment planner: a Deployment `web` (selector `app=web`) and
//! ReplicaSets owned by it, each with its own template unless built from the Deployment's.

use super::claim::controller_ref;
use super::revision::{DESIRED_REPLICAS, MAX_REPLICAS, REVISION};
use super::template::HASH_LABEL;
use berth_shared::k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    RollingUpdateDeployment,
};
use berth_shared::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, Time,
};
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use jiff::Timestamp;
use std::collections::BTreeMap;

pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn int_or_percent(v: &str) -> IntOrString {
    match v.parse::<i32>() {
        Ok(i) => IntOrString::Int(i),
        Err(_) => IntOrString::String(v.into()),
    }
}

pub fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// A rolling-update Deployment at generation 1 with a 600 s progress deadline.
pub fn deployment(replicas: i32, max_surge: &str, max_unavailable: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("d-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: template("nginx:new"),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(int_or_percent(max_surge)),
                    max_unavailable: Some(int_or_percent(max_unavailable)),
                }),
            }),
            revision_history_limit: Some(10),
            progress_deadline_seconds: Some(600),
            ..Default::default()
        }),
        status: None,
    }
}

pub fn recreate(mut d: Deployment) -> Deployment {
    if let Some(s) = d.spec.as_mut() {
        s.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
    }
    d
}

pub fn with_image(mut d: Deployment, image: &str) -> Deployment {
    if let Some(s) = d.spec.as_mut() {
        s.template = template(image);
    }
    d
}

/// A ReplicaSet of `web` running image `name`, created at second `revision`, with
/// the revision annotation and no status.
pub fn rs(name: &str, revision: i64, replicas: i32) -> ReplicaSet {
    rs_with_template(name, revision, replicas, template(name))
}

/// The ReplicaSet running the Deployment's current template.
pub fn new_rs_of(d: &Deployment, name: &str, revision: i64, replicas: i32) -> ReplicaSet {
    let tpl = d.spec.as_ref().map(|s| s.template.clone()).unwrap();
    rs_with_template(name, revision, replicas, tpl)
}

fn rs_with_template(
    name: &str,
    revision: i64,
    replicas: i32,
    mut tpl: PodTemplateSpec,
) -> ReplicaSet {
    let hash = name.rsplit('-').next().unwrap_or(name).to_string();
    if let Some(m) = tpl.metadata.as_mut() {
        m.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.clone());
    }
    let owner = controller_ref(&deployment(1, "1", "0"));
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".into()),
            generation: Some(1),
            creation_timestamp: Some(Time(t(revision))),
            labels: Some(labels(&[("app", "web"), (HASH_LABEL, &hash)])),
            annotations: Some(labels(&[(REVISION, &revision.to_string())])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web"), (HASH_LABEL, &hash)])),
                ..Default::default()
            },
            template: Some(tpl),
            min_ready_seconds: None,
        }),
        status: None,
    }
}

/// Builder methods on ReplicaSets.
pub trait RsExt {
    fn with_status(self, replicas: i32, ready: i32, available: i32) -> Self;
    fn with_annotations(self, pairs: &[(&str, &str)]) -> Self;
    fn sized_for(self, desired: i32, max: i32) -> Self;
    fn orphan(self) -> Self;
}

impl RsExt for ReplicaSet {
    fn with_status(mut self, replicas: i32, ready: i32, available: i32) -> Self {
        self.status = Some(ReplicaSetStatus {
            replicas,
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            fully_labeled_replicas: Some(replicas),
            observed_generation: Some(1),
            ..Default::default()
        });
        self
    }

    fn with_annotations(mut self, pairs: &[(&str, &str)]) -> Self {
        let a = self.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in pairs {
            a.insert(k.to_string(), v.to_string());
        }
        self
    }

    fn sized_for(self, desired: i32, max: i32) -> Self {
        self.with_annotations(&[
            (DESIRED_REPLICAS, &desired.to_string()),
            (MAX_REPLICAS, &max.to_string()),
        ])
    }

    fn orphan(mut self) -> Self {
        self.metadata.owner_references = None;
        self
    }
}

use super::plan::{Action, Input, Plan, PodInfo, plan, selector};
use berth_shared::k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};

/// Plans one pass.
pub fn run(d: &Deployment, rss: &[ReplicaSet], pods: &[PodInfo], now: Timestamp) -> Plan {
    let input = Input {
        deployment: d,
        selector: &selector(d).unwrap(),
        replica_sets: rss,
        pods,
    };
    plan(input, now)
}

/// The image a ReplicaSet runs.
pub fn image(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn size(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1)
}

/// The ReplicaSet writes of a plan, as `create <image> <n>`, `<name> -> <n>`, `delete <name>`.
pub fn writes(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateReplicaSet(rs) => Some(format!("create {} {}", image(rs), size(rs))),
            Action::UpdateReplicaSet(rs) => Some(format!(
                "{} -> {}",
                rs.metadata.name.as_deref().unwrap_or_default(),
                size(rs)
            )),
            Action::DeleteReplicaSet { name, .. } => Some(format!("delete {name}")),
            _ => None,
        })
        .collect()
}

/// The event messages of a plan.
pub fn events(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The status a plan writes, if any.
pub fn written_status(p: &Plan) -> Option<DeploymentStatus> {
    p.actions.iter().rev().find_map(|a| match a {
        Action::UpdateStatus(s) => Some((**s).clone()),
        _ => None,
    })
}

/// A condition of a status by type.
pub fn cond<'a>(s: &'a DeploymentStatus, kind: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == kind)
}

/// (status, reason, message) of the Progressing condition.
pub fn progressing(s: &DeploymentStatus) -> (String, String, String) {
    cond(s, "Progressing")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default()
}

/// A planner-only world: the plan's writes are applied to in-memory objects, and pods are
/// imagined from the ReplicaSets (created at once; available when `healthy` says so).
pub struct Sim {
    pub d: Deployment,
    pub rss: Vec<ReplicaSet>,
    pub clock: i64,
    pub events: Vec<String>,
    next_uid: u32,
}

impl Sim {
    pub fn new(d: Deployment, rss: Vec<ReplicaSet>) -> Sim {
        Sim {
            d,
            rss,
            clock: 1000,
            events: Vec::new(),
            next_uid: 0,
        }
    }

    /// A simulation of `d` rolled out completely, every pod healthy.
    pub fn settled(d: Deployment) -> Sim {
        let mut sim = Sim::new(d, Vec::new());
        sim.settle(|_| true);
        sim
    }

    pub fn pass(&mut self) -> Plan {
        let p = run(&self.d, &self.rss, &[], t(self.clock));
        self.apply(&p);
        self.clock += 1;
        p
    }

    pub fn apply(&mut self, p: &Plan) {
        for a in &p.actions {
            match a {
                Action::CreateReplicaSet(rs) => {
                    let mut rs = (**rs).clone();
                    self.next_uid += 1;
                    rs.metadata.uid = Some(format!("sim-{}", self.next_uid));
                    rs.metadata.creation_timestamp = Some(Time(t(self.clock)));
                    rs.metadata.generation = Some(1);
                    rs.status = Some(ReplicaSetStatus::default());
                    self.rss.push(rs);
                }
                Action::UpdateReplicaSet(rs) => {
                    if let Some(cur) = self
                        .rss
                        .iter_mut()
                        .find(|r| r.metadata.name == rs.metadata.name)
                    {
                        let status = cur.status.take();
                        *cur = (**rs).clone();
                        cur.status = status;
                    }
                }
                Action::DeleteReplicaSet { name, .. } => {
                    self.rss
                        .retain(|r| r.metadata.name.as_deref() != Some(name));
                }
                Action::AdoptReplicaSet { name, .. } => {
                    let owner = controller_ref(&self.d);
                    if let Some(cur) = self
                        .rss
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                    {
                        cur.metadata.owner_references = Some(vec![owner]);
                    }
                }
                Action::ReleaseReplicaSet { name, .. } => {
                    if let Some(cur) = self
                        .rss
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                    {
                        cur.metadata.owner_references = None;
                    }
                }
                Action::SetRevision(rev) => {
                    self.d
                        .metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .insert(REVISION.into(), rev.clone());
                }
                Action::UpdateStatus(s) => self.d.status = Some((**s).clone()),
                Action::Event { message, .. } => self.events.push(message.clone()),
            }
        }
    }

    /// The ReplicaSet controller and kubelets: every ReplicaSet gets its pods; they are
    /// available when `healthy` says so for the ReplicaSet.
    pub fn pods(&mut self, healthy: impl Fn(&ReplicaSet) -> bool) {
        for rs in &mut self.rss {
            let n = size(rs);
            let up = if healthy(rs) { n } else { 0 };
            let generation = rs.metadata.generation;
            *rs = rs.clone().with_status(n, up, up);
            if let Some(s) = rs.status.as_mut() {
                s.observed_generation = generation;
            }
        }
    }

    /// Passes and pods until a pass writes no ReplicaSet (at most 50 rounds).
    pub fn settle(&mut self, healthy: impl Fn(&ReplicaSet) -> bool) {
        for _ in 0..50 {
            self.pods(&healthy);
            let p = self.pass();
            if writes(&p).is_empty() {
                self.pods(&healthy);
                self.pass();
                return;
            }
        }
        panic!("no convergence: {:?}", self.sizes());
    }

    /// (image, spec.replicas) of every ReplicaSet, oldest first.
    pub fn sizes(&self) -> Vec<(String, i32)> {
        self.rss.iter().map(|r| (image(r), size(r))).collect()
    }

    /// spec.replicas of the ReplicaSet running `img`.
    pub fn size_of(&self, img: &str) -> i32 {
        self.rss
            .iter()
            .find(|r| image(r) == img)
            .map(size)
            .unwrap_or(-1)
    }

    pub fn set_template_image(&mut self, img: &str) {
        if let Some(s) = self.d.spec.as_mut() {
            s.template = template(img);
        }
        self.bump_generation();
    }

    /// Sets `spec.paused` as `kubectl rollout pause` and `resume` do (Some(true), or unset).
    pub fn set_paused(&mut self, paused: bool) {
        if let Some(s) = self.d.spec.as_mut() {
            s.paused = paused.then_some(true);
        }
    }

    pub fn set_replicas(&mut self, n: i32) {
        if let Some(s) = self.d.spec.as_mut() {
            s.replicas = Some(n);
        }
        self.bump_generation();
    }

    pub fn bump_generation(&mut self) {
        self.d.metadata.generation = Some(self.d.metadata.generation.unwrap_or(0) + 1);
    }
}
