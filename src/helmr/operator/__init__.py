"""The Helmr control plane: a kopf operator and the API in one asyncio process.

Run it with ``kopf run -m helmr.operator.kopf --standalone --all-namespaces``:
importing :mod:`helmr.operator.kopf` registers the handlers. Importing this
package, or any of its other rooms (the supervisor, the disks, the mirror), does
not load kopf: ``helmr dev`` reuses them without it.
"""
