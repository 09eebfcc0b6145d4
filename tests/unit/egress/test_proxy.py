"""The egress proxy end to end on this machine: proxy.py with the allowlist plugin,
a client whose address its directory names, an HTTP server behind it."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import proxy
import pytest

from helmr.egress import plugin
from helmr.egress.__main__ import FLAGS
from helmr.egress.allowlist import Allowance
from helmr.egress.directory import Directory

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield int(served.server_address[1])
    served.shutdown()
    served.server_close()


RUNNER_POD = {
    "metadata": {"uid": "u", "namespace": "team", "labels": {"helmr.dev/actor": "a"}},
    "status": {"podIP": "127.0.0.1", "phase": "Running"},
}
"""This machine, as a runner pod of the Actor team/a."""


@contextmanager
def proxying(monkeypatch: pytest.MonkeyPatch, allowance: Allowance | None) -> Iterator[int]:
    """A proxy whose directory knows this machine as a runner pod of an Actor allowing
    ``allowance`` (None: knows no runner pod); its port. Its acceptor process is
    forked with the directory as it is now."""
    known = Directory(scopes=0)
    if allowance is not None:
        known.pod_changed("ADDED", RUNNER_POD)
        known._allowances[("team", "a")] = allowance
    monkeypatch.setattr(plugin, "_directory", known)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    flags = [f for f in FLAGS if not f.startswith(("--hostname", "--port"))]
    with proxy.Proxy([*flags, "--hostname=127.0.0.1", f"--port={port}"]):
        yield port


def ask(port: int, request: str) -> bytes:
    """Sends ``request`` to the proxy (through an established tunnel, a GET too): all
    it answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request.encode())
        answer = connection.recv(4096)
        if answer.startswith(b"HTTP/1.1 200 Connection established"):
            connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
        while chunk := connection.recv(4096):
            answer += chunk
        return answer


def test_an_allowed_host_through_a_tunnel_and_by_plain_http(
    monkeypatch: pytest.MonkeyPatch, server: int
) -> None:
    allowed = Allowance(hosts=(("localhost", (server,)),), networks=LOOPBACK)
    with proxying(monkeypatch, allowed) as port:
        tunnel = ask(port, f"CONNECT localhost:{server} HTTP/1.1\r\n\r\n")
        plain = ask(port, f"GET http://localhost:{server}/ HTTP/1.0\r\nHost: localhost\r\n\r\n")
    assert tunnel.startswith(b"HTTP/1.1 200 Connection established")
    assert tunnel.endswith(b"hello")
    assert plain.startswith(b"HTTP/1.0 200")
    assert plain.endswith(b"hello")


@pytest.mark.parametrize(
    ("hosts", "networks", "target", "reason"),
    [
        ((), LOOPBACK, "localhost:{port}", b"localhost is not among the hosts"),
        ((("localhost", (1,)),), LOOPBACK, "localhost:{port}", b"localhost is allowed on port 1"),
        ((("localhost", ("{port}",)),), (), "localhost:{port}", b"localhost resolves to 127.0.0.1"),
        ((("localhost", ("{port}",)),), LOOPBACK, "127.0.0.1:{port}", b"127.0.0.1 is not among"),
    ],
)
def test_anything_else_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
    server: int,
    hosts: tuple[tuple[str, tuple[object, ...]], ...],
    networks: tuple[ipaddress.IPv4Network, ...],
    target: str,
    reason: bytes,
) -> None:
    named = tuple((h, tuple(int(str(p).format(port=server)) for p in ports)) for h, ports in hosts)
    destination = target.format(port=server)
    with proxying(monkeypatch, Allowance(hosts=named, networks=networks)) as port:
        answers = [
            ask(port, f"CONNECT {destination} HTTP/1.1\r\n\r\n"),
            ask(port, f"GET http://{destination}/ HTTP/1.1\r\n\r\n"),
        ]
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 403 Forbidden"), answer
        assert b"helmr egress proxy: " + reason in answer, answer


def test_a_client_that_is_no_runner_pod_is_refused(
    monkeypatch: pytest.MonkeyPatch, server: int
) -> None:
    monkeypatch.setattr("helmr.egress.directory.ARRIVAL_SECONDS", 0.1)
    with proxying(monkeypatch, None) as port:
        answer = ask(port, f"CONNECT localhost:{server} HTTP/1.1\r\n\r\n")
    assert b"127.0.0.1 is not a runner pod of an Actor" in answer, answer
