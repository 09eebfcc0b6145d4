"""Runs the egress proxy: ``python -m helmr.egress [proxy.py flags]``.

proxy.py listens (``--port``, 3128 unless told) on every address, one acceptor
process, a thread per connection, with :class:`helmr.egress.plugin.Allowlist` as
its only plugin; the rest of its flags (timeouts, log level) may follow.
"""

from __future__ import annotations

import sys
import threading

import proxy

PORT = 3128
FLAGS = [
    "--hostname=0.0.0.0",
    f"--port={PORT}",
    "--threaded",
    "--num-acceptors=1",
    "--plugins=helmr.egress.plugin.Allowlist",
]


def main() -> None:
    with proxy.Proxy(FLAGS + sys.argv[1:]):
        threading.Event().wait()


if __name__ == "__main__":
    main()
