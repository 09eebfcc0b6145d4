"""OCI images without Docker: the writer (``oci``) and actor images over the runner image."""
