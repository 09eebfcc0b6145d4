"""The scale benchmark's seeded history (``benchmarks/_history.py``): into PostgreSQL it
is written on a scratch SQLite copy and copied back, which must leave exactly the
rows that writing it through the PostgreSQL store leaves."""

from __future__ import annotations

import sys
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _history  # a benchmark's module: benchmarks/ is not a package

from helmr.store import disks, mirror_cursors
from tests import postgres
from tests.compose import open_plane

TURNS = 7


async def open_sessions(url: str, n: int, save_interval: timedelta | None = None) -> dict[str, int]:
    """``n`` Sessions with their processes started; with ``save_interval``, each one's
    Workspace saved at most once per it (its saves cut at Turns' ends)."""
    async with open_plane(url) as plane:
        epochs: dict[str, int] = {}
        for i in range(n):
            view = await plane.control.open_session(
                namespace="bench", name=f"s{i}", actor="noop", workspace=f"ws{i}"
            )
            if save_interval is not None:
                policy = partial(
                    disks.set_policy,
                    namespace="bench",
                    workspace=f"ws{i}",
                    aligned=True,
                    interval=save_interval,
                )
                await plane.store.write(policy)
            epochs[view.id] = await plane.control.process_started(view.id)
        return epochs


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, sorted."""
    with psycopg.connect(url) as pg:
        return {
            table: sorted(
                pg.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall(), key=repr
            )
            for table, columns in _history._tables(pg).items()
        }


async def test_the_round_trip_through_sqlite_keeps_every_row(
    postgres_server: postgres.PostgresServer, tmp_path: Path
) -> None:
    with postgres_server.database() as url:
        epochs = await open_sessions(url, 3)
        async with open_plane(url) as plane:  # written through PostgreSQL itself
            await _history._seed(plane, epochs, TURNS)
        before = dump(url)
        scratch = str(tmp_path / "scratch.db")
        async with open_plane(scratch):
            pass
        _history._to_sqlite(url, scratch)
        _history._to_postgres(scratch, url)
        assert dump(url) == before
        assert len(before["turns"]) == TURNS


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_seeded_turns_are_completed_and_mirrored(
    kind: str, postgres_server: postgres.PostgresServer, tmp_path: Path
) -> None:
    with postgres_server.database() as url:
        store = url if kind == "postgresql" else str(tmp_path / "helmr.db")
        epochs = await open_sessions(store, 3)
        await _history.seed_history(store, epochs, TURNS)
        async with open_plane(store) as plane:
            completed = {}
            for session_id in epochs:
                page = await plane.control.list_events(session_id, 0, 1000)
                completed[session_id] = sum(e.kind == "turn.completed" for e in page.records)
                assert not page.has_more
            unmirrored = await plane.store.read(mirror_cursors.behind)
    assert sorted(completed.values()) == [2, 2, 3]
    assert unmirrored == []


async def test_seeded_turns_over_workspaces_saved_once_a_day_wait_for_no_save(
    tmp_path: Path,
) -> None:
    """The kwok benchmark's Workspaces (saved at most once a day): the history starts as
    if each disk had just been saved, so no Turn's end asks for a save, which a next
    Turn would wait to be cut, and nothing cuts while the history is written."""
    store = str(tmp_path / "helmr.db")
    epochs = await open_sessions(store, 2, save_interval=timedelta(days=1))
    await _history.seed_history(store, epochs, 6)
    async with open_plane(store) as plane:
        for session_id in epochs:
            page = await plane.control.list_events(session_id, 0, 1000)
            assert sum(e.kind == "turn.completed" for e in page.records) == 3
