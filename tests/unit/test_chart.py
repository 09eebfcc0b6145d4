"""The Helm chart, rendered by the real helm binary and read as Kubernetes objects.

No cluster: ``helm template`` and ``helm lint`` only. The helm binary is part
of the toolchain that ``hack/build.sh`` builds. Without it these tests are
skipped (``make unit`` runs anywhere), except under ``make test`` and CI,
which build it first and fail them instead: there a skip would let a broken
chart through unnoticed (``conftest.py``).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmr.kube.client import HELD_POLICY
from helmr.operator.runners.network_policies import Containment, containment
from helmr.operator.settings import KUBE_DNS, METADATA_ADDRESSES, Settings
from helmr.resources.crd import RESOURCES
from tests.unit.helm import find_helm

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "helmr"
CRDS = REPO / "crds"
RELEASE = "helmr"
NAMESPACE = "helmr-system"

Manifest = dict[str, Any]

pytestmark = pytest.mark.helm


def _helm() -> str:
    found = find_helm()
    assert found is not None, "the helm marker skips these tests without helm"
    return found


def _run_helm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_helm(), *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=60
    )


def _set_args(values: dict[str, str]) -> list[str]:
    # --set-string would turn numbers into strings and hide the template's own
    # number formatting, so plain --set, as a user would type it.
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def render(
    values: dict[str, str] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    crds: bool = False,
    tests: bool = False,
) -> list[Manifest]:
    """The release's objects; with ``tests``, also the `helm test` hooks."""
    args = ["template", release, str(CHART), "--namespace", namespace, *_set_args(values or {})]
    if crds:
        args.append("--include-crds")
    if not tests:
        args.append("--skip-tests")
    done = _run_helm(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_error(values: dict[str, str]) -> str:
    done = _run_helm("template", RELEASE, str(CHART), "-n", NAMESPACE, *_set_args(values))
    assert done.returncode != 0, f"helm accepted {values}"
    return done.stderr


def of_kind(manifests: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: Iterable[Manifest], kind: str) -> Manifest:
    found = of_kind(manifests, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects rendered"
    return found[0]


def pod_spec(manifests: Iterable[Manifest]) -> dict[str, Any]:
    spec: dict[str, Any] = one(manifests, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(manifests: Iterable[Manifest]) -> dict[str, Any]:
    containers = pod_spec(manifests)["containers"]
    assert len(containers) == 1
    c: dict[str, Any] = containers[0]
    return c


def env(manifests: Iterable[Manifest]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(manifests)["env"]}


def argv(manifests: Iterable[Manifest]) -> list[str]:
    c = container(manifests)
    return [*c.get("command", []), *c.get("args", [])]


@pytest.fixture(scope="module")
def default() -> list[Manifest]:
    return render()


# --- lint and CRDs


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "watchNamespaces": "{team-a,team-b}",
            "persistence.enabled": "false",
            "metrics.serviceMonitor.enabled": "true",
            "networkPolicy.enabled": "true",
        },
    ],
    ids=["defaults", "everything-toggled"],
)
def test_helm_lint_passes(values: dict[str, str]) -> None:
    # --strict turns lint warnings into failures.
    done = _run_helm("lint", "--strict", str(CHART), *_set_args(values))
    assert done.returncode == 0, done.stdout + done.stderr


def test_chart_crds_are_the_generated_files_by_symlink() -> None:
    link = CHART / "crds"
    assert link.is_symlink(), "charts/helmr/crds must be a symlink so it can never drift"
    assert os.readlink(link) == "../../crds"
    assert link.resolve() == CRDS.resolve()


