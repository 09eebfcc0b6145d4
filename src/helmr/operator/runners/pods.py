"""Pure builders of the Kubernetes objects one runner process needs.

A runner pod runs untrusted agent code, so it gets no Kubernetes credentials
(no API token mounted, a service account without RBAC), meets the `restricted`
Pod Security Standard and talks only to the control plane's runner API. Its
identity there is a projected service-account token for the Helmr audience,
bound to the pod (``runners.identity``): no Secret carries it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from helmr.kube.labels import (
    LABEL_ACTOR,
    LABEL_COMPONENT,
    LABEL_EPOCH,
    LABEL_SESSION,
    LABEL_SESSION_ID,
    RUNNER,
)
from helmr.logs import ENV_LOG_FORMAT, LogFormat
from helmr.operator.disks.manifests import DiskUsageSpec
from helmr.protocol import contract
from helmr.resources import API_VERSION, Actor, EnvVar, RunnerPodSettings
from helmr.resources.session_env import NO_ENV, SessionEnv

TOKEN_DIR = "/var/run/helmr"
TOKEN_PATH = "token"
RUNNER_AUDIENCE = "helmr.dev/runner"
"""The audience of runner tokens: the control plane's, never the apiserver's, so the
apiserver refuses them for its own API (unless told to accept it: --api-audiences)."""
TOKEN_SECONDS = 600
"""Runner tokens' lifetime, the least Kubernetes allows; the kubelet rewrites the
file at 80% of it and the runner reads the file for every call."""
RUNNER_SERVICE_ACCOUNT = "helmr-runner"
"""The runner pods' service account, one per namespace: no RBAC, no automounted token."""

DISK_GATE = "helmr.dev/disk-bound"
"""The scheduling gate a runner pod is made with while its claim is not bound
(:mod:`helmr.operator.runners.disk_gates` says why and removes it)."""
_DISK_VOLUME = "computer"
"""The runner pod's volume of its Computer disk's claim."""


@dataclass(frozen=True, slots=True)
class RunnerSpec:
    """Everything that decides one runner pod."""

    namespace: str
    session_name: str
    session_uid: str
    session_id: str
    epoch: int
    actor: Actor
    runner_url: str
    claim_name: str
    """The Computer disk's PVC, mounted at ``contract.COMPUTER_DIR`` (a directory,
    for a backend of local processes)."""
    disk_usage: DiskUsageSpec | None = None
    """The disk's size and thresholds the runner measures its usage against."""
    disk_bound: bool = True
    """False: the pod is not scheduled before its claim is bound (``DISK_GATE``,
    :mod:`helmr.operator.runners.disk_gates`)."""
    idle_timeout_seconds: int | None = None
    """The warm wait before suspension: the Session's override, else the Actor's;
    None: the actor's own (``actor(idle_timeout=...)``, else the runner's default)."""
    log_format: LogFormat = "text"
    """The runner's log lines: the control plane's own format (``HELMR_LOG_FORMAT``)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """The nodes runner pods may run on (``HELMR_RUNNER_NODE_SELECTOR``); its keys win
    over the Actor's ``spec.pod.nodeSelector``."""
    tolerations: Sequence[Mapping[str, Any]] = ()
    """Taints runner pods tolerate (``HELMR_RUNNER_TOLERATIONS``), as Kubernetes writes
    them; the Actor's ``spec.pod.tolerations`` follow."""
    session_env: SessionEnv = NO_ENV
    """The Session's own settings (``spec.env``, ``spec.envFrom``): Secret keys stay
    references the kubelet resolves, never values in the pod's manifest."""
    egress_proxy_url: str = ""
    """The egress proxy (``HELMR_EGRESS_PROXY_URL``) a runner of an Actor naming
    ``spec.network.egressHosts`` is given; empty: none."""


def pod_name(session_name: str, epoch: int) -> str:
    # Session names are DNS-1123 labels of at most 63 characters (admission
    # checks it); a pod name may be a 253-character subdomain, so this fits.
    return f"{session_name}-runner-{epoch}"


def runner_labels(session_name: str, session_id: str, actor_name: str) -> dict[str, str]:
    """Helmr's labels of a runner pod: what selects it (its Session's pods, runners at
    all, its Actor's NetworkPolicy)."""
    return {
        LABEL_COMPONENT: RUNNER,
        LABEL_ACTOR: actor_name,
        LABEL_SESSION: session_name,
        LABEL_SESSION_ID: session_id,
    }


