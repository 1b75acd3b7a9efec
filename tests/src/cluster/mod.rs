//! A whole Berth cluster on this host for one test: a private containerd, a registry holding
//! the fixture images (the agents' `docker.io` mirror), the controller with a cluster CIDR of its
//! own, and N agents (`node-a-<run>`, `node-b-<run>`, …) each with its own containerd namespace,
//! CNI bridge, root and log directories.
//!
//! Node names carry a per-cluster suffix because the agent derives its CNI network name from
//! the node name (`berth-<node>`), and that name prefixes its netns and tags its iptables rules:
//! with a bare `node-a`, this cluster's teardown would sweep the pods of any other `node-a`
//! agent on the host (a developer's smoke test, a second worktree's run), and theirs ours. `start` returns once every Node is Ready with a podCIDR; Drop
//! leaves the host as it found it (see `teardown`).
//!
//! With [`ClusterConfig::hosts`], agent `i` runs on host `i` of a [`TestBed`] (a netns of its
//! own, with its own address) instead of in this machine's netns; the controller and the
//! registry then listen on the bed's A.1, which every host reaches.

mod pods;
pub mod record;
mod teardown;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::agent::{Agent, AgentConfig, LOOPBACK_LISTEN, LOOPBACK_NODE_IP};
use crate::api::Api;
use crate::client::{Credentials, Req};
use crate::containerd::Containerd;
use crate::controller::{Controller, controller_binary};
use crate::fixtures::{Fixture, SEEDED};
use crate::host::{
    HostLock, TOOL_DEADLINE, Tenancy, require_root, require_tool, tenancy, unique_suffix,
};
use crate::kubectl::Kubectl;
use crate::pki::{client_cert_user, write_kubeconfig};
use crate::process::{LogTail, run};
use crate::registry::Registry;
use crate::testbed::{TestBed, TestBedLayout};
use crate::wait::wait_for_with;

/// The `--eviction-hard` agents run with unless a test gives its own: the kubelet's memory
/// threshold, and disk thresholds as quantities. The kubelet's defaults (`nodefs.available<10%`,
/// `imagefs.available<15%`) are met on a shared development machine whose disk is mostly
/// taken, which would taint every node with `disk-pressure` and leave pods Pending in tests
/// about other things.
pub const TEST_EVICTION_HARD: &str =
    "memory.available<100Mi,nodefs.available<100Mi,imagefs.available<100Mi,nodefs.inodesFree<1%";

/// How long an agent may take from start to a Ready Node with a podCIDR.
pub const NODE_READY_DEADLINE: Duration = Duration::from_secs(60);

/// Per-agent options.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// `--node-labels`
    pub labels: String,
    /// `--register-with-taints`
    pub taints: String,
    pub max_pods: u32,
    pub extra_args: Vec<String>,
    /// `--token`, when not the cluster's (a per-node token from `berth-controller token
    /// create`).
    pub token: Option<String>,
    /// `--server`, when not the controller's URL (several servers, comma-separated, for
    /// failover tests).
    pub server: Option<String>,
    /// Capabilities dropped from the agent's bounding set (see `AgentConfig::bounding_drop`).
    pub bounding_drop: Vec<String>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            labels: String::new(),
            taints: String::new(),
            max_pods: 110,
            extra_args: Vec::new(),
            token: None,
            server: None,
            bounding_drop: Vec::new(),
        }
    }
}

/// What to start.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    pub agents: Vec<AgentOptions>,
    /// Leave the registry empty instead of pushing the seeded fixtures (busybox:1.28,
    /// nginx:1.14.2, nginx:1.16.1).
    pub skip_fixtures: bool,
    /// The controller listens on every address, so pods reach it at their node's address.
    pub controller_on_all_addresses: bool,
    /// Extra `berth-controller serve` flags (e.g. `--node-monitor-grace-period 15s`). On a
    /// test bed, [`SEGMENT_A`] in them stands for segment A's first three octets (the
    /// segment is picked at start), e.g. `--service-lb-pool {segment-a}.200-{segment-a}.209`.
    pub controller_args: Vec<String>,
    /// Run the agents on a test bed of this layout (agent `i` on host `i`; at least as many
    /// hosts as agents) instead of in this machine's netns.
    pub hosts: Option<TestBedLayout>,
    /// Put containerd's root (the agents' image filesystem) on a tmpfs of this many bytes.
    pub containerd_root_size: Option<u64>,
}

