"""``helmr session ...``: start, read, feed and control sessions; read their timeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import JsonValue

from helmr.cli import render
from helmr.cli.runtime import TIMED_OUT, parse_json, run, settings_of, show
from helmr.client import Client, SecretKey, Sent
from helmr.errors import HistoryUnavailable
from helmr.protocol.api_requests import DEFAULT_PAGE, MAX_PAGE, MAX_SAFE_INTEGER

session_arg = click.argument("session_id", metavar="SESSION")
turn_arg = click.argument("turn_id", metavar="TURN")
idempotency = click.option("--idempotency-key", help="Repeating the call with it repeats nothing.")
F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def session() -> None:
    """Sessions of an actor: start, enqueue turns, send, control, read events."""


def env_options(command: F) -> F:
    """``--env``, ``--env-secret`` and ``--env-from``: a new session's own settings."""
    for option in reversed(
        (
            click.option(
                "--env",
                "values",
                multiple=True,
                metavar="NAME=VALUE",
                help="An environment variable of the session's actor (repeatable).",
            ),
            click.option(
                "--env-secret",
                "secret_keys",
                multiple=True,
                metavar="NAME=SECRET:KEY",
                help="A variable whose value is KEY of the Secret SECRET in the namespace"
                " (repeatable).",
            ),
            click.option(
                "--env-from",
                "secrets",
                multiple=True,
                metavar="SECRET",
                help="A Secret in the namespace whose every key becomes a variable (repeatable).",
            ),
        )
    ):
        command = option(command)
    return command


@session.command()
@click.argument("actor")
@click.option(
    "-n",
    "--namespace",
    envvar="HELMR_NAMESPACE",
    required=True,
    help="The actor's namespace (or HELMR_NAMESPACE).",
)
@click.option("-w", "--workspace", required=True, help="The Workspace the session will own.")
@click.option("--key", help="An application-defined key kept with the session.")
@env_options
@idempotency
@click.pass_context
def start(
    ctx: click.Context,
    actor: str,
    namespace: str,
    workspace: str,
    key: str | None,
    values: tuple[str, ...],
    secret_keys: tuple[str, ...],
    secrets: tuple[str, ...],
    idempotency_key: str | None,
) -> None:
    """Start a session of ACTOR. It takes no input: enqueue turns afterwards."""
    env = _session_env(values, secret_keys)

    async def work(client: Client) -> None:
        started, run_view = await client.actors.start(
            actor,
            namespace=namespace,
            workspace=workspace,
            key=key,
            idempotency_key=idempotency_key,
            env=env or None,
            env_from=list(secrets) or None,
        )
        assert started.state is not None  # start returns the view with the reference
        if settings_of(ctx).json:
            render.emit_json(
                {
                    "session": started.state.model_dump(mode="json"),
                    "run": run_view and run_view.model_dump(mode="json"),
                }
            )
        else:
            render.session(started.state)

    run(ctx, work)


def _session_env(
    values: tuple[str, ...], secret_keys: tuple[str, ...]
) -> dict[str, str | SecretKey]:
    """``--env NAME=VALUE`` and ``--env-secret NAME=SECRET:KEY`` as ``actors.start``'s env."""
    env: dict[str, str | SecretKey] = {}
    for given in values:
        name, equals, value = given.partition("=")
        if not equals:
            raise click.BadParameter(f"{given!r}: write NAME=VALUE", param_hint="--env")
        env[name] = value
    for given in secret_keys:
        name, equals, ref = given.partition("=")
        secret, colon, secret_key = ref.partition(":")
        if not (equals and colon):
            raise click.BadParameter(f"{given!r}: write NAME=SECRET:KEY", param_hint="--env-secret")
        env[name] = SecretKey.model_construct(secret=secret, key=secret_key)
    return env


@session.command()
@session_arg
@click.pass_context
def get(ctx: click.Context, session_id: str) -> None:
    """Show a session: status, hold, active and queued work."""

    async def work(client: Client) -> None:
        show(ctx, await client.sessions.ref(session_id).retrieve(), render.session)

    run(ctx, work)


@session.command()
@session_arg
@click.argument("input_json", metavar="INPUT_JSON", callback=parse_json)
@idempotency
@click.pass_context
def enqueue(
    ctx: click.Context, session_id: str, input_json: JsonValue, idempotency_key: str | None
) -> None:
    """Enqueue a turn with INPUT_JSON (JSON; '-' reads stdin). Always FIFO work."""

    async def work(client: Client) -> None:
        ref = await client.sessions.ref(session_id).enqueue(
            input_json, idempotency_key=idempotency_key
        )
        assert ref.state is not None  # enqueue returns the view with the reference
        show(ctx, ref.state, render.turn)

    run(ctx, work)


def _sent(ctx: click.Context, sent: Sent) -> None:
    assert sent.turn.state is not None  # send returns the turn's view
    if settings_of(ctx).json:
        render.emit_json(
            {
                "kind": sent.kind,
                "turn": sent.turn.state.model_dump(mode="json"),
                "message": sent.message and sent.message.model_dump(mode="json"),
            }
        )
    elif sent.message is not None:
        render.message(sent.message)
    else:
        click.echo(f"no active turn: enqueued turn {sent.turn.id} #{sent.turn.state.sequence}")


@session.command()
@session_arg
@click.argument("data_json", metavar="DATA_JSON", callback=parse_json)
@click.option("--turn", "turn_id", help="Send to exactly this turn; refused unless it is active.")
@click.pass_context
def send(ctx: click.Context, session_id: str, data_json: JsonValue, turn_id: str | None) -> None:
    """Send DATA_JSON to the active turn, or enqueue it when the session is idle."""

    async def work(client: Client) -> None:
        ref = client.sessions.ref(session_id)
        if turn_id is None:
            _sent(ctx, await ref.send(data_json))
        else:
            show(ctx, await ref.turn(turn_id).send(data_json), render.message)

    run(ctx, work)


