"""The store's state mirrored into the custom resources, their conditions and Kubernetes Events."""