/// In [`ClusterConfig::controller_args`]: segment A's first three octets (`172.31.7`).
pub const SEGMENT_A: &str = "{segment-a}";

fn segment_a_prefix(bed: &TestBed) -> String {
    let a = bed.gateway().to_string();
    a.rsplit_once('.').map_or(a.clone(), |(p, _)| p.to_string())
}

impl ClusterConfig {
    /// `n` agents with default options.
    pub fn agents(n: usize) -> ClusterConfig {
        ClusterConfig {
            agents: vec![AgentOptions::default(); n],
            skip_fixtures: false,
            controller_on_all_addresses: false,
            controller_args: Vec::new(),
            hosts: None,
            containerd_root_size: None,
        }
    }

    /// One agent with default options on each host of a test bed of `layout`.
    pub fn on_test_bed(layout: TestBedLayout) -> ClusterConfig {
        ClusterConfig {
            hosts: Some(layout.clone()),
            ..ClusterConfig::agents(layout.len())
        }
    }
}

/// `args`, with `--eviction-hard TEST_EVICTION_HARD` unless they set it.
pub fn with_test_eviction_hard(args: &[String]) -> Vec<String> {
    let mut out = args.to_vec();
    if !args.iter().any(|a| a.starts_with("--eviction-hard")) {
        out.extend([
            "--eviction-hard".to_string(),
            TEST_EVICTION_HARD.to_string(),
        ]);
    }
    out
}

/// A running cluster. Fields drop in order after `Drop::drop` (see `teardown`).
pub struct Cluster {
    agents: Vec<Agent>,
    controller: Controller,
    registry: Registry,
    containerd: Containerd,
    api: Api,
    tmp: Option<TempDir>,
    cluster_cidr: String,
    service_cidr: String,
    token: String,
    suffix: String,
    /// This cluster's share of the host state (its lane; sysctls restored by the last out).
    tenancy: Tenancy,
    /// The hosts the agents run on, if on a test bed (removed after the agents' pods).
    bed: Option<TestBed>,
    /// The name of this cluster's [`record::Record`] file.
    record_name: String,
    _lock: HostLock,
}