def session_owner(session_name: str, session_uid: str) -> dict[str, Any]:
    """A runner pod's owner: deleting the Session garbage-collects its pods."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Session",
        "name": session_name,
        "uid": session_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def build_service_account_spec(namespace: str) -> dict[str, Any]:
    """The namespace's runner service account. Helmr binds no Role to it, and it
    mounts no API token: a runner pod holds only its Helmr-audience token."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": RUNNER_SERVICE_ACCOUNT,
            "namespace": namespace,
            "labels": {LABEL_COMPONENT: RUNNER},
        },
        "automountServiceAccountToken": False,
    }


def _resources(actor: Actor) -> dict[str, Any]:
    wire = actor.spec.resources.to_wire() if actor.spec.resources else {}
    return {k: v for k, v in wire.items() if v}


def _disk_usage_env(usage: DiskUsageSpec) -> list[dict[str, str]]:
    limits = usage.limits
    levels = (limits.resolve_at, limits.pause_at, limits.stop_at)
    return [
        {"name": contract.ENV_COMPUTER_CAPACITY, "value": str(limits.capacity_bytes)},
        {"name": contract.ENV_COMPUTER_LEVELS, "value": ",".join(f"{x:g}" for x in levels)},
        {"name": contract.ENV_COMPUTER_INTERVAL, "value": str(usage.interval_seconds)},
    ]


def _pod_settings(spec: RunnerSpec, settings: RunnerPodSettings) -> dict[str, Any]:
    """The pod spec fields of the Actor's ``spec.pod`` merged with the operator's
    placement; only the fields set, as Kubernetes omits the others.

    The chart's ``runner.*`` are the platform's policy: a nodeSelector key both
    set keeps the chart's value, and the chart's tolerations come first.
    """
    # Labels and annotations are the pod's metadata, not its spec.
    wire = settings.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"labels", "annotations"}
    )
    node_selector = wire.pop("nodeSelector", {}) | dict(spec.node_selector)
    tolerations = [dict(t) for t in spec.tolerations] + wire.pop("tolerations", [])
    placement = {"nodeSelector": node_selector, "tolerations": tolerations}
    return wire | {name: value for name, value in placement.items() if value}


def _env_from(session: SessionEnv) -> dict[str, Any]:
    """The container's ``envFrom``: the Session's Secrets, if it names any. Every
    variable of ``env`` wins over them (Helmr's own among them), as Kubernetes orders them."""
    if not session.env_from:
        return {}
    return {
        "envFrom": [
            source.model_dump(mode="json", exclude_none=True) for source in session.env_from
        ]
    }


def _actor_env(actor: Sequence[EnvVar], session: SessionEnv) -> list[dict[str, str]]:
    """The Actor's variables, then the Session's values (the Session's own win over the
    Actor's of the same name, which are left out: Kubernetes warns of a name given twice)."""
    own = {var.name for var in session.env}
    return [{"name": e.name, "value": e.value} for e in actor if e.name not in own] + [
        {"name": var.name, "value": var.value} for var in session.env if var.value is not None
    ]


def _secret_keys(session: SessionEnv) -> list[dict[str, Any]]:
    """The Session's variables that are Secrets' keys, as references the kubelet resolves:
    a pod's only (a local process of ``helmr dev`` has no Secrets to read)."""
    return [
        var.model_dump(mode="json", exclude_none=True)
        for var in session.env
        if var.value_from is not None
    ]


def runner_env(spec: RunnerSpec, *, token_file: str, computer_dir: str) -> list[dict[str, str]]:
    """The environment contract of a runner process (``helmr.protocol.contract``):
    a pod's, and a local process's (``helmr dev``), which differ only in where
    the token and the Computer disk are."""
    actor = spec.actor.spec
    env = [
        {"name": contract.ENV_URL, "value": spec.runner_url},
        {"name": contract.ENV_SESSION_ID, "value": spec.session_id},
        {"name": contract.ENV_NAMESPACE, "value": spec.namespace},
        {"name": ENV_LOG_FORMAT, "value": spec.log_format},
        {"name": contract.ENV_PROCESS_EPOCH, "value": str(spec.epoch)},
        {"name": contract.ENV_ENTRYPOINT, "value": actor.entrypoint},
        {"name": contract.ENV_TOKEN_FILE, "value": token_file},
        {"name": contract.ENV_COMPUTER_DIR, "value": computer_dir},
        {"name": contract.ENV_PROTOCOL, "value": str(contract.PROTOCOL)},
    ]
    if spec.idle_timeout_seconds is not None:
        env.append({"name": contract.ENV_IDLE_TIMEOUT, "value": str(spec.idle_timeout_seconds)})
    if spec.disk_usage is not None:
        env += _disk_usage_env(spec.disk_usage)
    return env + _actor_env(actor.env or [], spec.session_env)


