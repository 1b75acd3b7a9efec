//! The transcoder against k8s-pb's prost structs (upstream's messages, generated independently
//! of this crate's schema) and against the JSON form of every served kind.

use super::*;
use crate::resource::RESOURCES;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

/// Wraps a prost message in the envelope, as client-go does.
fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

/// The Deployment `kubectl create deployment web --image=nginx --replicas=0` sends, with the
/// empty strings and zero numbers Go writes for every non-pointer field.
fn kubectl_deployment() -> apps::Deployment {
    let container = core::Container {
        name: Some("nginx".into()),
        image: Some("nginx".into()),
        working_dir: Some(String::new()),
        termination_message_path: Some(String::new()),
        image_pull_policy: Some(String::new()),
        stdin: Some(false),
        tty: Some(false),
        resources: Some(core::ResourceRequirements::default()),
        ..Default::default()
    };
    let labels = [("app".to_string(), "web".to_string())].into();
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            labels: Some(()).map(|()| labels).unwrap_or_default(),
            creation_timestamp: Some(meta::Time {
                seconds: Some(0),
                nanos: Some(0),
            }),
            generation: Some(0),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    restart_policy: Some(String::new()),
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy::default()),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

#[test]
fn a_deployment_as_kubectl_sends_it_decodes_to_its_json_form() {
    let bytes = envelope("apps/v1", "Deployment", &kubectl_deployment());
    let decoded = decode(&bytes).expect("decodes");
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
    let keys: Vec<_> = decoded
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(keys[..2], ["apiVersion", "kind"]);
}

