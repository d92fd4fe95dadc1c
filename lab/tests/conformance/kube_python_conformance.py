"""Conformance of the lab's Kubernetes API with the official Python client (`kubernetes`),
which nobody on this project wrote.

One check per run, named by the first argument; each exits non-zero on the first failed
expectation and prints `ok: ...` lines otherwise. Tokens come from the kubeconfig and are
never printed.

  consistency  list resourceVersion/resourceVersionMatch answers and a compacted watch
  cidrs        every scheduled pod's IP lies in its node's podCIDR
  discovery    pods/eviction is discovered; every discovered list answers 200
  evict        evictions of --namespace/--pod, in order: --expect 201 or 429 (PDB)
  events       a NodeNotReady Event names --node
"""

import argparse
import ipaddress
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def expect(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def status_of(call):
    """The HTTP status an API call ends with (200 when it succeeds)."""
    try:
        call()
        return 200
    except ApiException as e:
        return e.status


def consistency(core, api_client):
    listed = core.list_pod_for_all_namespaces()
    rv = int(listed.metadata.resource_version)
    count = len(listed.items)
    exact = core.list_pod_for_all_namespaces(
        resource_version=str(rv), resource_version_match="Exact"
    )
    expect(len(exact.items) == count, f"an Exact list at {rv} has the {count} pods")
    expect(
        status_of(lambda: core.list_pod_for_all_namespaces(resource_version="2", resource_version_match="Exact")) == 410,
        "an Exact list at a compacted revision is 410 Gone",
    )
    expect(
        status_of(lambda: core.list_pod_for_all_namespaces(resource_version=str(rv + 1_000_000))) == 504,
        "a list not older than a future revision is 504 after waiting",
    )
    expect(
        status_of(lambda: core.list_pod_for_all_namespaces(resource_version_match="Exact")) == 422,
        "resourceVersionMatch without resourceVersion is 422",
    )
    expect(
        status_of(lambda: core.list_pod_for_all_namespaces(resource_version="0", resource_version_match="Exact")) == 422,
        "Exact at resourceVersion 0 is 422",
    )
    expect(
        status_of(lambda: core.list_pod_for_all_namespaces(resource_version="abc")) == 400,
        "a resourceVersion that is not a number is 400",
    )
    w = watch.Watch()
    try:
        for _ in w.stream(core.list_pod_for_all_namespaces, resource_version="2", timeout_seconds=5):
            expect(False, "a watch from a compacted revision streams nothing")
        expect(False, "a watch from a compacted revision ends in 410")
    except ApiException as e:
        expect(e.status == 410, f"a watch from a compacted revision is 410 Gone (got {e.status})")


def cidrs(core):
    nodes = {n.metadata.name: n.spec.pod_cidr for n in core.list_node().items}
    checked = 0
    for pod in core.list_pod_for_all_namespaces().items:
        if not pod.spec.node_name:
            continue
        ip = pod.status.pod_ip
        cidr = nodes.get(pod.spec.node_name)
        if not (ip and cidr):
            expect(False, f"{pod.metadata.name} has an IP and its node a podCIDR")
        if ipaddress.ip_address(ip) not in ipaddress.ip_network(cidr):
            expect(False, f"{pod.metadata.name} IP {ip} is inside {pod.spec.node_name}'s {cidr}")
        checked += 1
    expect(checked > 0, f"{checked} scheduled pods have IPs inside their node's podCIDR")


def discovery(api_client):
    core_resources = client.CoreV1Api(api_client).get_api_resources().resources
    eviction = [r for r in core_resources if r.name == "pods/eviction"]
    expect(len(eviction) == 1, "core/v1 discovery lists pods/eviction")
    expect(eviction[0].verbs == ["create"], "pods/eviction has the create verb only")
    expect(any(r.name == "events" for r in core_resources), "core/v1 discovery lists events")
    groups = client.ApisApi(api_client).get_api_versions().groups
    lists = [("/api/v1", r) for r in core_resources]
    custom = client.CustomObjectsApi(api_client)
    for g in groups:
        found = custom.get_api_resources(g.name, g.preferred_version.version)
        lists.extend((f"/apis/{g.preferred_version.group_version}", r) for r in found.resources)
    served = 0
    for base, r in lists:
        if "/" in r.name or "list" not in r.verbs:
            continue
        path = f"{base}/{r.name}"
        method, url, headers, _, _ = api_client.param_serialize("GET", path, auth_settings=["BearerToken"])
        response = api_client.call_api(method, url, header_params=headers)
        if response.status != 200:
            expect(False, f"GET {path} (discovered) answers 200, got {response.status}")
        served += 1
    expect(served > 10, f"all {served} discovered lists answer 200")


def evict(core, namespace, pod, expected):
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace))
    try:
        core.create_namespaced_pod_eviction(name=pod, namespace=namespace, body=body)
        got = 201
    except ApiException as e:
        got = e.status
        if got == 429:
            expect("disruption budget" in e.body, "the 429 names the disruption budget")
    expect(got == expected, f"evicting {namespace}/{pod} answers {expected} (got {got})")


def events(core, node):
    found = [
        e
        for e in core.list_event_for_all_namespaces().items
        if e.reason == "NodeNotReady" and e.involved_object.name == node
    ]
    expect(len(found) >= 1, f"a NodeNotReady Event names {node}")
    expect(found[0].involved_object.kind == "Node", "the Event's object is a Node")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("check")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--context", required=True)
    parser.add_argument("--namespace")
    parser.add_argument("--pod", action="append", default=[])
    parser.add_argument("--expect", type=int, action="append", default=[])
    parser.add_argument("--node")
    args = parser.parse_args()
    api_client = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    core = client.CoreV1Api(api_client)
    if args.check == "consistency":
        consistency(core, api_client)
    elif args.check == "cidrs":
        cidrs(core)
    elif args.check == "discovery":
        discovery(api_client)
    elif args.check == "evict":
        # In order, in one process: the budget may change between two evictions.
        expect(len(args.pod) == len(args.expect), "one --expect per --pod")
        for pod, code in zip(args.pod, args.expect):
            evict(core, args.namespace, pod, code)
    elif args.check == "events":
        events(core, args.node)
    else:
        expect(False, f"known check {args.check}")


if __name__ == "__main__":
    main()