def _metadata(spec: RunnerSpec, settings: RunnerPodSettings) -> dict[str, Any]:
    # Helmr's labels last: its selectors (this Session's pods, runners at all) stay true.
    labels = (
        (settings.labels or {})
        | runner_labels(spec.session_name, spec.session_id, spec.actor.metadata.name or "")
        | {LABEL_EPOCH: str(spec.epoch)}
    )
    annotations = {"annotations": dict(settings.annotations)} if settings.annotations else {}
    return {
        "name": pod_name(spec.session_name, spec.epoch),
        "namespace": spec.namespace,
        "labels": labels,
        **annotations,
        "ownerReferences": [session_owner(spec.session_name, spec.session_uid)],
    }


PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
"""Both spellings: curl and others read only the lower-case ``http_proxy``."""


def proxy_env(spec: RunnerSpec) -> list[dict[str, str]]:
    """The egress proxy's variables when the Actor names hostnames to reach through it;
    ``NO_PROXY`` keeps the runner API direct (policy lets runners reach it, not the
    proxy's clients). First in the container: an Actor's or Session's own win."""
    network = spec.actor.spec.network
    if not spec.egress_proxy_url or network is None or not network.egress_hosts:
        return []
    direct = urlsplit(spec.runner_url).hostname or ""
    return [{"name": name, "value": spec.egress_proxy_url} for name in PROXY_VARIABLES] + [
        {"name": name, "value": direct} for name in ("NO_PROXY", "no_proxy")
    ]


def _runner_container(spec: RunnerSpec) -> dict[str, Any]:
    actor = spec.actor.spec
    return {
        "name": RUNNER,
        "image": actor.image,
        "imagePullPolicy": actor.image_pull_policy,
        "env": proxy_env(spec)
        + runner_env(
            spec, token_file=f"{TOKEN_DIR}/{TOKEN_PATH}", computer_dir=contract.COMPUTER_DIR
        )
        + _secret_keys(spec.session_env),
        **_env_from(spec.session_env),
        "resources": _resources(spec.actor),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "volumeMounts": [
            {"name": "runner-token", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": _DISK_VOLUME, "mountPath": contract.COMPUTER_DIR},
        ],
    }


def _volumes(spec: RunnerSpec) -> list[dict[str, Any]]:
    token = {
        "audience": RUNNER_AUDIENCE,
        "expirationSeconds": TOKEN_SECONDS,
        "path": TOKEN_PATH,
    }
    return [
        {"name": "runner-token", "projected": {"sources": [{"serviceAccountToken": token}]}},
        {"name": "tmp", "emptyDir": {}},
        {"name": _DISK_VOLUME, "persistentVolumeClaim": {"claimName": spec.claim_name}},
    ]


def build_runner_pod_spec(spec: RunnerSpec) -> dict[str, Any]:
    settings = spec.actor.spec.pod or RunnerPodSettings()
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(spec, settings),
        "spec": {
            "restartPolicy": "Never",
            # Agent code is untrusted: no Kubernetes API credentials at all.
            "serviceAccountName": RUNNER_SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            # The process is stopped on deadlines and interrupts; a handler that
            # ignores cancellation must not hold the session for long.
            "terminationGracePeriodSeconds": 2,
            # Where and how the agent code runs: dedicated nodes, say (runner.nodeSelector,
            # runner.tolerations in the chart), a sandbox RuntimeClass, pull Secrets (the
            # Actor's spec.pod). Never the fields that follow: they keep it restricted.
            **_pod_settings(spec, settings),
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "fsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [_runner_container(spec)],
            "volumes": _volumes(spec),
            **({} if spec.disk_bound else {"schedulingGates": [{"name": DISK_GATE}]}),
        },
    }


def gated_claim(pod: Mapping[str, Any]) -> str | None:
    """The claim a runner pod made with ``DISK_GATE`` waits for; None when the pod
    is not (or no longer) gated."""
    spec = pod.get("spec") or {}
    if not any(gate.get("name") == DISK_GATE for gate in spec.get("schedulingGates") or ()):
        return None
    for volume in spec.get("volumes") or ():
        if volume.get("name") == _DISK_VOLUME:
            return str(volume["persistentVolumeClaim"]["claimName"])
    return None