def test_rendered_crds_equal_the_generated_files() -> None:
    rendered = of_kind(render(crds=True), "CustomResourceDefinition")
    generated = [yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*.yaml"))]
    assert len(generated) == len(RESOURCES)
    by_name = {c["metadata"]["name"]: c for c in rendered}
    assert by_name == {c["metadata"]["name"]: c for c in generated}


def test_the_workspace_deletion_policy_is_installed_as_written() -> None:
    policy = CHART / "policies" / "workspace-deletion.yaml"
    expected = list(yaml.safe_load_all(policy.read_text()))
    rendered = render()
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        assert of_kind(rendered, kind) == [d for d in expected if d["kind"] == kind]
    # The API answers this policy's refusal with a 409 naming the holder (kube.refused_as_held).
    assert [d["metadata"]["name"] for d in expected] == [HELD_POLICY, HELD_POLICY]


def test_packaged_chart_holds_byte_identical_crds(tmp_path: Path) -> None:
    # What users install is the package: helm must resolve the symlink into
    # real files with the generated bytes, and add nothing else under crds/.
    done = _run_helm("package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (archive,) = tmp_path.glob("helmr-*.tgz")
    with tarfile.open(archive) as tar:
        packaged = {
            Path(m.name).name: tar.extractfile(m)
            for m in tar.getmembers()
            if m.isfile() and Path(m.name).parent == Path("helmr/crds")
        }
        contents = {name: f.read() for name, f in packaged.items() if f is not None}
    assert contents == {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}


# --- the control plane


def test_deployment_runs_kopf_standalone_all_namespaces(default: list[Manifest]) -> None:
    command = " ".join(argv(default))
    assert "kopf run -m helmr.operator.kopf" in command
    assert "--standalone" in argv(default)
    assert "--all-namespaces" in argv(default)
    assert not [a for a in argv(default) if a.startswith("--namespace")]


def test_deployment_is_one_pod_replaced_by_recreate(default: list[Manifest]) -> None:
    spec = one(default, "Deployment")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    # SQLite has one writer on one volume: more replicas need PostgreSQL
    # (tests/unit/test_chart_replicas.py).
    assert "existingSecret" in render_error({"replicas": "2"})


def test_image_defaults_and_override(default: list[Manifest]) -> None:
    c = container(default)
    assert c["image"] == "helmr.local/operator:dev"
    assert c["imagePullPolicy"] == "IfNotPresent"
    other = container(render({"image.repository": "ghcr.io/x/op", "image.tag": "1.2"}))
    assert other["image"] == "ghcr.io/x/op:1.2"


def test_environment_of_the_control_plane(default: list[Manifest]) -> None:
    assert env(default) == {
        "HELMR_STORE_PATH": "/var/lib/helmr/helmr.db",
        "HELMR_API_PORT": "8080",
        "HELMR_RUNNER_PORT": "8081",
        "HELMR_RUNNER_URL": "http://helmr.helmr-system.svc:8081",
        "HELMR_RUNNER_NODE_SELECTOR": "{}",
        "HELMR_RUNNER_TOLERATIONS": "[]",
        "HELMR_RUNNER_NETWORK_POLICY": "true",
        "HELMR_CONTROL_PLANE_PEERS": env(default)["HELMR_CONTROL_PLANE_PEERS"],
        "HELMR_RUNNER_DNS": env(default)["HELMR_RUNNER_DNS"],
        "HELMR_RUNNER_METADATA_ADDRESSES": "169.254.169.254,fd00:ec2::254",
        "HELMR_WATCH_NAMESPACES": "",
        "HELMR_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "HELMR_HISTORY_RETENTION_SECONDS": "2592000",
        "HELMR_MAX_EXECUTION_LOSSES": "3",
        "HELMR_STOP_GRACE_SECONDS": "10",
        "HELMR_PREPARATION_TIMEOUT_SECONDS": "300",
        "HELMR_ACTOR_GRACE_SECONDS": "30",
        "HELMR_MAX_REQUEST_BYTES": "1048576",
        "HELMR_TURN_EVENTS": "true",
        "HELMR_API_TURN_RESOURCES": "true",
        "HELMR_STATUS_INTERVAL": "0.5",
        "HELMR_LOG_FORMAT": "json",
        "HOME": "/tmp",
    }


def test_logs_are_json_unless_text_is_asked_for_kopfs_lines_too(default: list[Manifest]) -> None:
    assert "--log-format=json" in container(default)["args"]
    text = render({"operator.logFormat": "text"})
    assert env(text)["HELMR_LOG_FORMAT"] == "text"
    assert "--log-format=full" in container(text)["args"]


def test_turn_traces_go_to_the_otlp_endpoint_given(default: list[Manifest]) -> None:
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env(default)
    endpoint = "http://otel-collector.observability:4318"
    traced = env(render({"operator.otlpEndpoint": endpoint}))
    assert traced["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint


def test_per_turn_events_can_be_turned_off() -> None:
    assert env(render({"operator.turnEvents": "false"}))["HELMR_TURN_EVENTS"] == "false"


def test_api_turns_can_go_without_resources() -> None:
    rendered = env(render({"operator.apiTurnResources": "false"}))
    assert rendered["HELMR_API_TURN_RESOURCES"] == "false"


def test_runner_pod_placement_reaches_the_operator_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {
        "runner.nodeSelector.pool": "agents",
        "runner.tolerations[0].key": "helmr.dev/agents",
        "runner.tolerations[0].operator": "Exists",
        "runner.tolerations[0].effect": "NoSchedule",
    }
    rendered = env(render(values))
    for name in ("HELMR_RUNNER_NODE_SELECTOR", "HELMR_RUNNER_TOLERATIONS"):
        monkeypatch.setenv(name, rendered[name])
    settings = Settings()
    assert settings.runner_node_selector == {"pool": "agents"}
    assert settings.runner_tolerations == (
        {"key": "helmr.dev/agents", "operator": "Exists", "effect": "NoSchedule"},
    )


def _containment(monkeypatch: pytest.MonkeyPatch, rendered: dict[str, Any]) -> Containment | None:
    """What the operator makes of the rendered environment's runner network settings."""
    for name in (
        "HELMR_RUNNER_URL",
        "HELMR_RUNNER_PORT",
        "HELMR_RUNNER_NETWORK_POLICY",
        "HELMR_CONTROL_PLANE_PEERS",
        "HELMR_RUNNER_DNS",
        "HELMR_RUNNER_METADATA_ADDRESSES",
    ):
        monkeypatch.setenv(name, rendered[name])
    return containment(Settings())


def test_runner_pods_reach_this_releases_pods_at_the_runner_port(
    monkeypatch: pytest.MonkeyPatch, default: list[Manifest]
) -> None:
    contained = _containment(monkeypatch, env(default))
    assert contained is not None
    assert contained.runner_port == 8081
    [peer] = contained.control_plane
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"].items() <= labels.items()
    # The port runner pods connect to once the Service has translated its own.
    assert {"name": "runner", "containerPort": 8081, "protocol": "TCP"} in container(default)[
        "ports"
    ]
    assert contained.dns == KUBE_DNS
    assert contained.metadata_addresses == METADATA_ADDRESSES


def test_runner_network_settings_reach_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "runner.networkPolicy.controlPlane[0].ipBlock.cidr": "10.0.0.5/32",
        "runner.networkPolicy.dns.to[0].ipBlock.cidr": "169.254.20.10/32",
        "runner.networkPolicy.dns.ports[0].port": "53",
        "runner.networkPolicy.dns.ports[0].protocol": "UDP",
        "runner.networkPolicy.metadataAddresses": "{169.254.169.254,100.100.100.200}",
    }
    contained = _containment(monkeypatch, env(render(values)))
    assert contained is not None
    assert contained.control_plane == ({"ipBlock": {"cidr": "10.0.0.5/32"}},)
    assert contained.dns == {
        "to": [{"ipBlock": {"cidr": "169.254.20.10/32"}}],
        "ports": [{"port": 53, "protocol": "UDP"}],
    }
    assert contained.metadata_addresses == ("169.254.169.254", "100.100.100.200")
    off = env(render({"runner.networkPolicy.enabled": "false"}))
    assert _containment(monkeypatch, off) is None


def test_environment_values_are_passed_as_integers() -> None:
    # Helm reads YAML numbers as floats; large ones would reach the operator
    # as "8.64e+06" without the templates' int conversion.
    got = env(
        render(
            {
                "environment.historyRetentionSeconds": "8640000",
                "environment.limits.maxExecutionLosses": "5",
                "environment.limits.stopGraceSeconds": "30",
                "environment.limits.preparationTimeoutSeconds": "600",
                "environment.limits.actorGraceSeconds": "5",
                "environment.limits.maxRequestBytes": "16777216",
                "persistence.mountPath": "/data/",
                "persistence.file": "t.db",
            }
        )
    )
    assert got["HELMR_HISTORY_RETENTION_SECONDS"] == "8640000"
    assert got["HELMR_MAX_EXECUTION_LOSSES"] == "5"
    assert got["HELMR_STOP_GRACE_SECONDS"] == "30"
    assert got["HELMR_PREPARATION_TIMEOUT_SECONDS"] == "600"
    assert got["HELMR_ACTOR_GRACE_SECONDS"] == "5"
    assert got["HELMR_MAX_REQUEST_BYTES"] == "16777216"
    assert got["HELMR_STORE_PATH"] == "/data/t.db"


def test_watched_namespaces_reach_kopf_and_the_environment() -> None:
    manifests = render({"watchNamespaces": "{team-a,team-b}"})
    args = argv(manifests)
    assert "--all-namespaces" not in args
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    assert env(manifests)["HELMR_WATCH_NAMESPACES"] == "team-a,team-b"


def test_runner_url_follows_release_namespace_and_port() -> None:
    manifests = render({"runner.port": "9000"}, release="prod", namespace="ops")
    assert env(manifests)["HELMR_RUNNER_URL"] == "http://prod-helmr.ops.svc:9000"
    service = one(manifests, "Service")
    assert service["metadata"]["name"] == "prod-helmr"
    pinned = render({"runner.url": "https://helmr.example.internal:443"})
    assert env(pinned)["HELMR_RUNNER_URL"] == "https://helmr.example.internal:443"


def test_ports_container_service_and_probes(default: list[Manifest]) -> None:
    c = container(default)
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 8080, "runner": 8081}
    service = one(default, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        "http": (8080, "http"),
        "runner": (8081, "runner"),
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert "livenessProbe" not in container(render({"probes.enabled": "false"}))


def test_one_server_may_serve_both_ports() -> None:
    manifests = render({"api.port": "9090", "runner.port": "9090"})
    assert [p["containerPort"] for p in container(manifests)["ports"]] == [9090]
    assert [p["port"] for p in one(manifests, "Service")["spec"]["ports"]] == [9090]
    assert env(manifests)["HELMR_RUNNER_URL"] == "http://helmr.helmr-system.svc:9090"


def test_service_selects_the_control_plane_pod(default: list[Manifest]) -> None:
    selector = one(default, "Service")["spec"]["selector"]
    labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert selector == one(default, "Deployment")["spec"]["selector"]["matchLabels"]


def test_everything_namespaced_lands_in_the_release_namespace() -> None:
    manifests = render(namespace="ops")
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for m in manifests:
        if m["kind"] in cluster_scoped:
            assert "namespace" not in m["metadata"]
        else:
            assert m["metadata"]["namespace"] == "ops", m["kind"]


def test_schema_refuses_unknown_and_mistyped_values() -> None:
    assert "persistance" in render_error({"persistance.enabled": "false"})
    assert "historyRetentionSeconds" in render_error(
        {"environment.historyRetentionSeconds": "thirty"}
    )
    assert "logLevel" in render_error({"operator.logLevel": "loud"})
    # Duplicates would render the same Role twice.
    assert "watchNamespaces" in render_error({"watchNamespaces": "{a,a}"})


# --- Pod Security Standard "restricted"

RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """The checks of the Pod Security Standard "restricted" (baseline included), by field.

    Written from the standard's table (kubernetes.io/docs/concepts/security/
    pod-security-standards), so a regression in the chart is caught without
    a cluster; the chart's cluster install exercises the real admission.
    """
    bad: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    containers = [*spec.get("initContainers", []), *spec.get("containers", [])]
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            bad.append(f"{host} is set")
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            bad.append(f"volume {volume['name']} is {sorted(kinds)}")
    for sysctl in pod_sc.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            bad.append(f"unsafe sysctl {sysctl['name']}")
    if pod_sc.get("runAsUser") == 0:
        bad.append("pod runAsUser is 0")
    if pod_sc.get("seccompProfile", {}).get("type") == "Unconfined":
        bad.append("pod seccompProfile is Unconfined")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            bad.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: adds capabilities {caps['add']}")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            bad.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            bad.append(f"{name}: runAsUser is 0")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile")) or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile is {seccomp.get('type')}")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount is {sc['procMount']}")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            bad.append(f"{name}: uses a hostPort")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("user") or selinux.get("role"):
            bad.append(f"{name}: sets SELinux user or role")
    return bad


