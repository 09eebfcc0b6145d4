"""A fake node on a real cluster: a Node object that kwok's controller keeps Ready,
and whose pods it marks Running at once, with no kubelet and no containers.

kwok is told to manage only this one node (``--manage-single-node``), and the node
is tainted so that no pod lands there unless it tolerates the taint: the cluster's
other users (tests sharing it) never see a pod of theirs on it. ``hack/build.sh
kwok`` builds the controller and writes its stages beside it.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

BIN = Path(os.environ.get("HELMR_CACHE", Path.home() / ".cache" / "helmr")) / "bin" / "current"
TAINT_KEY = "kwok.x-k8s.io/node"
LABEL_TYPE = "type"
KWOK = "kwok"
LABEL_RUN = "helmr.dev/bench-run"
RUN = uuid.uuid4().hex[:8]
"""This process's fake node carries it, and its runner pods select it: two benchmarks
running at once (each its own node) never schedule a pod on the other's node, where
the pod would be force-deleted as orphaned when that node goes."""
SELECTOR = {LABEL_TYPE: KWOK, LABEL_RUN: RUN}
"""The runner pods' ``nodeSelector`` that picks this process's fake node."""
TOLERATIONS = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
"""The runner pods' tolerations of the fake node's taint."""
# Pod IPs kwok hands out: never routed, never reached (the fleet talks to the
# control plane itself), chosen apart from the cluster's own ranges.
POD_CIDR = "10.250.0.0/16"


def _node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "1000", "memory": "4Ti", "pods": "10000"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {TAINT_KEY: "fake"},
            "labels": {**SELECTOR, "kubernetes.io/hostname": name, TAINT_KEY: "fake"},
        },
        "spec": {"taints": [{"key": TAINT_KEY, "value": "fake", "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@contextmanager
def fake_node(core: client.CoreV1Api, kubeconfig: str, log: Path) -> Iterator[str]:
    """A new fake node, Ready, managed by a kwok controller of its own; the node's
    name. Afterwards the controller is stopped and the node deleted (the
    cluster's pod garbage collector removes any pod still bound to it)."""
    binary, stages = BIN / "kwok", BIN / "kwok-stages.yaml"
    if not binary.exists() or not stages.exists():
        raise SystemExit("no kwok: run hack/build.sh kwok")
    name = f"kwok-{uuid.uuid4().hex[:8]}"
    core.create_node(_node(name))  # type: ignore[arg-type]  # a manifest, as the API takes
    try:
        with log.open("ab") as out:
            controller = subprocess.Popen(
                [
                    str(binary),
                    f"--kubeconfig={kubeconfig}",
                    f"--config={stages}",
                    f"--manage-single-node={name}",
                    f"--cidr={POD_CIDR}",
                    "--node-ip=10.250.255.254",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_ready(core, name, controller, log)
            yield name
        finally:
            controller.terminate()
            try:
                controller.wait(timeout=10)
            except subprocess.TimeoutExpired:
                controller.kill()
                controller.wait()
    finally:
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _wait_ready(
    core: client.CoreV1Api, name: str, controller: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if controller.poll() is not None:
            raise SystemExit(f"kwok stopped; see {log}")
        node: Any = core.read_node(name)
        conditions = node.status.conditions or []
        if any(c.type == "Ready" and c.status == "True" for c in conditions):
            return
        time.sleep(0.5)
    raise SystemExit(f"the fake node {name} is not Ready after 60 s; see {log}")
