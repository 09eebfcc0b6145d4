"""The Helmr control plane: a kopf operator and the API in one asyncio process.

Run it with ``kopf run -m helmr.operator --standalone --all-namespaces``;
importing this package registers the handlers.
"""

from helmr.operator.kopf import handlers as handlers
