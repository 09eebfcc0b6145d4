"""kopf adapters: the only importer of kopf; each handler adapts one Kubernetes fact to one call.

``kopf run -m helmr.operator.kopf`` runs the control plane: importing this
package registers the handlers (:mod:`helmr.operator.kopf.handlers`).
"""

from helmr.operator.kopf import handlers as handlers
