"""A small operator, run in a pod by tests/tests/agent_api_extensions.rs with the official client.

It watches the WebApps (example.berth.test/v1) of its own namespace with its ServiceAccount's
in-cluster credentials; for each one it makes a Deployment of spec.replicas pods of spec.image,
owned by the WebApp (controller, blocking its owner's deletion), and writes the WebApp's
status through the status subresource. It never deletes anything: garbage collection does.
"""

import signal
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL, KIND = "example.berth.test", "v1", "webapps", "WebApp"

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
config.load_incluster_config()
with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
    NAMESPACE = f.read().strip()
custom = client.CustomObjectsApi()
apps = client.AppsV1Api()


def deployment_for(webapp):
    meta = webapp["metadata"]
    labels = {"app.kubernetes.io/name": meta["name"], "app.kubernetes.io/managed-by": "webapp-operator"}
    owner = {
        "apiVersion": GROUP + "/" + VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    container = {"name": "web", "image": webapp["spec"]["image"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": meta["name"], "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "replicas": webapp["spec"].get("replicas", 1),
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
            },
        },
    }


def reconcile(webapp):
    meta = webapp["metadata"]
    name = meta["name"]
    if meta.get("deletionTimestamp"):
        return  # going away: garbage collection takes its Deployment
    try:
        deployment = apps.read_namespaced_deployment(name, NAMESPACE)
    except ApiException as e:
        if e.status != 404:
            raise
        deployment = apps.create_namespaced_deployment(NAMESPACE, deployment_for(webapp))
        print("created deployment", name, flush=True)
    owners = deployment.metadata.owner_references or []
    owned = any(o.uid == meta["uid"] and o.controller for o in owners)
    status = {
        "deployment": deployment.metadata.name if owned else "",
        "observedGeneration": meta.get("generation", 0),
        "phase": "Deployed" if owned else "Conflict",
    }
    current = webapp.get("status") or {}
    if any(current.get(k) != v for k, v in status.items()):
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NAMESPACE, PLURAL, name, {"status": status}
        )
        print("status of", name, status, flush=True)


while True:
    try:
        stream = watch.Watch().stream(
            custom.list_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL,
            timeout_seconds=60,
        )
        for event in stream:
            if event["type"] in ("ADDED", "MODIFIED"):
                reconcile(event["object"])
    except ApiException as e:
        # The definition going away ends the watch with a 404: try again shortly.
        print("watch ended:", e.status, e.reason, flush=True)
        time.sleep(1)
