"""The proxy's decision, as a proxy.py plugin: proxy.py speaks HTTP (CONNECT tunnels,
plain requests, keep-alive), this says which request goes where.

For each request, before proxy.py connects upstream: the client's address names a
runner pod and so its Actor (:mod:`helmr.egress.directory`), the Actor must name
the host and port, and the name must resolve to an address the Actor may reach;
proxy.py then connects to that address, the one checked (``resolve_dns``), not to
whatever a second lookup would return. Anything else is answered 403 with the
reason, and nothing is connected.

proxy.py runs each connection on a thread of its own (``--threaded``), in an
acceptor process it forks: the directory and its watches start in that process, at
its first request.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from typing import Any

from proxy.http.exception import HttpRequestRejected
from proxy.http.parser import HttpParser
from proxy.http.proxy import HttpProxyBasePlugin

from helmr.egress.allowlist import Refused
from helmr.egress.directory import Directory
from helmr.kube.runner_watch import follow_runners

log = logging.getLogger(__name__)

ENV_NAMESPACES = "HELMR_WATCH_NAMESPACES"
ENV_METADATA = "HELMR_RUNNER_METADATA_ADDRESSES"
METADATA_ADDRESSES = "169.254.169.254,fd00:ec2::254"

_started = threading.Lock()
_directory: Directory | None = None


def directory() -> Directory:
    """This process's directory, following the apiserver from the first call on."""
    global _directory
    with _started:
        if _directory is None:
            namespaces = tuple(n for n in os.environ.get(ENV_NAMESPACES, "").split(",") if n)
            _directory = Directory(scopes=2 * max(1, len(namespaces)))
            follow_runners(_directory, namespaces)
        return _directory


def metadata_addresses() -> tuple[str, ...]:
    text = os.environ.get(ENV_METADATA, METADATA_ADDRESSES)
    return tuple(str(ipaddress.ip_address(a.strip())) for a in text.split(",") if a.strip())


def resolve(host: str, port: int) -> list[str]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Refused(f"{host} does not resolve: {exc}") from None
    return [str(info[4][0]) for info in found]


def refusal(reason: str) -> HttpRequestRejected:
    return HttpRequestRejected(
        status_code=403,
        reason=b"Forbidden",
        headers={b"Content-Type": b"text/plain; charset=utf-8"},
        body=f"helmr egress proxy: {reason}\n".encode(),
    )


class Allowlist(HttpProxyBasePlugin):
    """Lets a runner's request through only to a host its Actor names, at an address
    it may reach."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None

    def before_upstream_connection(self, request: HttpParser) -> HttpParser | None:
        client = str(self.client.addr[0]) if self.client.addr else ""
        host = request.host.decode() if request.host else ""
        port = request.port or 0
        try:
            if not host:
                raise Refused("only proxy requests (CONNECT host:port, or an absolute URL)")
            actor, allowance = directory().allowance(client)
            allowance.check_host(host, port)
            self._address = allowance.choose_address(
                host, resolve(host, port), metadata_addresses()
            )
        except Refused as refused:
            log.info("refused %s -> %s:%s: %s", client, host, port, refused)
            raise refusal(str(refused)) from None
        log.info("%s (%s) -> %s:%s at %s", client, actor, host, port, self._address)
        return request

    def resolve_dns(self, host: str, port: int) -> tuple[str | None, None]:
        return self._address, None