def test_the_restricted_check_can_fail(default: list[Manifest]) -> None:
    # The checker must notice each kind of breach, or a passing chart proves nothing.
    spec = pod_spec(default)
    assert restricted_violations(spec) == []
    breaches: list[tuple[str, str, dict[str, Any]]] = [
        ("hostNetwork", "pod", {"hostNetwork": True}),
        ("hostPath", "pod", {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
        ("allowPrivilegeEscalation", "container", {"allowPrivilegeEscalation": True}),
        ("drop ALL", "container", {"capabilities": {"drop": []}}),
        (
            "adds capabilities",
            "container",
            {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}},
        ),
        ("runAsNonRoot", "container", {"runAsNonRoot": False}),
        ("seccompProfile", "container", {"seccompProfile": {"type": "Unconfined"}}),
        ("privileged", "container", {"privileged": True}),
    ]
    for expected, where, patch in breaches:
        broken = copy.deepcopy(spec)
        target = broken if where == "pod" else broken["containers"][0]["securityContext"]
        target.update(patch)
        found = restricted_violations(broken)
        assert any(expected in v for v in found), (expected, found)


@pytest.mark.parametrize(
    "values",
    [{}, {"persistence.enabled": "false"}, {"watchNamespaces": "{a}", "probes.enabled": "false"}],
    ids=["defaults", "no-persistence", "namespaced"],
)
def test_pod_meets_restricted_pod_security(values: dict[str, str]) -> None:
    manifests = render(values)
    spec = pod_spec(manifests)
    assert restricted_violations(spec) == []
    # Beyond the standard, what this chart promises: uid 65532, an immutable
    # root filesystem, and the store's volume (and /tmp) the only writable paths.
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(manifests)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m for m in container(manifests)["volumeMounts"]}
    assert set(mounts) == {"/var/lib/helmr", "/tmp"}
    assert not any(m.get("readOnly") for m in mounts.values())
    assert env(manifests)["HELMR_STORE_PATH"].startswith("/var/lib/helmr/")


