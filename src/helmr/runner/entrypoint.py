"""``python -m helmr.runner``: run the actor named by the environment, once.

Reads the environment the operator sets (``helmr.protocol.contract``),
imports ``HELMR_ENTRYPOINT`` and awaits ``actor.run(session)``. The exit code
tells the control plane how the process ended (``ExitCode``): 0 when ``run``
returned or the process was asked to stop, 1 when ``run`` raised (the runner
first fails the turn it held: ``handler_raised``), 75 when fenced, 78 when the
actor could not be loaded. A ``run`` that returns while it holds a turn
unsettled broke the Turn contract: the runner fails that turn
(``turn_contract_broken``) before it exits 0. SIGTERM (and SIGINT) set the held turn's signal and
cancel ``run``. A background task keeps the stop channel open
(``helmr.runner.stop_listener``), so a stop the control plane accepts sets the
held turn's signal at once. Another measures the Computer disk's usage and
reports it (``helmr.runner.disk_usage``) when the operator gave the disk's size.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial

from helmr import logs
from helmr.errors import HelmrError, ReceiveTimeout
from helmr.protocol import AdoptionReply, AdoptionRequest, ExitCode, contract, routes
from helmr.runner.actor import DEFAULT_IDLE_TIMEOUT, Actor
from helmr.runner.disk_usage import DiskUsage, report_disk_usage
from helmr.runner.http import HttpClient
from helmr.runner.session import Session
from helmr.runner.stop_listener import listen_for_stops
from helmr.runner.transport import Transport
from helmr.runner.turn import HANDLER_RAISED, TURN_CONTRACT_BROKEN

log = logging.getLogger("helmr.runner")

ADOPTION_POLL = 60.0
"""Seconds one adoption long poll may wait (a pooled runner polls again and again)."""

FAIL_GRACE = 30.0
"""Seconds the runner spends failing its held turn after ``run`` raised, before exiting."""


class InitError(Exception):
    """The process cannot start the actor; the message says what to fix."""


@dataclass(frozen=True)
class Config:
    url: str
    session_id: str
    token_file: str
    """The runner's projected token (``read_token``): re-read for every call."""
    epoch: int
    entrypoint: str
    idle_timeout: float | None = None
    """The control plane's warm wait (``HELMR_IDLE_TIMEOUT``), if it gave one."""
    protocol: int = 1
    """The runner protocol revision the control plane speaks (``HELMR_PROTOCOL``)."""
    disk_usage: DiskUsage | None = None
    """The Computer disk to measure and report, if the operator gave its capacity."""
    pool: str | None = None
    """The Actor whose warm pool this runner is in (``HELMR_POOL``): it has no Session
    until adopted (``session_id`` empty, ``epoch`` 0 until then)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Config:
        def need(name: str) -> str:
            value = environ.get(name, "").strip()
            if not value:
                raise InitError(f"set {name} (the operator sets it in runner pods)")
            return value

        token_file = need(contract.ENV_TOKEN_FILE)
        try:
            token = read_token(token_file)
        except OSError as e:
            raise InitError(f"{contract.ENV_TOKEN_FILE}={token_file} cannot be read: {e}") from e
        if not token:
            raise InitError(f"{contract.ENV_TOKEN_FILE}={token_file} is empty")
        pool = environ.get(contract.ENV_POOL, "").strip() or None
        epoch = "0" if pool else need(contract.ENV_PROCESS_EPOCH)
        if not epoch.isdigit():
            raise InitError(f"{contract.ENV_PROCESS_EPOCH}={epoch!r} is not an integer")
        idle = environ.get(contract.ENV_IDLE_TIMEOUT, "").strip()
        protocol = environ.get(contract.ENV_PROTOCOL, "").strip() or "1"
        if not protocol.isdigit() or int(protocol) < 1:
            raise InitError(f"{contract.ENV_PROTOCOL}={protocol!r} is not a positive integer")
        try:
            disk_usage = DiskUsage.from_environ(environ)
        except ValueError as e:
            raise InitError(str(e)) from e
        return cls(
            url=need(contract.ENV_URL),
            session_id="" if pool else need(contract.ENV_SESSION_ID),
            token_file=token_file,
            epoch=int(epoch),
            entrypoint=need(contract.ENV_ENTRYPOINT),
            idle_timeout=_seconds(contract.ENV_IDLE_TIMEOUT, idle) if idle else None,
            protocol=int(protocol),
            disk_usage=disk_usage,
            pool=pool,
        )

    def adopted(self, adoption: AdoptionReply) -> Config:
        """This pooled runner's configuration once its Session adopted it."""
        idle = self.idle_timeout if adoption.idle_timeout is None else adoption.idle_timeout
        return replace(
            self, session_id=adoption.session_id, epoch=adoption.epoch, idle_timeout=idle
        )


