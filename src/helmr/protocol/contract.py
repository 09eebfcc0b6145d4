"""What the operator gives a runner process and what it gets back.

The operator starts ``python -m helmr.runner`` with the environment below and
reads the process's exit code when it ends.
"""

from __future__ import annotations

from enum import IntEnum

EPOCH_HEADER = "Helmr-Process-Epoch"
"""Header on every runner call: the process epoch the call is fenced by."""

ENV_URL = "HELMR_URL"
"""Base URL of the control plane's runner API, e.g. ``http://helmr.helmr-system:8080``."""

ENV_SESSION_ID = "HELMR_SESSION_ID"
"""The session this process runs (``ses_...``); unset in a pooled runner (``ENV_POOL``)."""

ENV_POOL = "HELMR_POOL"
"""Set (to its Actor's name) in a runner of a warm pool (protocol revision 4): it has no
Session yet, imports its actor, then long-polls ``adoption`` for its Session, process
epoch, warm wait and the Session's settings (``spec.env``, ``spec.envFrom``), which it
puts in its environment before ``run`` starts. ``ENV_SESSION_ID`` and
``ENV_PROCESS_EPOCH`` are then unset."""

ENV_NAMESPACE = "HELMR_NAMESPACE"
"""The Session's namespace (for the process's log lines)."""

ENV_TOKEN_FILE = "HELMR_TOKEN_FILE"
"""Path of the file holding the process's bearer token: its pod's projected
service-account token, which the kubelet replaces before it expires (read it for
every call)."""

ENV_PROCESS_EPOCH = "HELMR_PROCESS_EPOCH"
"""This process's epoch (a decimal integer), sent back in ``Helmr-Process-Epoch``."""

ENV_ENTRYPOINT = "HELMR_ENTRYPOINT"
"""The actor to run, ``module:attr`` (``attr`` may be dotted), naming an ``Actor``."""

ENV_PROTOCOL = "HELMR_PROTOCOL"
"""The revision of the runner protocol the control plane speaks (a decimal integer);
unset: 1, a control plane older than this variable. A runner uses nothing a
revision lacks, so an actor image built against a newer Helmr keeps working
with an older control plane, and an older image with a newer one.

1. The routes of ``helmr.protocol.routes`` but ``cancel``.
2. ``cancel`` (an actor cancels its own Session); ``receive``'s ``metadata``
   and ``tags``, and its ``actor_settings`` (what ``actor(...)`` declared).
3. ``complete``'s and ``fail``'s ``next`` (start the next turn in the same
   request), ``release`` (give back a turn so started that the actor never got),
   and the ``output/batch`` routes (a burst of writes in one request).
4. ``adoption`` (a pooled runner learns its Session, epoch and settings: ``ENV_POOL``).
5. A settlement's ``next`` may wait (its ``timeout``): with no turn to start, the
   reply is held as a ``receive`` would be, its head sent once the settlement
   committed and its body (the next turn, or none yet) when the wait ends.
6. ``receive``'s ``start: false``: answer the turn already started for this
   process, start none and wait for none, and none for this process from then on
   (an ending process's last look, to give back what it was given).
"""

PROTOCOL = 6
"""The revision this Helmr speaks (``ENV_PROTOCOL`` in the pods it starts)."""

ENV_IDLE_TIMEOUT = "HELMR_IDLE_TIMEOUT"
"""Seconds (a positive number) this process waits warm for its next turn before it
ends itself (managed suspension; new work starts a new process): the Session's
``idleTimeoutSeconds``, else its Actor's. Optional."""

ENV_COMPUTER_DIR = "HELMR_COMPUTER_DIR"
"""Where the Computer disk is mounted: the Workspace's files, saved after completed
Turns and restored after execution loss. Writable by the runner's user."""

COMPUTER_DIR = "/computer"
"""The Computer disk's mount path in runner pods (the value of ``HELMR_COMPUTER_DIR``)."""


ENV_COMPUTER_CAPACITY = "HELMR_COMPUTER_CAPACITY"
"""The Computer disk's size in bytes (its claim's request): what the runner measures
its usage against and reports (``storage``). Unset: the runner measures nothing."""

ENV_COMPUTER_LEVELS = "HELMR_COMPUTER_LEVELS"
"""Comma-separated used fractions (``0.85,0.9,0.98``: the Session's ``resolveAt``,
``pauseAt`` and ``stopAt``): the runner reports as soon as its usage crosses one."""

ENV_COMPUTER_INTERVAL = "HELMR_COMPUTER_INTERVAL"
"""Seconds between two measurements of the Computer disk's usage."""


class ExitCode(IntEnum):
    """How a runner process ended, as its exit code tells the control plane."""

    OK = 0
    """``run`` returned, or the process was asked to stop (SIGTERM) and did."""

    ACTOR_FAILED = 1
    """``run`` raised: a process failure. The runner first failed its unsettled turn."""

    FENCED = 75
    """A call was answered ``stale_epoch``: a newer process owns the session."""

    INIT_FAILED = 78
    """The environment or ``HELMR_ENTRYPOINT`` is wrong, or importing the actor failed."""