@session.command()
@session_arg
@click.option("--turn", "turn_id", help="Stop only this running turn; the queue goes on.")
@click.pass_context
def interrupt(ctx: click.Context, session_id: str, turn_id: str | None) -> None:
    """Stop the active turn and hold the session (queued work stays) until resumed."""

    async def work(client: Client) -> None:
        ref = client.sessions.ref(session_id)
        receipt = await (ref.interrupt() if turn_id is None else ref.turn(turn_id).interrupt())
        show(ctx, receipt, render.receipt)

    run(ctx, work)


@session.command()
@session_arg
@click.option("--hold-id", required=True, help="The hold to release (see `helmr session get`).")
@click.pass_context
def resume(ctx: click.Context, session_id: str, hold_id: str) -> None:
    """Release exactly that hold. The interrupted turn is never replayed."""

    async def work(client: Client) -> None:
        show(ctx, await client.sessions.ref(session_id).resume(hold_id=hold_id), render.session)

    run(ctx, work)


@session.command()
@session_arg
@idempotency
@click.pass_context
def cancel(ctx: click.Context, session_id: str, idempotency_key: str | None) -> None:
    """Cancel: reject new input, cancel queued turns, interrupt the active one."""

    async def work(client: Client) -> None:
        view = await client.sessions.ref(session_id).cancel(idempotency_key=idempotency_key)
        show(ctx, view, render.session)

    run(ctx, work)


@session.command()
@session_arg
@click.option("--at-turn", "at_turn", required=True, help="The completed Turn to fork at.")
@click.option("-w", "--workspace", help="The new Workspace the fork owns (default: fork-<ulid>).")
@env_options
@idempotency
@click.pass_context
def fork(
    ctx: click.Context,
    session_id: str,
    at_turn: str,
    workspace: str | None,
    values: tuple[str, ...],
    secret_keys: tuple[str, ...],
    secrets: tuple[str, ...],
    idempotency_key: str | None,
) -> None:
    """Fork a session at a completed turn: a new session of its actor on a new
    Workspace restored from that turn's save. The source is untouched. The fork runs
    with the source's environment unless --env, --env-secret or --env-from is given."""
    env = _session_env(values, secret_keys)

    async def work(client: Client) -> None:
        forked = await client.sessions.fork(
            session_id,
            at_turn=at_turn,
            workspace=workspace,
            idempotency_key=idempotency_key,
            env=env or None,
            env_from=list(secrets) or None,
        )
        assert forked.state is not None  # fork returns the view with the reference
        show(ctx, forked.state, render.session)

    run(ctx, work)


@session.command()
@session_arg
@click.pass_context
def close(ctx: click.Context, session_id: str) -> None:
    """Close once accepted work has drained; no new turns are admitted."""

    async def work(client: Client) -> None:
        show(ctx, await client.sessions.ref(session_id).close(), render.session)

    run(ctx, work)


@session.command()
@session_arg
@click.option(
    "--after",
    type=click.IntRange(0, MAX_SAFE_INTEGER),
    default=0,
    show_default=True,
    help="Only records after this sequence.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=DEFAULT_PAGE,
    show_default=True,
    help="Records per page.",
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing records as they are appended, until the session ends.",
)
@click.pass_context
def events(ctx: click.Context, session_id: str, after: int, limit: int, follow: bool) -> None:
    """Print the session's timeline (one page, or --follow it). With --json, one page is one
    JSON document and --follow prints one record per line."""
    as_json = settings_of(ctx).json

    async def work(client: Client) -> None:
        timeline = client.sessions.ref(session_id).events
        if follow:
            cursor = after
            while True:
                try:
                    async for record in timeline.stream(after=cursor):
                        show(ctx, record, render.event)
                    return
                except HistoryUnavailable as gap:
                    click.echo(_history_gap(gap.after, gap.retained_after), err=True)
                    cursor = gap.retained_after
        page = await timeline.list(after=after, limit=limit)
        if after < page.retained_after:
            click.echo(_history_gap(after, page.retained_after), err=True)
        if as_json:
            render.emit_json(page)
            return
        for record in page.records:
            render.event(record)
        if page.has_more:
            click.echo(f"more: --after {page.next_after}", err=True)

    run(ctx, work)


def _history_gap(after: int, retained_after: int) -> str:
    return (
        f"history unavailable: the records after {after} up to {retained_after} were removed"
        f" by history retention; showing the records after {retained_after}"
    )


@session.group()
def turn() -> None:
    """One turn of a session: read it or wait for its outcome."""


@turn.command("get")
@session_arg
@turn_arg
@click.pass_context
def turn_get(ctx: click.Context, session_id: str, turn_id: str) -> None:
    """Show a turn: status, result, response, error."""

    async def work(client: Client) -> None:
        show(ctx, await client.sessions.ref(session_id).turn(turn_id).retrieve(), render.turn)

    run(ctx, work)


@turn.command("wait")
@session_arg
@turn_arg
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    help="Seconds to wait; then exit 124 with the current view (the turn goes on).",
)
@click.pass_context
def turn_wait(ctx: click.Context, session_id: str, turn_id: str, timeout: float | None) -> None:
    """Wait for a turn's outcome."""

    async def work(client: Client) -> int | None:
        view = await client.sessions.ref(session_id).turn(turn_id).wait(timeout=timeout)
        show(ctx, view, render.turn)
        return TIMED_OUT if view.timeout else None

    run(ctx, work)
