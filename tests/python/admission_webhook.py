"""AdmissionReview answers for https_server.py (tests/tests/agent_api_extensions.rs).

/mutate   adds the label webhook-added=yes (a JSONPatch)
/validate refuses objects annotated webhook.example.com/refuse with REFUSAL, admits others
/slow     answers (admitting) only after SLOW_SECONDS, longer than any timeoutSeconds used
"""

import base64
import json
import time

REFUSE_ANNOTATION = "webhook.example.com/refuse"
REFUSAL = "pods annotated webhook.example.com/refuse are not welcome"
SLOW_SECONDS = 6


def handle(method, path, headers, body):
    if method != "POST":
        return 200, "text/plain", b"ok\n"
    review = json.loads(body)
    request = review["request"]
    response = {"uid": request["uid"], "allowed": True}
    route = path.split("?")[0]
    if route == "/mutate":
        labels = (request["object"].get("metadata") or {}).get("labels")
        ops = []
        if labels is None:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        ops.append({"op": "add", "path": "/metadata/labels/webhook-added", "value": "yes"})
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    elif route == "/validate":
        annotations = (request["object"].get("metadata") or {}).get("annotations") or {}
        if REFUSE_ANNOTATION in annotations:
            response["allowed"] = False
            response["status"] = {"code": 403, "reason": "Forbidden", "message": REFUSAL}
    elif route == "/slow":
        time.sleep(SLOW_SECONDS)
    reply = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    return 200, "application/json", json.dumps(reply).encode()
