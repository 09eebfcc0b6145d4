"""How the CLI prints: one JSON document with ``--json``, short lines for people otherwise."""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import BaseModel

from helmr.cli import timeline
from helmr.cli.timeline import compact
from helmr.client import Event, Message, Session, StopReceipt, Turn, Workspace


def emit_json(value: BaseModel | dict[str, Any]) -> None:
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    click.echo(json.dumps(data, ensure_ascii=False))


def _rows(rows: list[tuple[str, object]]) -> None:
    for label, value in rows:
        if value is not None:
            click.echo(f"{label:<10}{value}")


def session(view: Session) -> None:
    hold = None if view.hold is None else f"{view.hold.hold_id} ({view.hold.reason})"
    _rows(
        [
            ("session", view.id),
            ("status", view.status + (f" ({view.closed_how})" if view.closed_how else "")),
            ("held", hold),
            ("actor", f"{view.namespace}/{view.actor} on workspace {view.workspace}"),
            ("key", view.key),
            ("active", view.active_turn_id),
            ("queued", view.queued_turns),
            ("cancel", view.cancel_requested_at and f"requested at {view.cancel_requested_at}"),
            ("failed", view.failure_reason),
        ]
    )


def workspace(view: Workspace) -> None:
    _rows(
        [
            ("workspace", view.id),
            ("disk", view.claim_name),
            ("version", view.computer_version or "none saved yet"),
            ("restored", view.restored_from and f"from {view.restored_from}"),
            ("pending", view.pending_saves),
            ("held by", view.held_by),
        ]
    )


def turn(view: Turn) -> None:
    expired = " (payloads expired)" if view.payload_expired else ""
    _rows(
        [
            ("turn", f"{view.id} #{view.sequence} in {view.session_id}"),
            ("status", view.status + (f" ({view.reason})" if view.reason else "") + expired),
            ("wait", "timed out; the turn goes on" if view.timeout else None),
            ("input", compact(view.input)),
            ("result", compact(view.result) if view.has_result else None),
            ("response", compact(view.response) if view.has_response else None),
            ("error", view.error and f"{view.error.code}: {view.error.message}"),
        ]
    )


def message(view: Message) -> None:
    click.echo(f"message {view.id} {view.status} for turn {view.turn_id}")


def receipt(view: StopReceipt) -> None:
    stopped = f"turn {view.turn_id} asked to stop; " if view.turn_id else ""
    click.echo(f"{stopped}hold {view.hold_id} ({view.scope})")
    click.echo(f"resume with: helmr session resume {view.session_id} --hold-id {view.hold_id}")


def event(record: Event) -> None:
    click.echo(timeline.line(record))
