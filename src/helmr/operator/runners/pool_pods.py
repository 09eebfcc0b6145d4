"""Pure builders of a warm pool's objects: a pooled runner pod and its fresh claim.

A pooled pod is the runner pod a Session of the Actor would get, less the Session:
no Session labels, no ``HELMR_SESSION_ID`` nor epoch, but ``HELMR_POOL``; owned by
the Actor, and its claim by the pod (deleting the Actor garbage-collects both). It
is labelled with the hash of the pod the Actor's spec makes (:func:`pool_hash`), so
an Actor change (image, entrypoint, env, computer, pod settings) is seen as pooled
pods whose hash is not the Actor's now. At adoption (:func:`adopted_pod_patch`,
:func:`adopted_claim_patch`) the pod becomes the Session's and the claim its
Workspace's: the same labels and owners a cold start gives them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from helmr.kube.labels import (
    LABEL_DISK,
    LABEL_EPOCH,
    LABEL_POOL,
    LABEL_POOLED,
    LABEL_SESSION,
    LABEL_SESSION_ID,
    LABEL_WORKSPACE,
)
from helmr.logs import LogFormat
from helmr.operator.disks.manifests import (
    DiskSpec,
    WorkspaceRef,
    build_claim_spec,
    disk_usage_spec,
    workspace_owner,
)
from helmr.operator.runners import pods
from helmr.protocol import contract
from helmr.resources import API_VERSION, Actor

_PLACEHOLDER = "pooled"
"""The claim and pod name the hash is computed with: each pooled pod has its own."""
_POOL_SESSION_ENV = {contract.ENV_SESSION_ID, contract.ENV_PROCESS_EPOCH}


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """The operator's settings every pooled pod is built with, as a cold one is."""

    runner_url: str
    log_format: LogFormat = "text"
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    egress_proxy_url: str = ""


def _actor_owner(actor: Actor) -> dict[str, Any]:
    reference = actor.owner_reference()
    return {
        "apiVersion": API_VERSION,
        "kind": reference.kind,
        "name": reference.name,
        "uid": reference.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _template(actor: Actor, settings: PoolSettings, *, disk_bound: bool = True) -> dict[str, Any]:
    """The pooled pod of ``actor``, named :data:`_PLACEHOLDER`, without its hash label;
    gated until its claim is bound unless ``disk_bound`` (never part of its hash)."""
    namespace = actor.metadata.namespace or ""
    name = actor.metadata.name or ""
    spec = pods.RunnerSpec(
        namespace=namespace,
        session_name=_PLACEHOLDER,
        session_uid="",
        session_id="",
        epoch=0,
        actor=actor,
        runner_url=settings.runner_url,
        claim_name=_PLACEHOLDER,
        disk_usage=disk_usage_spec(actor.spec.computer),
        log_format=settings.log_format,
        node_selector=dict(settings.node_selector),
        tolerations=settings.tolerations,
        egress_proxy_url=settings.egress_proxy_url,
        disk_bound=disk_bound,
    )
    body = pods.build_runner_pod_spec(spec)
    labels = {
        key: value
        for key, value in body["metadata"]["labels"].items()
        if key not in (LABEL_SESSION, LABEL_SESSION_ID, LABEL_EPOCH)
    }
    body["metadata"]["labels"] = labels | {LABEL_POOLED: name}
    container = body["spec"]["containers"][0]
    container["env"] = [var for var in container["env"] if var["name"] not in _POOL_SESSION_ENV] + [
        {"name": contract.ENV_POOL, "value": name}
    ]
    return body


def pool_hash(actor: Actor, settings: PoolSettings) -> str:
    """The hash of the pooled pod ``actor``'s spec makes (and of its claim's settings)."""
    template = _template(actor, settings)
    decided = {
        "metadata": {k: template["metadata"].get(k) for k in ("labels", "annotations")},
        "spec": template["spec"],
        "computer": actor.spec.computer.model_dump(mode="json"),
    }
    digest = hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()
    return digest[:16]


def build_pooled_pod(
    actor: Actor, settings: PoolSettings, name: str, digest: str, *, disk_bound: bool = True
) -> dict[str, Any]:
    """The pooled pod ``name`` of ``actor``, mounting the claim of the same name (made
    after it: gated until that claim is bound unless ``disk_bound``)."""
    body = _template(actor, settings, disk_bound=disk_bound)
    metadata = body["metadata"]
    metadata["name"] = name
    metadata["labels"][LABEL_POOL] = digest
    metadata["ownerReferences"] = [_actor_owner(actor)]
    for volume in body["spec"]["volumes"]:
        if "persistentVolumeClaim" in volume:
            volume["persistentVolumeClaim"]["claimName"] = name
    return body


def build_pooled_claim(actor: Actor, name: str, digest: str, pod_uid: str) -> dict[str, Any]:
    """The fresh claim of the pooled pod ``name`` (uid ``pod_uid``), owned by the pod."""
    namespace = actor.metadata.namespace or ""
    unowned = WorkspaceRef(namespace=namespace, name="", uid="")
    body = build_claim_spec(DiskSpec(unowned, 1, actor.spec.computer, None, claim=name))
    body["metadata"] = {
        "name": name,
        "namespace": namespace,
        "labels": {LABEL_POOLED: actor.metadata.name or "", LABEL_POOL: digest},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod_uid}],
    }
    return body


def adopted_pod_patch(
    session_name: str, session_uid: str | None, session_id: str, epoch: int
) -> dict[str, Any]:
    """Makes a pooled pod the runner pod of the Session's process ``epoch``, owned by
    the Session's resource (``session_uid`` None: it is gone, the pod stays the Actor's
    until its process is stopped)."""
    metadata: dict[str, Any] = {
        "labels": {
            LABEL_POOL: None,
            LABEL_SESSION: session_name,
            LABEL_SESSION_ID: session_id,
            LABEL_EPOCH: str(epoch),
        }
    }
    if session_uid is not None:
        metadata["ownerReferences"] = [pods.session_owner(session_name, session_uid)]
    return {"metadata": metadata}


def adopted_claim_patch(workspace: WorkspaceRef) -> dict[str, Any]:
    """Makes a pooled claim the Workspace's first disk (garbage-collected with it)."""
    return {
        "metadata": {
            "labels": {LABEL_POOL: None, LABEL_WORKSPACE: workspace.name, LABEL_DISK: "1"},
            "ownerReferences": [workspace_owner(workspace)],
        }
    }