/// One object of each served kind, in JSON with upstream's field names and no zero values
/// outside [`decode::ZERO_MEANS_SOMETHING`] (a zero elsewhere is dropped, as Go drops it).
fn samples() -> Vec<Value> {
    let meta = json!({"name": "x", "namespace": "default", "uid": "0b9f3c2e-1111-2222-3333-444455556666",
        "resourceVersion": "12", "generation": 3, "creationTimestamp": "2024-05-06T07:08:09Z",
        "labels": {"app": "web", "tier": "front"}, "annotations": {"a.io/b": "c"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x-1",
            "uid": "0b9f3c2e-1111-2222-3333-444455556667", "controller": true, "blockOwnerDeletion": true}],
        "finalizers": ["f.io/one"],
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
            "apiVersion": "apps/v1", "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]});
    let pod_spec = json!({
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-x", "readOnly": true}},
            {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420, "items": [{"key": "k", "path": "p", "mode": 0}]}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "host", "hostPath": {"path": "/var/x", "type": "DirectoryOrCreate"}}
        ],
        "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}],
        "containers": [{
            "name": "app", "image": "nginx:1.25", "args": ["--x"], "workingDir": "/w",
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": false}}},
                    {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data", "subPath": "d", "readOnly": true}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                "initialDelaySeconds": 3, "periodSeconds": 5, "failureThreshold": 2},
            "readinessProbe": {"tcpSocket": {"port": "http"}, "timeoutSeconds": 2},
            "startupProbe": {"exec": {"command": ["cat", "/ready"]}},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
            "securityContext": {"runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
                "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}},
            "imagePullPolicy": "IfNotPresent", "stdin": true, "tty": true
        }],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 0, "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"disk": "ssd"}, "serviceAccountName": "sa", "nodeName": "n1", "hostNetwork": true,
        "hostname": "web-0", "subdomain": "nginx", "schedulerName": "default-scheduler",
        "priorityClassName": "high", "priority": 1000,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}],
        "securityContext": {"fsGroup": 2000, "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        "ephemeralContainers": [{"name": "debugger", "image": "busybox", "targetContainerName": "app", "stdin": true}]
    });
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec});
    let selector = json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]});
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec, "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.42.0.5",
            "podIPs": [{"ip": "10.42.0.5"}], "startTime": "2024-05-06T07:08:09Z", "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-06T07:08:10Z"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 2, "image": "nginx:1.25",
                "imageID": "sha256:abc", "containerID": "containerd://abc", "started": true,
                "state": {"running": {"startedAt": "2024-05-06T07:08:09Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                    "startedAt": "2024-05-06T07:00:00Z", "finishedAt": "2024-05-06T07:05:00Z"}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": 3,
            "selector": selector, "template": template, "minReadySeconds": 5, "revisionHistoryLimit": 0,
            "progressDeadlineSeconds": 600, "paused": true,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}},
            "status": {"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2,
                "availableReplicas": 2, "unavailableReplicas": 1, "collisionCount": 1,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                    "message": "ok", "lastUpdateTime": "2024-05-06T07:08:09Z", "lastTransitionTime": "2024-05-06T07:08:09Z"}]}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": {"replicas": 0,
            "selector": selector, "template": template, "serviceName": "nginx", "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2, "maxUnavailable": "50%"}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}}],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "ordinals": {"start": 5}}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {"selector": selector,
            "template": template, "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta, "spec": {"replicas": 2,
            "selector": selector, "template": template}}),
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "revision": 4,
            "data": {"spec": {"template": {"$patch": "replace", "spec": {"containers": [{"name": "a"}]}}}}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"parallelism": 2,
            "completions": 5, "backoffLimit": 0, "completionMode": "Indexed", "suspend": false,
            "ttlSecondsAfterFinished": 0, "activeDeadlineSeconds": 100, "template": template,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {"action": "FailJob", "onExitCodes": {"containerName": "app", "operator": "In", "values": [1, 42]}}]}},
            "status": {"active": 1, "succeeded": 2, "failed": 1, "completedIndexes": "0-1",
                "uncountedTerminatedPods": {"succeeded": ["u1"]}, "startTime": "2024-05-06T07:08:09Z"}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": {"schedule": "*/1 * * * *",
            "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 0,
            "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {"template": template}}},
            "status": {"active": [{"kind": "Job", "name": "x-1", "namespace": "default"}],
                "lastScheduleTime": "2024-05-06T07:08:00Z"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"type": "NodePort",
            "selector": {"app": "web"}, "clusterIP": "10.43.0.10", "clusterIPs": ["10.43.0.10"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}, "externalTrafficPolicy": "Local",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http", "nodePort": 30080}]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1", "empty": ""},
            "binaryData": {"b": "AAEC"}, "immutable": true}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "data": {"password": "c2VjcmV0", "none": ""}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}, "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"podCIDR": "10.42.1.0/24",
            "podCIDRs": ["10.42.1.0/24"], "unschedulable": true,
            "taints": [{"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": "2024-05-06T07:08:09Z"}]},
            "status": {"capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1",
                    "osImage": "Debian", "containerRuntimeVersion": "containerd://1.6", "kubeletVersion": "v1.33.0",
                    "operatingSystem": "linux", "architecture": "amd64"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": meta, "involvedObject": {"kind": "Pod",
            "namespace": "default", "name": "x", "uid": "u", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "message": "Back-off restarting", "type": "Warning", "count": 7,
            "source": {"component": "kubelet", "host": "n1"}, "firstTimestamp": "2024-05-06T07:08:09Z",
            "lastTimestamp": "2024-05-06T07:09:09Z", "eventTime": "2024-05-06T07:08:09.123456Z",
            "reportingComponent": "kubelet", "reportingInstance": "n1"}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
            "spec": {"minAvailable": "50%", "selector": selector, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 3,
                "disruptedPods": {"x-1": "2024-05-06T07:08:09Z"}}}),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "x", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"],
                "preconditions": {"uid": "u", "resourceVersion": "5"}}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}}}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "targetCPUUtilizationPercentage": 80}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta, "spec": {"replicas": 0},
            "status": {"replicas": 3, "selector": "app=web"}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"},
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "local-path", "volumeMode": "Filesystem",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c", "uid": "u"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                "operator": "In", "values": ["n1"]}]}]}}}, "status": {"phase": "Bound"}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": "pv",
            "storageClassName": "local-path"}, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-path"},
            "provisioner": "berth.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer",
            "parameters": {"a": "b"}, "allowVolumeExpansion": true}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "secrets": [{"name": "s"}],
            "automountServiceAccountToken": false}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {
            "holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2024-05-06T07:08:09.000001Z"}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.42.0.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
                "hostname": "web-0", "nodeName": "n1", "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default"}}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": [{"addresses": [{"ip": "10.42.0.5"}],
            "ports": [{"port": 80, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000, "globalDefault": true, "preemptionPolicy": "Never", "description": "d"}),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Foreground",
            "orphanDependents": false}),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": meta,
            "spec": {"audiences": ["a"], "expirationSeconds": 3600, "boundObjectRef": {"kind": "Pod", "name": "x"}}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {"name": "r"},
            "spec": {"user": "u", "groups": ["g"], "extra": {"k": ["v1", "v2"]},
                "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}}),
    ];
    out.push(json!({"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"kind": "Node", "name": "n1"}}));
    out
}

/// Re-encodes a message with k8s-pb's prost struct for its kind: a field this crate wrote
/// under the wrong wire type fails prost's decode, and prost's own encoding must decode to the
/// same JSON.
fn through_prost(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    fn again<M: Message + Default>(raw: &[u8]) -> Vec<u8> {
        M::decode(raw)
            .expect("prost decodes what we encoded")
            .encode_to_vec()
    }
    use k8s_pb::api as a;
    match (api_version, kind) {
        ("v1", "Pod") => again::<core::Pod>(raw),
        ("apps/v1", "Deployment") => again::<apps::Deployment>(raw),
        ("apps/v1", "StatefulSet") => again::<apps::StatefulSet>(raw),
        ("apps/v1", "DaemonSet") => again::<apps::DaemonSet>(raw),
        ("apps/v1", "ReplicaSet") => again::<apps::ReplicaSet>(raw),
        ("apps/v1", "ControllerRevision") => again::<apps::ControllerRevision>(raw),
        ("batch/v1", "Job") => again::<a::batch::v1::Job>(raw),
        ("batch/v1", "CronJob") => again::<a::batch::v1::CronJob>(raw),
        ("v1", "Service") => again::<core::Service>(raw),
        ("v1", "ConfigMap") => again::<core::ConfigMap>(raw),
        ("v1", "Secret") => again::<core::Secret>(raw),
        ("v1", "Namespace") => again::<core::Namespace>(raw),
        ("v1", "Node") => again::<core::Node>(raw),
        ("v1", "Event") => again::<core::Event>(raw),
        ("v1", "PersistentVolume") => again::<core::PersistentVolume>(raw),
        ("v1", "PersistentVolumeClaim") => again::<core::PersistentVolumeClaim>(raw),
        ("v1", "ServiceAccount") => again::<core::ServiceAccount>(raw),
        ("v1", "Endpoints") => again::<core::Endpoints>(raw),
        ("v1", "Binding") => again::<core::Binding>(raw),
        ("v1", "DeleteOptions") => again::<meta::DeleteOptions>(raw),
        ("policy/v1", "PodDisruptionBudget") => again::<a::policy::v1::PodDisruptionBudget>(raw),
        ("policy/v1", "Eviction") => again::<a::policy::v1::Eviction>(raw),
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            again::<a::autoscaling::v2::HorizontalPodAutoscaler>(raw)
        }
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            again::<a::autoscaling::v1::HorizontalPodAutoscaler>(raw)
        }
        ("autoscaling/v1", "Scale") => again::<a::autoscaling::v1::Scale>(raw),
        ("storage.k8s.io/v1", "StorageClass") => again::<a::storage::v1::StorageClass>(raw),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => again::<a::rbac::v1::ClusterRole>(raw),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => again::<a::rbac::v1::RoleBinding>(raw),
        ("coordination.k8s.io/v1", "Lease") => again::<a::coordination::v1::Lease>(raw),
        ("discovery.k8s.io/v1", "EndpointSlice") => again::<a::discovery::v1::EndpointSlice>(raw),
        ("scheduling.k8s.io/v1", "PriorityClass") => again::<a::scheduling::v1::PriorityClass>(raw),
        ("authentication.k8s.io/v1", "TokenRequest") => {
            again::<a::authentication::v1::TokenRequest>(raw)
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            again::<a::authorization::v1::SubjectAccessReview>(raw)
        }
        other => panic!("no prost struct listed for {other:?}"),
    }
}