impl Cluster {
    /// Starts a cluster with `n` agents.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(ClusterConfig::agents(n))
    }

    /// Starts a cluster with one agent; returns it with that agent's node name.
    pub fn start_one() -> (Cluster, String) {
        let c = Cluster::start(1);
        let node = c.node_name(0).to_string();
        (c, node)
    }

    /// Starts a cluster as `config` says.
    pub fn start_with(config: ClusterConfig) -> Cluster {
        require_root();
        for t in ["ip", "iptables", "iptables-save", "skopeo", "umount"] {
            require_tool(t);
        }
        if config.agents.len() > 26 {
            panic!("at most 26 agents (node-a … node-z)");
        }
        if let Some(layout) = &config.hosts
            && layout.len() < config.agents.len()
        {
            panic!(
                "{} agents on a test bed of {} hosts: each agent needs a host",
                config.agents.len(),
                layout.len()
            );
        }
        // Shared or exclusive as the running test is classified (`host::sharing`).
        let lock = HostLock::acquire();
        tenancy::critical(record::recover_abandoned);
        tenancy::release_dead();
        let tenancy = Tenancy::arrive();
        let suffix = unique_suffix();
        let record_name = format!("{}-{suffix}", std::process::id());
        let bed = config.hosts.as_ref().map(|layout| {
            // Built while no other cluster arrives or leaves: the segments it picks as free
            // are routed before another bed looks.
            let bed = tenancy::critical(|| TestBed::build(&suffix, layout));
            // Recorded at once: a test killed before the cluster records itself still has its
            // bed removed by the next cluster. (A panic drops `bed`, which removes it.)
            record::Record {
                owner: std::process::id(),
                testbed: Some(bed.leftovers()),
                ..record::Record::default()
            }
            .save(&record_name);
            bed
        });
        let containerd = Containerd::start_with_root_size(config.containerd_root_size);
        let registry = match &bed {
            Some(bed) => Registry::start_on(bed.gateway()),
            None => Registry::start(),
        };
        if !config.skip_fixtures {
            for f in SEEDED {
                registry.push(&f.layout(), &f.reference(), f.repository, f.tag);
            }
        }
        let cluster_cidr = tenancy.cluster_cidr();
        let service_cidr = tenancy.service_cidr();
        let mut controller_args = vec![
            "--cluster-cidr".to_string(),
            cluster_cidr.clone(),
            "--service-cidr".to_string(),
            service_cidr.clone(),
        ];
        if let Some(bed) = &bed {
            // Agents in the bed's hosts dial A.1; the serving certificate must name it.
            controller_args.extend(["--tls-san".to_string(), bed.gateway().to_string()]);
        }
        controller_args.extend(config.controller_args.iter().map(|a| match &bed {
            Some(bed) => a.replace(SEGMENT_A, &segment_a_prefix(bed)),
            None => a.clone(),
        }));
        let controller_args: Vec<&str> = controller_args.iter().map(String::as_str).collect();
        let controller = if config.controller_on_all_addresses || bed.is_some() {
            Controller::start_on_all_addresses(&controller_args)
        } else {
            Controller::start_with(&controller_args)
        };
        let token = join_token(&controller);
        let api = controller.admin_api();
        let tmp = tempfile::Builder::new()
            .prefix("berth-cluster-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        std::fs::write(tmp.path().join("registries.yaml"), registry.mirrors_yaml())
            .unwrap_or_else(|e| panic!("cannot write registries.yaml: {e}"));
        let mut cluster = Cluster {
            agents: Vec::new(),
            controller,
            registry,
            containerd,
            api,
            tmp: Some(tmp),
            cluster_cidr,
            service_cidr,
            token,
            record_name,
            suffix,
            tenancy,
            bed,
            _lock: lock,
        };
        // From here on a panic drops `cluster`, which tears everything down; a killed test
        // process leaves the record for the next cluster to sweep.
        cluster.save_record();
        for opts in &config.agents {
            let i = cluster.agents.len();
            let agent = Agent::start(cluster.agent_config(i, opts));
            cluster.agents.push(agent);
            cluster.save_record();
        }
        for i in 0..cluster.agents.len() {
            cluster.wait_node_ready(i);
        }
        cluster
    }

    /// Starts one more agent after the cluster is up (a node joining later) and waits until its
    /// Node is Ready; returns its index.
    pub fn add_agent(&mut self, opts: &AgentOptions) -> usize {
        let i = self.agents.len();
        if i >= 26 {
            panic!("at most 26 agents (node-a … node-z)");
        }
        let agent = Agent::start(self.agent_config(i, opts));
        self.agents.push(agent);
        self.save_record();
        self.wait_node_ready(i);
        i
    }

    /// Imports `fixtures` into the containerd namespace of agent `i` before it is added (through
    /// `berth-agent image import`, so under the names a manifest's image resolves to): the node
    /// joins with the images warm, as a host provisioned with them does.
    pub fn preload_images(&self, i: usize, fixtures: &[Fixture]) {
        let config = self.agent_config(i, &AgentOptions::default());
        for f in fixtures {
            let archive = self
                .scratch()
                .join(format!("preload-{}.tar", f.reference()));
            if !archive.is_file() {
                crate::fixtures::layout::tar_layout(&f.layout(), &archive)
                    .unwrap_or_else(|e| panic!("cannot pack {}: {e}", f.full_name()));
            }
            let archive = archive.to_string_lossy().into_owned();
            let r = crate::agent::image_subcommand(
                &crate::agent::agent_binary(),
                &config,
                &["image", "import", &archive],
            );
            if !r.success() {
                panic!(
                    "importing {} for {}: {}",
                    f.full_name(),
                    config.node_name,
                    r.describe()
                );
            }
        }
    }

    /// The node name agent `i` has, or will have when it is added: `node-a-<run>` for 0, ….
    pub fn node_name_of(&self, i: usize) -> String {
        let letter = char::from(b'a' + u8::try_from(i).unwrap_or(0));
        format!("node-{letter}-{}", self.suffix)
    }

    /// The flags of agent `i` (`node-a-<run>` for 0, …); on a test bed, it runs in host `i`.
    fn agent_config(&self, i: usize, opts: &AgentOptions) -> AgentConfig {
        let letter = char::from(b'a' + u8::try_from(i).unwrap_or(0));
        let (server, listen, node_ip, netns) = match &self.bed {
            None => (
                self.controller.url().to_string(),
                LOOPBACK_LISTEN.to_string(),
                LOOPBACK_NODE_IP.to_string(),
                None,
            ),
            Some(bed) => {
                let Some(host) = bed.hosts().get(i) else {
                    panic!(
                        "agent {i} has no host: the test bed has {}",
                        bed.hosts().len()
                    );
                };
                let server = format!("https://{}:{}", bed.gateway(), self.controller.port());
                let listen = format!("{}:0", host.address);
                (
                    server,
                    listen,
                    host.address.to_string(),
                    Some(host.netns.clone()),
                )
            }
        };
        AgentConfig {
            server: opts.server.clone().unwrap_or(server),
            token: opts.token.clone().unwrap_or_else(|| self.token.clone()),
            node_name: self.node_name_of(i),
            containerd_socket: self.containerd.socket().to_path_buf(),
            containerd_namespace: format!("berth-test-{}-{letter}", self.suffix),
            cni_bridge: format!("bt{}{letter}", self.suffix),
            cni_bin_dir: PathBuf::from("/usr/lib/cni"),
            cluster_cidr: self.cluster_cidr.clone(),
            registries_config: self.registries_file(),
            node_labels: opts.labels.clone(),
            taints: opts.taints.clone(),
            max_pods: opts.max_pods,
            extra_args: with_test_eviction_hard(&opts.extra_args),
            listen,
            node_ip,
            netns,
            bounding_drop: opts.bounding_drop.clone(),
        }
    }

    /// Waits until agent `i`'s Node is Ready and has a podCIDR; returns the Node.
    pub fn wait_node_ready(&mut self, i: usize) -> Value {
        let name = self.agents[i].node_name().to_string();
        let path = format!("/api/v1/nodes/{name}");
        let logs = self.logs();
        let api = &self.api;
        self.agents[i].wait_running(
            NODE_READY_DEADLINE,
            &format!("Node {name} Ready with a spec.podCIDR"),
            &format!("agent {name}"),
            &logs,
            || {
                let reply = api.get(&path);
                if reply.status != 200 {
                    return Err(reply.describe());
                }
                let node = reply.json();
                let ready = node["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                    .map(|c| c["status"] == "True")
                    .unwrap_or(false);
                let cidr = node["spec"]["podCIDR"].as_str().unwrap_or("");
                if ready && !cidr.is_empty() {
                    Ok(node)
                } else {
                    Err(format!("ready={ready} podCIDR={cidr:?}"))
                }
            },
        )
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }
    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }
    /// Makes `other` (a controller of the same cluster: same store, PKI and token) the one
    /// this cluster's API client, kubectl and teardown use; returns the previous one, e.g. to
    /// kill it.
    pub fn replace_controller(&mut self, other: Controller) -> Controller {
        self.api = other.admin_api();
        std::mem::replace(&mut self.controller, other)
    }
    pub fn containerd(&self) -> &Containerd {
        &self.containerd
    }
    pub fn containerd_mut(&mut self) -> &mut Containerd {
        &mut self.containerd
    }
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// The test bed the agents run on; panics if the cluster is not on one.
    pub fn test_bed(&self) -> &TestBed {
        self.bed
            .as_ref()
            .unwrap_or_else(|| panic!("this cluster is not on a test bed (ClusterConfig::hosts)"))
    }
    /// The run's suffix, which every name of this cluster (nodes, bridges, netns) carries.
    pub fn suffix(&self) -> &str {
        &self.suffix
    }
    pub fn agent(&self, i: usize) -> &Agent {
        &self.agents[i]
    }
    pub fn agent_mut(&mut self, i: usize) -> &mut Agent {
        &mut self.agents[i]
    }
    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }
    /// `node-a-<run>`, `node-b-<run>`, …
    pub fn node_name(&self, i: usize) -> &str {
        self.agents[i].node_name()
    }
    /// The admin API client.
    pub fn api(&self) -> &Api {
        &self.api
    }
    pub fn cluster_cidr(&self) -> &str {
        &self.cluster_cidr
    }
    /// The cluster's `--service-cidr` (a `/22` of 10.43.0.0/16 leased per cluster, so two
    /// clusters on the host never DNAT the same cluster IP).
    pub fn service_cidr(&self) -> &str {
        &self.service_cidr
    }
    pub fn token(&self) -> &str {
        &self.token
    }
    /// A directory for the test's own files (hostPath volumes, image archives), removed at the
    /// end.
    pub fn scratch(&self) -> &Path {
        self.tmp
            .as_ref()
            .map_or(Path::new("/nonexistent"), |t| t.path())
    }
    /// The registries file every agent reads.
    pub fn registries_file(&self) -> PathBuf {
        self.scratch().join("registries.yaml")
    }

    /// Every component's log, for failure messages.
    pub fn logs(&self) -> LogTail {
        let mut files = self.controller.logs().files;
        for a in &self.agents {
            files.extend(a.logs().files);
        }
        files.extend(self.containerd.logs().files);
        // The registry logs every 404 of skopeo's blob probes as an error: it only helps when
        // a pull fails, and then `registry().logs()` has it.
        LogTail { files, lines: 40 }
    }

    /// kubectl with the admin kubeconfig; failures print every component's log.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.controller).with_logs(self.logs())
    }

    /// `kubectl apply -f -` of a manifest (JSON is YAML too); returns kubectl's stdout.
    pub fn apply(&self, manifest: &Value) -> String {
        self.kubectl().apply_stdin(&manifest.to_string())
    }

    /// [`wait_for_with`] with every component's log in the failure message.
    pub fn wait_for<T, O: std::fmt::Debug>(
        &self,
        timeout: Duration,
        what: &str,
        probe: impl FnMut() -> Result<T, O>,
    ) -> T {
        let logs = self.logs();
        wait_for_with(timeout, what, || logs.render(), probe)
    }

    /// [`crate::wait::ensure_for_with`] with every component's log in the failure message.
    pub fn ensure_for<O: std::fmt::Debug>(
        &self,
        duration: Duration,
        what: &str,
        probe: impl FnMut() -> Result<(), O>,
    ) {
        let logs = self.logs();
        crate::wait::ensure_for_with(duration, what, || logs.render(), probe)
    }

    /// SIGKILL agent `i` (its containers keep running).
    pub fn kill9_agent(&mut self, i: usize) {
        self.agents[i].kill9();
    }

    /// Starts agent `i` again on the same directories and flags.
    pub fn restart_agent(&mut self, i: usize) {
        self.agents[i].restart();
        self.save_record();
    }

    /// Starts agent `i` again on the same directories with exactly `extra_args` in place of the
    /// extra flags it had (no `--eviction-hard` is added: `&[]` runs the agent's defaults).
    pub fn restart_agent_with(&mut self, i: usize, extra_args: &[&str]) {
        self.agents[i].config_mut().extra_args = extra_args.iter().map(|a| a.to_string()).collect();
        self.restart_agent(i);
    }

    /// Stops containerd (SIGTERM) and starts it again on the same directories; shims and
    /// containers keep running.
    pub fn restart_containerd(&mut self) {
        self.containerd.restart();
        self.save_record();
    }

    /// Pushes a fixture to the registry under another name (`library/late`, `1.0`).
    pub fn push_fixture(&self, fixture: &Fixture, repository: &str, tag: &str) {
        self.registry
            .push(&fixture.layout(), &fixture.reference(), repository, tag);
    }

    /// `ctr -a SOCK -n <agent i's namespace> ARGS`, which must succeed; returns stdout.
    pub fn ctr(&self, i: usize, args: &[&str]) -> String {
        self.containerd.ctr_ok(self.agents[i].namespace(), args)
    }

    /// How many containers agent `i` holds in containerd for pod `ns/name` (by the pod-uid
    /// label): 0 proves a refusal made nothing.
    pub fn pod_containers(&self, i: usize, ns: &str, name: &str) -> usize {
        self.pod_container_ids(i, ns, name).len()
    }

    /// The ids of the containers agent `i` holds in containerd for pod `ns/name` (by the
    /// pod-uid label).
    pub fn pod_container_ids(&self, i: usize, ns: &str, name: &str) -> Vec<String> {
        let pod = self
            .pod(ns, name)
            .unwrap_or_else(|| panic!("no pod {ns}/{name}"));
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let selector = format!("labels.\"io.berth.pod.uid\"=={uid}");
        self.ctr(i, &["containers", "ls", "-q", &selector])
            .lines()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Asserts that pod `ns/name` (on agent `i`) is Ready again within `timeout` with the same
    /// `main` container, never restarted (`before`, from `container_identity`), running the same
    /// task as in `tasks_before` (from [`Cluster::running_tasks`]): what an outage of the
    /// control plane must leave alone.
    pub fn assert_pod_untouched(
        &self,
        i: usize,
        (ns, name): (&str, &str),
        timeout: Duration,
        before: &(String, u64),
        tasks_before: &std::collections::BTreeMap<String, u32>,
    ) {
        let pod = self.wait_for_pod_ready(ns, name, timeout);
        let after = crate::pod_reading::container_identity(&pod, "main");
        assert_eq!(&after, before, "{name}'s container changed or restarted");
        let tasks_after = self.running_tasks(i);
        assert_eq!(
            tasks_after.get(&before.0),
            tasks_before.get(&before.0),
            "{name}'s task was replaced: {tasks_before:?} → {tasks_after:?}"
        );
    }

    /// Running task PIDs by container id in agent `i`'s containerd namespace: a container
    /// restarted or replaced shows a new PID or id.
    pub fn running_tasks(&self, i: usize) -> std::collections::BTreeMap<String, u32> {
        self.containerd
            .tasks(self.agents[i].namespace())
            .into_iter()
            .filter(|t| t.status == "RUNNING")
            .map(|t| (t.id, t.pid))
            .collect()
    }

    pub fn containers(&self, i: usize) -> Vec<String> {
        self.containerd.containers(self.agents[i].namespace())
    }

    /// Named netns of agent `i`'s network (`berth-node-a-<run>-<instance>-<pod uid>`; the
    /// instance id is the agent's, from `<root-dir>/network/instance-id`). Another agent with
    /// the same node name (another cluster's) has netns under this prefix too.
    pub fn netns(&self, i: usize) -> Vec<String> {
        crate::sweep::netns_with_prefix(&format!("{}-", self.agents[i].network_name()))
    }

    /// The node's own identity (certificate + key PEM from `<root-dir>/pki`).
    pub fn node_identity(&self, i: usize) -> Vec<u8> {
        crate::pki::identity_from_files(
            &self.agents[i].pki("node.crt"),
            &self.agents[i].pki("node.key"),
        )
    }

    /// A raw API client with agent `i`'s node credentials.
    pub fn node_api(&self, i: usize) -> Api {
        self.controller
            .api_with(Credentials::ClientCert(self.node_identity(i)))
    }

    /// A kubeconfig with agent `i`'s node credentials (trusting the agent's `pki/ca.crt`).
    pub fn node_kubeconfig(&self, i: usize) -> PathBuf {
        let path = self
            .scratch()
            .join(format!("{}.kubeconfig", self.node_name(i)));
        let ca_path = self.agents[i].pki("ca.crt");
        let ca = std::fs::read(&ca_path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", ca_path.display()));
        write_kubeconfig(
            &path,
            self.controller.url(),
            &ca,
            client_cert_user(&self.node_identity(i)),
        );
        path
    }

    /// GET a path with the admin client; `None` on 404, panics on other errors.
    pub fn get(&self, path: &str) -> Option<Value> {
        let reply = self.api.send(Req::get(path));
        match reply.status {
            200 => Some(reply.json()),
            404 => None,
            _ => panic!("GET {path}\n{}\n{}", reply.describe(), self.logs().render()),
        }
    }

    /// The items of the list at `path`; none when it is not found.
    pub fn list(&self, path: &str) -> Vec<Value> {
        self.get(path)
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The messages of the events with `reason` about node `node` (in `default`, where node
    /// events go).
    pub fn node_event_messages(&self, node: &str, reason: &str) -> Vec<String> {
        self.list("/api/v1/namespaces/default/events")
            .iter()
            .filter(|e| e["reason"] == reason && e["involvedObject"]["name"] == node)
            .filter_map(|e| e["message"].as_str().map(str::to_string))
            .collect()
    }
}

/// `berth-controller token --data-dir D`; checks it matches `D/token`.
fn join_token(c: &Controller) -> String {
    let mut cmd = Command::new(controller_binary());
    cmd.arg("token").arg("--data-dir").arg(c.data_dir());
    let r = run(cmd, None, TOOL_DEADLINE);
    if !r.success() {
        panic!("berth-controller token failed\n{}", r.describe());
    }
    let token = r.stdout.trim().to_string();
    if token.is_empty() {
        panic!("berth-controller token printed nothing\n{}", r.describe());
    }
    token
}