# --- RBAC

VERBS_CRUD = {"get", "list", "watch", "create", "update", "patch", "delete"}
NAMESPACED_RULES: dict[tuple[str, str], set[str]] = {
    ("helmr.dev", "actors"): VERBS_CRUD,
    ("helmr.dev", "sessions"): VERBS_CRUD,
    ("helmr.dev", "turns"): VERBS_CRUD,
    # Created by the API beside each Session it starts (else on its first run).
    ("helmr.dev", "workspaces"): VERBS_CRUD,
    ("helmr.dev", "actors/status"): {"get", "patch", "update"},
    ("helmr.dev", "sessions/status"): {"get", "patch", "update"},
    ("helmr.dev", "turns/status"): {"get", "patch", "update"},
    ("helmr.dev", "workspaces/status"): {"get", "patch", "update"},
    ("", "pods"): {"get", "list", "watch", "create", "patch", "delete"},
    # The runner pods' service account (no RBAC): created once per namespace.
    ("", "serviceaccounts"): {"create"},
    # Runner pods' NetworkPolicies, by server-side apply: never read or deleted.
    ("networking.k8s.io", "networkpolicies"): {"create", "patch"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "create", "patch", "delete"},
    ("snapshot.storage.k8s.io", "volumesnapshots"): {"get", "list", "watch", "create", "delete"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
}
CLUSTER_RULES: dict[tuple[str, str], set[str]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get", "list", "watch"},
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
    # An Actor's Accepted condition: is its imagePullPolicy Never image on a node?
    ("", "nodes"): {"list"},
    # An Actor's SavesAvailable condition: can the cluster save a Computer disk?
    ("storage.k8s.io", "storageclasses"): {"list"},
    ("snapshot.storage.k8s.io", "volumesnapshotclasses"): {"list"},
    # A save's cut, read off its VolumeSnapshotContent (watched): read-only.
    ("snapshot.storage.k8s.io", "volumesnapshotcontents"): {"get", "list", "watch"},
}
# kopf lists and watches namespaces only when serving a list of them
# (kopf/_core/reactor/observation.py: namespace_observer skips it when clusterwide).
NAMESPACES_RULE: dict[tuple[str, str], set[str]] = {("", "namespaces"): {"get", "list", "watch"}}


def grants(role: Manifest) -> dict[tuple[str, str], set[str]]:
    """(group, resource) → verbs, merged over the role's rules; refuses wildcards."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), f"wildcard {field} in {rule}"
            assert all("*" not in item for item in rule.get(field, [])), rule
        assert "nonResourceURLs" not in rule, rule
        assert "resourceNames" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_grants_refuses_wildcards() -> None:
    with pytest.raises(AssertionError, match="wildcard"):
        grants({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]})
    with pytest.raises(AssertionError, match="wildcard"):
        grants({"rules": [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]})


def _bound_to_service_account(binding: Manifest, role: Manifest, namespace: str) -> None:
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role["kind"],
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "helmr", "namespace": namespace}
    ]


def test_rbac_all_namespaces_is_one_cluster_role_with_exactly_the_needed_rules(
    default: list[Manifest],
) -> None:
    role = one(default, "ClusterRole")
    assert grants(role) == CLUSTER_RULES | NAMESPACED_RULES
    assert not of_kind(default, "Role")
    assert not of_kind(default, "RoleBinding")
    _bound_to_service_account(one(default, "ClusterRoleBinding"), role, NAMESPACE)
    assert one(default, "ServiceAccount")["metadata"]["name"] == "helmr"
    assert pod_spec(default)["serviceAccountName"] == "helmr"


def test_rbac_watched_namespaces_get_roles_and_the_cluster_role_shrinks() -> None:
    manifests = render({"watchNamespaces": "{team-a,team-b}"})
    cluster_role = one(manifests, "ClusterRole")
    assert grants(cluster_role) == CLUSTER_RULES | NAMESPACES_RULE
    _bound_to_service_account(one(manifests, "ClusterRoleBinding"), cluster_role, NAMESPACE)
    roles = {r["metadata"]["namespace"]: r for r in of_kind(manifests, "Role")}
    bindings = {b["metadata"]["namespace"]: b for b in of_kind(manifests, "RoleBinding")}
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    for ns, role in roles.items():
        # A served namespace's Secrets are read (get: never listed or watched) for the
        # settings a warm pool's pod gets at adoption; nowhere else.
        assert grants(role) == NAMESPACED_RULES | {("", "secrets"): {"get"}}
        _bound_to_service_account(bindings[ns], role, NAMESPACE)


def test_rbac_never_grants_what_it_should_not(default: list[Manifest]) -> None:
    granted = grants(one(default, "ClusterRole"))
    # No Secret at all: runners prove who they are with their pods' projected
    # tokens (TokenReview). Leases are for kopf peering, which --standalone
    # turns off; runner pods are never exec'd into; the runner service
    # account is never given a token (serviceaccounts/token) by the operator.
    assert not [k for k in granted if k[1] == "secrets"]
    assert ("", "serviceaccounts/token") not in granted
    assert not [k for k in granted if k[0] == "coordination.k8s.io"]
    assert ("", "pods/exec") not in granted
    assert ("", "namespaces") not in granted


def test_rbac_can_be_left_to_the_user() -> None:
    manifests = render({"rbac.create": "false", "serviceAccount.create": "false"})
    kinds = {m["kind"] for m in manifests}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert "ServiceAccount" not in kinds
    assert pod_spec(manifests)["serviceAccountName"] == "default"


def test_cluster_scoped_names_do_not_collide_across_namespaces() -> None:
    a = one(render(namespace="one"), "ClusterRole")["metadata"]["name"]
    b = one(render(namespace="two"), "ClusterRole")["metadata"]["name"]
    assert a != b


# --- storage


def test_persistence_on_claims_a_volume(default: list[Manifest]) -> None:
    pvc = one(default, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "helmr-data"
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in pvc["spec"]
    (data,) = [v for v in pod_spec(default)["volumes"] if v["name"] == "data"]
    assert data == {"name": "data", "persistentVolumeClaim": {"claimName": "helmr-data"}}


def test_persistence_size_and_class() -> None:
    pvc = one(
        render({"persistence.size": "20Gi", "persistence.storageClass": "fast"}),
        "PersistentVolumeClaim",
    )
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert pvc["spec"]["storageClassName"] == "fast"
    none = one(render({"persistence.storageClass": "-"}), "PersistentVolumeClaim")
    assert none["spec"]["storageClassName"] == ""
    loose = one(render({"persistence.retainOnUninstall": "false"}), "PersistentVolumeClaim")
    assert "helm.sh/resource-policy" not in loose["metadata"].get("annotations", {})


def test_persistence_off_is_an_empty_dir() -> None:
    manifests = render({"persistence.enabled": "false"})
    assert not of_kind(manifests, "PersistentVolumeClaim")
    (data,) = [v for v in pod_spec(manifests)["volumes"] if v["name"] == "data"]
    assert data == {"name": "data", "emptyDir": {}}


def test_the_demo_release_keeps_its_timeline_on_a_claim() -> None:
    """Issue 9 item 8: "Once the local cluster has a StorageClass, the demo keeps its
    timeline on a PVC". The chart rendered with hack/demo.sh's own --set values
    claims a volume of the default StorageClass (helmr-hostpath there)."""
    demo = (REPO / "hack" / "demo.sh").read_text()
    install = demo[demo.index("helm upgrade --install") :].split(">/dev/null")[0]
    sets = re.findall(r'--set "?([^" \\]+)"?', install)
    values = dict(s.replace("$DEMO_NS", "helmr-demo").split("=", 1) for s in sets)
    assert "persistence.enabled" not in values
    pvc = one(render(values), "PersistentVolumeClaim")
    assert "storageClassName" not in pvc["spec"]


def test_existing_claim_is_used_not_created() -> None:
    manifests = render({"persistence.existingClaim": "mine"})
    assert not of_kind(manifests, "PersistentVolumeClaim")
    (data,) = [v for v in pod_spec(manifests)["volumes"] if v["name"] == "data"]
    assert data["persistentVolumeClaim"] == {"claimName": "mine"}


# --- metrics and network policy


def test_prometheus_scrape_annotations(default: list[Manifest]) -> None:
    annotations = one(default, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    off = one(render({"metrics.podAnnotations": "false"}), "Deployment")
    assert "annotations" not in off["spec"]["template"]["metadata"]


def test_service_monitor_toggle(default: list[Manifest]) -> None:
    assert not of_kind(default, "ServiceMonitor")
    manifests = render(
        {"metrics.serviceMonitor.enabled": "true", "metrics.serviceMonitor.labels.release": "prom"}
    )
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "http"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    service_labels = one(manifests, "Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()


def _ingress_by_port(policy: Manifest) -> dict[int, list[Any] | None]:
    return {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}


def test_network_policy_admits_only_runner_pods_to_the_runner_port(
    default: list[Manifest],
) -> None:
    assert not of_kind(default, "NetworkPolicy")
    manifests = render({"networkPolicy.enabled": "true"})
    policy = one(manifests, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    labels = one(manifests, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    rules = _ingress_by_port(policy)
    assert rules[8080] is None  # the public API: open unless apiFrom says otherwise
    assert rules[8081] == [
        {"podSelector": {"matchLabels": {"helmr.dev/component": "runner"}}, "namespaceSelector": {}}
    ]


def test_network_policy_with_watched_namespaces() -> None:
    policy = one(
        render({"networkPolicy.enabled": "true", "watchNamespaces": "{team-a,team-b}"}),
        "NetworkPolicy",
    )
    (peer,) = _ingress_by_port(policy)[8081] or []
    assert peer["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": ["team-a", "team-b"],
            }
        ]
    }


def test_network_policy_refuses_a_shared_port() -> None:
    err = render_error({"networkPolicy.enabled": "true", "runner.port": "8080"})
    assert "runner.port different from api.port" in err
