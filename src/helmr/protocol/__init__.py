"""The runner protocol: how a runner process talks to the control plane.

Both sides import this package: the runner (``helmr.runner``) builds requests
with it and the server (``helmr.server``) parses them with it, so the wire
format has exactly one definition. It holds three small things:

- ``models``: the JSON bodies of every runner request and reply (dataclasses,
  which the server validates with pydantic and the runner reads without it);
- ``routes``: the route patterns (for the server's router) and path builders
  (for the runner), e.g. ``routes.receive(session_id)``;
- ``contract``: the header, the environment a runner pod gets, its exit codes.

Beside it, the public REST API (``/v1``) has the same one definition for both
of its ends, the server and ``helmr.client``: ``api`` holds the views the server
returns, ``api_requests`` the requests and their limits (pages, long polls),
``api_routes`` the route patterns and path builders.

The rules of the conversation, which both sides rely on:

- Every call is ``POST`` with a JSON body (``{}`` when a model has no fields
  set) and carries ``Authorization: Bearer <the session's runner token>`` and
  ``Helmr-Process-Epoch: <n>``. A call from any epoch but the session's
  current one is answered 409 ``stale_epoch``: that process is fenced and
  stops at once, writing nothing more. Errors are ``HelmrError.to_json()``
  bodies (``{"error": {"code", "message"}}``).
- Every call is safe to repeat, because the runner retries after connection
  errors and 502/503/504 (the control plane may restart):
  ``receive`` answers the turn already assigned to this epoch while that turn
  is unsettled (so a reply lost in transit is not a lost turn, and asking for
  the next turn never settles the current one); ``output`` deduplicates by its
  required ``idempotency_key``; ``respond``, ``messages/ready`` and the
  message outcomes are state assignments; repeating the ``complete`` or
  ``fail`` that settled a turn answers 200 again (and a ``next`` in it answers
  the turn it started, as ``receive`` would); ``release`` of a turn already back
  in the queue answers 200 again; ``messages/next`` answers the
  oldest message of the turn not yet reported ``started``, again and again
  until it is.
- ``stops`` is the stop channel: the runner holds it open (a long poll) with
  the turns it holds, and it answers, as soon as there are any, the ones to
  stop: a stop of them was accepted (an interrupt, a cancel) or they ended
  elsewhere (a deadline, a failed session). The runner sets their signal. A
  listed turn the process settled itself is no answer while the process runs
  another (its settlement's ``next`` started it), and a stop of the turn the
  process runs now answers that turn's id, listed or not: a busy process holds
  one poll for many turns.
- Long polls (``receive``, ``messages/next``, ``stops``) wait at most the
  request's ``timeout`` seconds; the server may cut that shorter. ``receive``
  then answers 408 ``receive_timeout``, ``messages/next`` answers
  ``{"message": null}``, ``stops`` answers ``{"turn_ids": []}``. The runner
  polls again while its own deadline allows.
- A turn-scoped call for a turn that is no longer active (interrupted,
  cancelled, already settled by another outcome), or whose stop was accepted
  (an interrupt or cancel; it ends ``interrupted`` once this process lets go
  of it: its next ``receive``, or its end), is answered 409
  ``turn_not_active``; ``messages/next`` during settlement answers 409
  ``turn_settling``. The runner then sets the turn's signal.
- ``storage`` reports the bytes used on the Computer disk (a state assignment:
  the control plane compares it with the Session's thresholds, and records an
  episode's change once however often the same level is reported). The runner
  reports when the used fraction crosses one of the levels it was given, and
  now and then regardless.
- A message is ``started`` just before its handler runs, then exactly one of
  ``delivered`` (handler returned), ``rejected`` (the handler raised
  ``MessageRejected``; ``reason`` is its message) or ``unknown`` (the handler
  failed unexpectedly; ``reason`` describes the failure). Settlement rejects
  the messages whose handler never started.
- ``cancel`` cancels the Session, as the public cancel does (repeating it
  changes nothing).
- A settlement may carry the runner's next ``receive`` (``next``, revision 3):
  the reply then holds the turn started for this process at once, if any. The
  runner hands it to the actor's next ``receive``; if the actor never asks (its
  ``run`` ended, or it asked with other labels), the runner ``release``s it: the
  turn goes back to the head of the queue, untouched (``turn.queued`` again).
  With a ``timeout`` (revision 5), a settlement that finds no turn to start holds
  its reply as a ``receive`` waits (the same wake-ups, ends and timeout): the
  reply's head is sent once the settlement has committed, so the actor's
  ``complete`` returns then, and its body (``next``: the turn, ``{"closed":
  true}``, or null for none yet) when the wait ends. The settlement is never
  undone by the wait, and a connection lost during it loses nothing: the runner
  repeats the settlement, which answers as above (the turn the lost reply
  started, as ``receive`` would). An error during the wait (the process fenced,
  say) answers null: the ``receive`` that follows hears it.
- ``receive`` with ``start: false`` (revision 6) answers the turn already started
  for this process and starts none, waiting for none (408 at once), then or ever
  after for that process: a runner whose ``run`` ended asks it after cutting a
  held reply short, to give back a turn that reply may have started, and takes
  nothing new.
- Output written in one burst may go as one ``output/batch`` (revision 3),
  appended in order in one transaction.
- ``adoption`` (revision 4) is a pooled runner's only call before it has a Session:
  authenticated by its pod's token alone, it long-polls until a Session adopts the
  pod, then answers that Session, its epoch and settings (``AdoptionReply``); a
  timeout answers 408 ``receive_timeout``. The token is the Session's runner token
  from then on, and no Session's before.
- The protocol has revisions (``contract.ENV_PROTOCOL``): the control plane
  accepts every older revision's requests as they were, and tells its runner
  pods the revision it speaks; a runner sends nothing that revision lacks.
"""

from helmr.protocol import contract, routes
from helmr.protocol.contract import EPOCH_HEADER, ExitCode
from helmr.protocol.models import (
    Ack,
    ActorSettings,
    AdoptionReply,
    AdoptionRequest,
    CompleteRequest,
    FailRequest,
    Message,
    MessageOutcomeRequest,
    NextMessageReply,
    NextMessageRequest,
    NextReceive,
    OutputBatchRequest,
    OutputRequest,
    ReceiveReply,
    ReceiveRequest,
    RespondRequest,
    SessionClosed,
    Settled,
    StopsReply,
    StopsRequest,
    StorageReport,
    TurnAssignment,
    parse_receive_reply,
    to_json,
)
from helmr.states import ErrorInfo, MessageOutcome

__all__ = [
    "EPOCH_HEADER",
    "Ack",
    "ActorSettings",
    "AdoptionReply",
    "AdoptionRequest",
    "CompleteRequest",
    "ErrorInfo",
    "ExitCode",
    "FailRequest",
    "Message",
    "MessageOutcome",
    "MessageOutcomeRequest",
    "NextMessageReply",
    "NextMessageRequest",
    "NextReceive",
    "OutputBatchRequest",
    "OutputRequest",
    "ReceiveReply",
    "ReceiveRequest",
    "RespondRequest",
    "SessionClosed",
    "Settled",
    "StopsReply",
    "StopsRequest",
    "StorageReport",
    "TurnAssignment",
    "contract",
    "parse_receive_reply",
    "routes",
    "to_json",
]