def read_token(path: str) -> str:
    """The token in ``path`` now (the kubelet replaces the file before it expires)."""
    # A plain open, not pathlib: the runner imports nothing it can do without.
    with open(path, encoding="utf-8") as file:
        return file.read().strip()


def _seconds(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise InitError(f"{name}={value!r} is not a positive number of seconds")
    return seconds


def load_actor(entrypoint: str) -> Actor:
    """Imports ``module:attr`` (``attr`` may be dotted) and checks that it is an Actor."""
    module_name, _, attr = entrypoint.partition(":")
    if not module_name or not attr:
        raise InitError(f"{contract.ENV_ENTRYPOINT}={entrypoint!r}: write it as 'module:attr'")
    target: object = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InitError(f"{entrypoint}: {module_name} has no attribute {attr!r}") from None
    if not isinstance(target, Actor):
        raise InitError(f"{entrypoint} is a {type(target).__name__}, not actor(...)")
    return target


def main(environ: Mapping[str, str] = os.environ) -> int:
    problem = None
    try:
        fmt = logs.log_format(environ.get(logs.ENV_LOG_FORMAT))
    except ValueError as e:
        fmt, problem = "text", e
    logs.configure(fmt, logging.INFO)
    if problem is not None:
        log.warning("%s; logging text", problem)
    # Every line of this process is about its Session and epoch (and, while the
    # actor holds one, its Turn: helmr.runner.session binds it).
    logs.bind(namespace=environ.get(contract.ENV_NAMESPACE) or None)
    try:
        config = Config.from_environ(environ)
        if config.pool is None:
            logs.bind(session=config.session_id, epoch=config.epoch)
        # Imported before adoption in a pooled runner: that is what makes it warm.
        actor = load_actor(config.entrypoint)
    except InitError as e:
        log.error("cannot start: %s", e)
        return ExitCode.INIT_FAILED
    except Exception:
        log.exception("importing the actor failed")
        return ExitCode.INIT_FAILED
    return asyncio.run(_adopted_then_serve(actor, config))


async def _adopted_then_serve(actor: Actor, config: Config) -> int:
    """A pooled runner waits to be adopted first (:func:`wait_for_adoption`), then
    serves its Session on the connection its adoption was answered on: its first
    ``receive`` opens none (a DNS lookup, a TCP and maybe a TLS handshake, on the
    Session's first Turn's path)."""
    if config.pool is None:
        return await _serve(actor, config)
    http = HttpClient(config.url)
    try:
        try:
            adoption = await wait_for_adoption(config, http)
        except HelmrError as e:  # its Session's settings cannot be had
            log.error("cannot start: adoption refused: %s", e)
            return ExitCode.INIT_FAILED
        config = config.adopted(adoption)
        logs.bind(session=config.session_id, epoch=config.epoch)
        log.info("adopted by session %s as process %d", config.session_id, config.epoch)
        return await _serve(actor, config, http)
    finally:
        await http.close()


async def wait_for_adoption(config: Config, http: HttpClient | None = None) -> AdoptionReply:
    """Long-polls ``adoption`` until a Session adopts this pod, then puts the Session's
    settings in the environment (``os.environ``): an actor reads them in ``run``.
    ``http``: the connections to poll on (kept open for the Session's calls)."""
    transport = Transport(
        config.url,
        "",
        partial(read_token, config.token_file),
        0,
        on_fenced=_exit_fenced,
        http=http,
    )
    async with transport:
        while True:
            try:
                reply = await transport.call(
                    routes.ADOPTION, AdoptionRequest(timeout=ADOPTION_POLL), wait=ADOPTION_POLL
                )
            except ReceiveTimeout:
                continue
            adoption = AdoptionReply.from_json(reply)
            os.environ.update(adoption.env)
            return adoption


def idle_timeout(config: Config, actor: Actor) -> float:
    """The process's warm wait: the control plane's value (the Session's or Actor
    manifest's, passed only when one sets it) is the one enforced;
    ``actor(idle_timeout=)`` applies where it gave none, and the runner's default
    where neither did."""
    return config.idle_timeout or actor.idle_timeout or DEFAULT_IDLE_TIMEOUT


async def _serve(actor: Actor, config: Config, http: HttpClient | None = None) -> int:
    transport = Transport(
        config.url,
        config.session_id,
        partial(read_token, config.token_file),
        config.epoch,
        on_fenced=_exit_fenced,
        http=http,
    )
    async with transport:
        session = Session(
            transport,
            idle_timeout=idle_timeout(config, actor),
            protocol=config.protocol,
            settings=actor.settings(),
        )
        run = asyncio.get_running_loop().create_task(_run(actor, session))
        stops = asyncio.get_running_loop().create_task(listen_for_stops(session, transport))
        background = [stops]
        if config.disk_usage is not None:
            reporting = report_disk_usage(config.disk_usage, config.session_id, transport.call)
            background.append(asyncio.create_task(reporting))
        try:
            return await _await_run(run, session)
        finally:
            await _give_back(session)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)


