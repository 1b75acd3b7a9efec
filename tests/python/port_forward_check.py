"""Port-forward with the official Python client (`kubernetes.stream.portforward`, the
WebSocket channel protocol): one HTTP/1.0 GET through a forwarded port, and the error the
server reports for a port nothing listens on. Prints one JSON object:
{"body": "...", "refused": "..."}; exits non-zero on an exception."""

import argparse
import json
import socket
import sys
import time

T0 = time.time()


def mark(what):
    print("%.2f %s" % (time.time() - T0, what), file=sys.stderr)

from kubernetes import client, config
from kubernetes.stream import portforward


def read_all(sock, limit=1 << 20):
    data = b""
    while len(data) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--pod", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--closed-port", type=int, required=True)
    a = p.parse_args()
    config.load_kube_config(config_file=a.kubeconfig)
    api = client.CoreV1Api()
    mark("configured")

    def forward(port):
        """A port-forward of the pod's `port` and its socket (20 s timeout)."""
        pf = portforward(
            api.connect_get_namespaced_pod_portforward,
            a.pod,
            a.namespace,
            ports=str(port),
        )
        s = pf.socket(port)
        s.settimeout(20)
        return pf, s

    pf, s = forward(a.port)
    s.sendall(b"GET / HTTP/1.0\r\nHost: pod\r\n\r\n")
    answer = read_all(s).decode(errors="replace")
    s.close()
    mark("first answer read")
    body = answer.split("\r\n\r\n", 1)[1] if "\r\n\r\n" in answer else answer

    pf, s = forward(a.closed_port)
    try:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        read_all(s)
    except OSError:
        pass
    mark("refused read")
    refused = pf.error(a.closed_port)
    print(json.dumps({"body": body, "refused": refused}))


if __name__ == "__main__":
    main()
