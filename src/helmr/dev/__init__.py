"""``helmr dev``: an actor run locally on the real control plane, without a cluster.

:class:`~helmr.dev.plane.DevPlane` assembles the operator's store, ``Control``,
APIs and ``Supervisor`` with runner processes as local subprocesses and Computer
disks as directories (docs/dev.md). It imports neither kopf nor the Kubernetes
client (import-linter holds it).
"""

from helmr.dev.plane import DevOptions, DevPlane

__all__ = ["DevOptions", "DevPlane"]