async def _await_run(run: asyncio.Task[None], session: Session) -> int:
    """Awaits ``run``; the process's exit code (SIGTERM and SIGINT cancel it)."""
    stopping = False

    def stop() -> None:
        nonlocal stopping
        stopping = True
        log.info("asked to stop: signalling the held turn and cancelling run")
        session.ask_no_more()
        held = session._unsettled_turn()
        if held is not None:
            held.signal.abort("process_stopping")
        run.cancel()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    try:
        await run
    except asyncio.CancelledError:
        if not stopping:
            raise
        return ExitCode.OK
    except Exception as e:
        if stopping:
            log.info("run ended with %r while stopping", e)
            return ExitCode.OK
        log.exception("run raised: this process has failed")
        await _fail_held(session, e, HANDLER_RAISED)
        return ExitCode.ACTOR_FAILED
    # Writes the actor started but did not await still belong to it: let them land.
    await session.output.drain()
    held = session._unsettled_turn()
    if held is not None:
        # Returning from run is not completion (spec/001): the turn fails.
        log.error("run returned with turn %s unsettled: failing it", held.id)
        await _fail_held(
            session,
            f"run returned with turn {held.id} unsettled; settle it with complete or fail",
            TURN_CONTRACT_BROKEN,
        )
    return ExitCode.OK


async def _run(actor: Actor, session: Session) -> None:
    try:
        await actor.run(session)
    finally:
        # The held turn may still be failed: that settlement starts no next turn.
        session.ask_no_more()


async def _give_back(session: Session) -> None:
    """Releases the turn a settlement started that ``run`` never received."""
    try:
        await asyncio.wait_for(session.give_back(), FAIL_GRACE)
    except Exception:
        log.exception("could not give back the next turn")


async def _fail_held(session: Session, error: Exception | str, code: str) -> None:
    held = session._unsettled_turn()
    if held is None:
        return
    try:
        # fail drains the turn's started output first.
        await asyncio.wait_for(held.fail(error, code=code), FAIL_GRACE)
    except Exception:
        log.exception("could not fail turn %s", held.id)


def _exit_fenced() -> None:
    # Exit here, not by raising: the actor's code could catch an exception and go
    # on, and a fenced process must not write anything more.
    log.critical("exiting: this process is fenced")
    logging.shutdown()
    os._exit(ExitCode.FENCED)
