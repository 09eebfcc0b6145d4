"""Helmr: durable, long-running agent sessions on Kubernetes.

The distribution is split by side, and each side is imported on its own:

- ``helmr.runner``: the SDK an actor imports inside its runner pod (``actor``).
- ``helmr.client``: the async client used outside an actor (``Client``).
- ``helmr.operator``: the control plane (kopf operator + API), ``kopf run -m helmr.operator.kopf``.
"""

__version__ = "0.1.0"
