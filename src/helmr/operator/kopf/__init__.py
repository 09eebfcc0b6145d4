"""kopf adapters: the only importer of kopf; each handler adapts one Kubernetes fact to one call."""
