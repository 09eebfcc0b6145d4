"""The egress proxy: hostname allowlists for runner pods (``spec.network.egressHosts``).

A NetworkPolicy names addresses, and the addresses behind a name change; so an
Actor that names hostnames gets them through this proxy, which the chart runs as a
Deployment and Service of its own (``egressProxy``). Its runner pods are told it
(``HTTPS_PROXY``, ``HTTP_PROXY``) and may reach it; every other destination stays
closed to them by policy. The proxy serves HTTP CONNECT and plain HTTP requests
(proxy.py does the protocol: :mod:`helmr.egress.plugin` decides) and lets one
through only when:

- it comes from a runner pod (its source address, which agent code cannot choose:
  the pod has no capabilities, and a TCP handshake needs the address's replies),
  whose Actor (the pod's ``helmr.dev/actor`` label, set by the operator, which agent
  code has no credentials to change) names the host and port;
- the name resolves, here, to an address the Actor may reach: a public one, or
  one inside an ``egress`` CIDR of the Actor (private, loopback, link-local and
  the metadata addresses otherwise refused; a metadata address only when a CIDR
  names it exactly). The proxy connects to the address it checked.

It does not cover what is not HTTP through a proxy: raw TCP or UDP, and DNS itself
(runner pods resolve names through the cluster's DNS, which may carry data out).
"""
