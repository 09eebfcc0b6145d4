"""The local cluster enforces NetworkPolicy (kube-router, hack/network-policy.sh):
a policy changes which real pods can connect, so tests of Helmr's policies prove
enforcement rather than manifests."""

from __future__ import annotations

import json

from kubernetes import client

from .conftest import kubectl
from .pods import finished, python_pod, ready, wait_pod

PORT = 8080
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"ok")
    c.close()
"""
# Connects every half second for about 20 s and prints each attempt's outcome:
# a dropped SYN times out after 1 s, which is what a policy's DROP looks like.
PROBE = """
import json, socket, sys, time
outcomes = []
for _ in range(20):
    try:
        with socket.create_connection((sys.argv[1], {port}), timeout=1) as c:
            outcomes.append(c.recv(2) == b"ok")
    except OSError:
        outcomes.append(False)
    time.sleep(0.5)
print(json.dumps(outcomes))
"""


def _probe(core: client.CoreV1Api, namespace: str, name: str, role: str, ip: str) -> list[bool]:
    pod = python_pod(name, PROBE.format(port=PORT), labels={"role": role})
    pod.spec.containers[0].args = [ip]  # after `python3 -c CODE`: sys.argv[1]
    core.create_namespaced_pod(namespace, pod)
    done = wait_pod(core, namespace, name, finished)
    assert done.status.phase == "Succeeded", done.status
    outcomes: list[bool] = json.loads(core.read_namespaced_pod_log(name, namespace))
    return outcomes


def test_a_policy_admits_only_the_pods_it_names(
    core: client.CoreV1Api, namespace: str, kubeconfig: str
) -> None:
    core.create_namespaced_pod(namespace, python_pod("server", SERVER, labels={"role": "server"}))
    server = wait_pod(core, namespace, "server", lambda p: bool(p.status.pod_ip) and ready(p))
    ip = str(server.status.pod_ip)

    assert all(_probe(core, namespace, "before", "stranger", ip)), "open before any policy"

    policy = f"""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: friends-only, namespace: {namespace}}}
spec:
  podSelector: {{matchLabels: {{role: server}}}}
  policyTypes: [Ingress]
  ingress:
  - from: [{{podSelector: {{matchLabels: {{role: friend}}}}}}]
    ports: [{{port: {PORT}, protocol: TCP}}]
"""
    applied = kubectl(kubeconfig, "apply", "-f", "-", input=policy)
    assert applied.returncode == 0, applied.stderr

    stranger = _probe(core, namespace, "stranger", "stranger", ip)
    # The engine applies a policy a moment after it is stored: open attempts may
    # come first, but once closed it stays closed, and it ends closed.
    closed_from = stranger.index(False)
    assert not any(stranger[closed_from:]), stranger
    # A new pod is admitted once the engine has seen its address (a moment after
    # it starts, as with any engine that matches pods by IP): from then on, always.
    friend = _probe(core, namespace, "friend", "friend", ip)
    open_from = friend.index(True)
    assert all(friend[open_from:]), friend
