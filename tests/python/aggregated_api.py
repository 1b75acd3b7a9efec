"""An aggregated API server's answers for https_server.py (tests/tests/agent_api_aggregation.rs).

GET /apis/wardle.example.com/v1alpha1                        its discovery (flunders)
GET /apis/wardle.example.com/v1alpha1/namespaces/NS/flunders one Flunder naming the caller, as
                                                             the front proxy's headers carry it
GET /apis/metrics.k8s.io/v1beta1                             discovery of a metrics adapter
GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods          one made-up PodMetrics
"""

import json

WARDLE = "wardle.example.com/v1alpha1"
METRICS = "metrics.k8s.io/v1beta1"


def reply(status, obj):
    return status, "application/json", json.dumps(obj).encode()


def handle(method, path, headers, body):
    route = path.split("?")[0].rstrip("/")
    parts = route.split("/")
    if route == "/apis/" + WARDLE:
        return reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": WARDLE,
                           "resources": [{"name": "flunders", "singularName": "flunder",
                                          "namespaced": True, "kind": "Flunder",
                                          "verbs": ["get", "list"]}]})
    if route == "/apis/" + METRICS:
        return reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": METRICS,
                           "resources": [{"name": "pods", "singularName": "", "namespaced": True,
                                          "kind": "PodMetrics", "verbs": ["get", "list"]}]})
    if route.startswith("/apis/" + WARDLE + "/namespaces/") and parts[-1] == "flunders":
        caller = {"user": headers.get("X-Remote-User"),
                  "groups": headers.get_all("X-Remote-Group") or []}
        return reply(200, {"kind": "FlunderList", "apiVersion": WARDLE, "metadata": {},
                           "items": [{"kind": "Flunder", "apiVersion": WARDLE,
                                      "metadata": {"name": "echo", "namespace": parts[-2]},
                                      "spec": caller}]})
    if route.startswith("/apis/" + METRICS + "/namespaces/") and parts[-1] == "pods":
        return reply(200, {"kind": "PodMetricsList", "apiVersion": METRICS, "metadata": {},
                           "items": [{"metadata": {"name": "from-the-pod", "namespace": parts[-2]},
                                      "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
                                      "containers": [{"name": "main", "usage": {
                                          "cpu": "321m", "memory": "54Mi"}}]}]})
    return reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                       "reason": "NotFound",
                       "message": "the server could not find the requested resource"})
