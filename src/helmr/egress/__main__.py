"""Runs the egress proxy: ``python -m helmr.egress [proxy.py flags]``.

proxy.py listens (``--port``, 3128 unless told) on every address, one acceptor
process, a thread per connection, with :class:`helmr.egress.plugin.Allowlist` as
its only plugin, dropping a connection idle for ten minutes; the rest of its flags
(another ``--timeout``, ``--log-level``) may follow, and win.
"""

from __future__ import annotations

import sys
import threading

import proxy

PORT = 3128
IDLE_SECONDS = 600
"""How long a connection may pass no data before proxy.py drops it. Its own default,
10 s, would cut a model call that thinks for longer before it answers."""
FLAGS = [
    "--hostname=0.0.0.0",
    f"--port={PORT}",
    f"--timeout={IDLE_SECONDS}",
    "--threaded",
    "--num-acceptors=1",
    "--plugins=helmr.egress.plugin.Allowlist",
]


def main() -> None:
    with proxy.Proxy(FLAGS + sys.argv[1:]):
        threading.Event().wait()


if __name__ == "__main__":
    main()