#[test]
fn every_sample_round_trips_through_protobuf_and_through_upstreams_messages() {
    for sample in samples() {
        let api_version = sample["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let kind = sample["kind"].as_str().unwrap_or_default().to_string();
        let bytes = encode(&sample).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            decode(&bytes).unwrap_or_else(|e| panic!("{kind}: {e}")),
            sample,
            "{kind}"
        );

        let envelope = unknown(&bytes[MAGIC.len()..]).expect("envelope");
        let again = through_prost(&api_version, &kind, envelope.raw);
        let name = schema().message_for(&api_version, &kind).expect("kind");
        let via_prost = decode::message(schema(), name, &again, 0).expect("decodes prost's bytes");
        let mut expected = sample.clone();
        if let Some(o) = expected.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        assert_eq!(via_prost, expected, "{kind} through prost");
    }
}

#[test]
fn every_served_kind_has_a_message() {
    // CustomResourceDefinitions are JSON only: their JSONSchemaProps have no wire schema here
    // (k8s-pb's message needs its JSON-or-bool unions and raw JSON fields mapped by hand).
    for rt in RESOURCES
        .iter()
        .filter(|r| r.kind != "CustomResourceDefinition")
    {
        assert!(
            schema().message_for(&rt.api_version(), rt.kind).is_some(),
            "{} {}",
            rt.api_version(),
            rt.kind
        );
        assert!(
            rt.create_only
                || schema()
                    .message_for(&rt.api_version(), &rt.list_kind())
                    .is_some(),
            "{} {}",
            rt.api_version(),
            rt.list_kind()
        );
    }
}

