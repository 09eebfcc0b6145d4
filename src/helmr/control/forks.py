"""Forking a Session at a Turn: a new Session on a new Workspace whose disk is
restored from the save of that Turn, the source untouched.

A fork is made only from the save cut at exactly that Turn's end
(:mod:`helmr.control.disks`: saves are turn-aligned), and only once it is ready:
a Turn whose state was saved with a later one (coalesced, or under a save
interval) or whose save failed cannot be forked, and one whose save is being
taken, or is still to be taken at that Turn's end, is refused with
``SaveNotReady`` (fork again once it is); never is
a fork silently made from an older or newer state.
"""

from __future__ import annotations

from helmr.control import sessions as session_control
from helmr.control.disks import at_turn_end
from helmr.control.views import load_session
from helmr.errors import Conflict, NotFound, SaveNotReady
from helmr.protocol.api import SessionView
from helmr.resources.workspace import save_name
from helmr.store import ReadTx, Tx, disks, sessions, turns
from helmr.store.rows import ForkRow, SaveRow


def fork(
    tx: Tx,
    *,
    source_id: str,
    at_turn: str,
    name: str,
    workspace: str,
    actor: str | None = None,
    idempotency_key: str | None = None,
) -> SessionView:
    """Opens Session ``name`` of the source's Actor (Conflict if ``actor`` names
    another), in its namespace, on the new Workspace ``workspace``, whose disk starts
    from the save of Turn ``at_turn`` of Session ``source_id``. The same
    ``(namespace, idempotency_key)`` returns the same Session."""
    source = sessions.require(tx, source_id)
    namespace = source.namespace
    if actor is not None and actor != source.actor:
        raise Conflict(
            f"session {source.name} runs actor {source.actor}, not {actor}: a fork runs the"
            " same actor",
            actor=source.actor,
        )
    if idempotency_key is not None:
        existing = sessions.by_idempotency_key(tx, namespace, idempotency_key)
        if existing is not None:
            return load_session(tx, existing.id)
    turn = turns.get(tx, at_turn)
    if turn is None or turn.session_id != source_id:
        raise NotFound(f"turn {at_turn} of session {source_id} not found", turn_id=at_turn)
    save = disks.save_of_turn(tx, namespace, source.workspace, at_turn)
    if turn.status != "completed" or save is None:
        raise Conflict(
            f"turn {at_turn} is {turn.status}: only a completed Turn has a save to fork",
            turn_id=at_turn,
            status=turn.status,
        )
    _require_forkable(save, on_its_way=_on_its_way(tx, save))
    if disks.get(tx, namespace, workspace) is not None:
        raise Conflict(
            f"workspace {workspace} exists: a fork starts on a new Workspace",
            workspace=workspace,
        )
    fork_row = ForkRow(
        snapshot=save_name(source.workspace, save.version),
        session_id=source_id,
        workspace=source.workspace,
        turn_id=at_turn,
    )
    disks.set_fork(tx, namespace, workspace, fork_row)
    return session_control.open_session(
        tx,
        namespace=namespace,
        name=name,
        actor=source.actor,
        workspace=workspace,
        idempotency_key=idempotency_key,
    )


def _on_its_way(rt: ReadTx, save: SaveRow) -> bool:
    """Whether a pending save will be taken as itself: it is being taken, or the disk
    is still at its Turn's end (the operator takes it next, unless a save policy's
    interval holds it, or a later Turn's save covers it first)."""
    if save.status != "pending":
        return False
    session = sessions.get(rt, save.session_id)
    return save.taken_at is not None or (session is not None and at_turn_end(rt, save, session))


def _require_forkable(save: SaveRow, *, on_its_way: bool) -> None:
    """Refuses a save that does not hold exactly its Turn's state, ready; one
    ``on_its_way`` is refused until it is."""
    name = save_name(save.workspace, save.version)
    if save.status == "ready":
        return
    if on_its_way:
        raise SaveNotReady(
            f"save {name} of turn {save.turn_id} is not ready yet: fork again once it is",
            save=name,
            status=save.status,
        )
    if save.status in ("covered", "pending"):
        raise Conflict(
            f"turn {save.turn_id} has no save of its own: its state is saved only with a"
            " later Turn's (saves coalesced, or the save policy's interval): fork at that Turn",
            turn_id=save.turn_id,
            status=save.status,
            covered_by=None
            if save.covered_by is None
            else save_name(save.workspace, save.covered_by),
        )
    raise Conflict(
        f"save {name} of turn {save.turn_id} is {save.status}: nothing to fork from",
        save=name,
        status=save.status,
    )
