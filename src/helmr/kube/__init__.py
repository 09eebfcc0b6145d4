"""Kubernetes, sealed: the only package that imports its client. The calls Helmr
makes (``client``) on threads of their own (``threads``), the leader Lease
(``lease``), token and access reviews (``reviews``), the kubectl plugin's kubeconfig
and calls (``kubeconfig``), label keys and names, and the errors every call raises
(``errors``), which the API answers once (``helmr.server.errors``)."""
