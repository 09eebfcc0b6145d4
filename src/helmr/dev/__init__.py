"""``helmr dev``: an actor run locally on the real control plane, without a cluster.

:class:`~helmr.dev.plane.DevPlane` assembles the operator's store, ``Control``,
APIs and ``Supervisor`` with runner processes as local subprocesses and Computer
disks as directories (docs/dev.md). None of its modules imports kopf, the
Kubernetes client or ``helmr.kube`` (import-linter holds it); the operator's
modules it reuses import ``helmr.kube``, never kopf (its handlers are
``helmr.operator.kopf``'s, which ``kopf run -m helmr.operator.kopf`` imports).
"""

from helmr.dev.plane import DevOptions, DevPlane

__all__ = ["DevOptions", "DevPlane"]
