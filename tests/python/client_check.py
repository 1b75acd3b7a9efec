"""Drives Berth's API with the official Python `kubernetes` client and prints a JSON summary.

Run by tests/tests/control_plane_python.rs:
    client_check.py --kubeconfig PATH --namespace NS --deployment NAME

Each step is recorded in the summary (with the exception text if it failed) rather than
aborting, so the Rust test can say exactly which call broke.
"""

import argparse
import json
import sys
import traceback


def step(summary, name, fn):
    try:
        summary[name] = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal
        summary.setdefault("errors", {})[name] = "".join(
            traceback.format_exception_only(type(exc), exc)
        ).strip()
        summary[name] = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--deployment", required=True)
    args = parser.parse_args()

    from kubernetes import client, config, watch  # imported here so --help works without it

    config.load_kube_config(config_file=args.kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    ns = args.namespace
    summary = {"client_version": __import__("kubernetes").__version__}

    def list_pods():
        pods = core.list_namespaced_pod(ns)
        return {
            "names": sorted(p.metadata.name for p in pods.items),
            "resource_version": pods.metadata.resource_version,
        }

    step(summary, "list_pods", list_pods)

    # `VersionApi().get_code()` asks for `/version/` (with the slash).
    step(summary, "version", lambda: client.VersionApi().get_code().git_version)

    def watch_pods():
        # No resourceVersion: the server must send the current pods as ADDED first, then end
        # the stream after timeoutSeconds.
        w = watch.Watch()
        seen = []
        for event in w.stream(core.list_namespaced_pod, ns, timeout_seconds=2, _request_timeout=15):
            seen.append([event["type"], event["object"].metadata.name])
        return seen

    step(summary, "watch_pods", watch_pods)

    body = client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=args.deployment, labels={"app": args.deployment}),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": args.deployment}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": args.deployment}),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(
                            name="nginx",
                            image="nginx:1.14.2",
                            ports=[client.V1ContainerPort(container_port=80)],
                        )
                    ]
                ),
            ),
        ),
    )

    def describe(d):
        return {
            "name": d.metadata.name,
            "uid": d.metadata.uid,
            "generation": d.metadata.generation,
            "replicas": d.spec.replicas,
            "image": d.spec.template.spec.containers[0].image,
            "strategy": d.spec.strategy.type if d.spec.strategy else None,
            # A fresh Deployment's status is `{}` upstream, so this reads None, not raises.
            "status_is_object": d.status is not None,
            "ready_replicas": d.status.ready_replicas if d.status else "no status",
        }

    step(summary, "create_deployment", lambda: describe(apps.create_namespaced_deployment(ns, body)))
    step(summary, "read_deployment", lambda: describe(apps.read_namespaced_deployment(args.deployment, ns)))

    def scale():
        apps.patch_namespaced_deployment_scale(args.deployment, ns, {"spec": {"replicas": 3}})
        return apps.read_namespaced_deployment_scale(args.deployment, ns).spec.replicas

    step(summary, "scale_deployment", scale)

    def create_service():
        svc = client.V1Service(
            api_version="v1",
            kind="Service",
            metadata=client.V1ObjectMeta(name=args.deployment),
            spec=client.V1ServiceSpec(
                selector={"app": args.deployment},
                ports=[client.V1ServicePort(port=80, target_port=80)],
            ),
        )
        created = core.create_namespaced_service(ns, svc)
        return {"cluster_ip": created.spec.cluster_ip, "type": created.spec.type}

    step(summary, "create_service", create_service)

    json.dump(summary, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
