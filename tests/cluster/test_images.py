"""Helmr's images start Python without compiling it: every module a runner imports
before its first call is read from bytecode the image holds.

An image's files all have mtime 0 (``helmr.images.oci`` writes its layers so, for
the same digests from the same inputs): bytecode checked against its source's mtime
(Debian's own, for the standard library) would be stale at every start, and each
runner would compile again all it imports, in its pod's share of the CPU.
"""

from __future__ import annotations

from kubernetes import client

from .pods import finished, restricted_container, wait_pod

RUNNER_IMPORTS = "import helmr.runner.entrypoint, echo.echo"
"""What a runner process imports before its first call (its entrypoint, an actor)."""
FROM_SOURCE = "# code object from /"
"""``python3 -v``'s line for a module compiled from its source (the line for one read
from bytecode names the ``.pyc``, quoted)."""


def test_a_runner_imports_bytecode_only(
    core: client.CoreV1Api, namespace: str, runner_image: str
) -> None:
    container = restricted_container(
        "imports", ["python3", "-v", "-c", RUNNER_IMPORTS], image=runner_image
    )
    assert container.security_context is not None
    container.security_context.read_only_root_filesystem = True  # as a runner's is
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="imports"),
        spec=client.V1PodSpec(
            restart_policy="Never", automount_service_account_token=False, containers=[container]
        ),
    )
    core.create_namespaced_pod(namespace, pod)

    assert wait_pod(core, namespace, "imports", finished).status.phase == "Succeeded"
    lines = core.read_namespaced_pod_log("imports", namespace).splitlines()
    read = [line for line in lines if line.startswith("# code object from '")]
    assert any("/asyncio/__pycache__/base_events." in line for line in read)
    assert any("/helmr/runner/__pycache__/entrypoint." in line for line in read)
    assert [line for line in lines if line.startswith(FROM_SOURCE)] == []
    assert [line for line in lines if "bytecode is stale" in line] == []
