"""``kubectl helmr``: the ``helmr`` commands, with the API found from a kubeconfig.

Installed as the ``kubectl-helmr`` executable (the ``kubectl`` extra), which
kubectl runs as a plugin. Unlike ``helmr.cli`` it needs the Kubernetes client.
"""

from helmr.kubectl.command import main

__all__ = ["main"]
