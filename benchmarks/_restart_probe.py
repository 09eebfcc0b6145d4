"""A client of its own for ``bench_scale.py kwok``'s restart -> ready.

    python _restart_probe.py ENQUEUE_URL TOKEN

Run as a process apart from the benchmark, whose one event loop also plays every
simulated runner: after a restart those thousands of runners reconnect at once, and
a client on that loop would wait its turn behind them, which no real client does.
It enqueues one no-op Turn (a POST to ENQUEUE_URL), asking again every 50 ms
while the control plane does not serve (the connection refused or reset, a 5xx),
never giving up on an answer that is slow (a client's patience is not what is
measured), and prints one line of JSON: when the API admitted the Turn (wall
clock, ``time.time()``), when it first answered anything, the attempts, and the
Turn's id. Standard library only: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

RETRY_AFTER = 0.05
PATIENCE = 300.0


def main(enqueue_url: str, token: str) -> None:
    request = urllib.request.Request(
        enqueue_url,
        data=json.dumps({"input": "noop"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    first_answer: float | None = None
    for attempt in range(1, int(PATIENCE / RETRY_AFTER)):
        try:
            with urllib.request.urlopen(request, timeout=PATIENCE) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            first_answer = first_answer or time.time()
            if exc.code < 500:
                raise
        except (ConnectionError, urllib.error.URLError):
            pass  # not listening yet
        else:
            admitted = time.time()
            line = {
                "admitted": admitted,
                "first_answer": first_answer or admitted,
                "attempts": attempt,
                "turn": body["id"],
            }
            print(json.dumps(line), flush=True)
            return
        time.sleep(RETRY_AFTER)
    raise SystemExit(f"not admitted within {PATIENCE} s")


if __name__ == "__main__":
    main(*sys.argv[1:3])