#[test]
fn bad_envelopes_are_errors_naming_what_is_wrong() {
    assert_eq!(decode(b"{}"), Err(ProtobufError::NoMagic));
    assert!(matches!(
        decode(b"k8s\0\x0a\x05"),
        Err(ProtobufError::Truncated)
    ));
    let nope = envelope("apps/v1", "Nope", &apps::Deployment::default());
    assert_eq!(
        decode(&nope),
        Err(ProtobufError::UnknownKind {
            api_version: "apps/v1".into(),
            kind: "Nope".into()
        })
    );
    let mut gzipped = k8s_pb::apimachinery::pkg::runtime::Unknown {
        content_encoding: Some("gzip".into()),
        ..Default::default()
    }
    .encode_to_vec();
    gzipped.splice(0..0, MAGIC.iter().copied());
    assert_eq!(
        decode(&gzipped),
        Err(ProtobufError::ContentEncoding("gzip".into()))
    );
    // TypeMeta v1/Node, then a Node whose metadata (field 1) is a varint.
    let bad = [
        MAGIC,
        &[
            0x0a, 0x0a, 0x0a, 0x02, b'v', b'1', 0x12, 0x04, b'N', b'o', b'd', b'e',
        ],
        &[0x12, 0x02, 0x08, 0x01],
    ]
    .concat();
    assert!(
        matches!(decode(&bad), Err(ProtobufError::Malformed(m)) if m.contains("wrong wire type"))
    );
}

#[test]
fn nesting_past_the_limit_is_refused_without_overflowing_the_stack() {
    // A ControllerRevision whose data (a RawExtension) holds an enveloped ControllerRevision,
    // and so on: the one way a body can nest without end.
    let mut revision = apps::ControllerRevision::default();
    for _ in 0..(decode::MAX_DEPTH + 5) {
        let raw = envelope("apps/v1", "ControllerRevision", &revision);
        revision = apps::ControllerRevision {
            data: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension { raw: Some(raw) }),
            ..Default::default()
        };
    }
    let body = envelope("apps/v1", "ControllerRevision", &revision);
    assert!(
        matches!(decode(&body), Err(ProtobufError::Malformed(m)) if m.contains("nested deeper"))
    );
}
