"""Control's transaction methods (helmr.control.transaction): made once per Control."""

from __future__ import annotations

from pathlib import Path

from helmr.control import turns
from helmr.control.control import Control
from tests.compose import open_plane


async def test_a_transaction_method_is_made_once_per_control(tmp_path: Path) -> None:
    async with open_plane(tmp_path / "helmr.db") as plane:
        control = plane.control
        # A closure and functools.wraps on every call cost a no-op Turn two of each.
        assert control.complete is control.complete
        assert control.complete.__doc__ == turns.complete.__doc__
        assert control.complete.__name__ == "complete"
        other = Control(plane.store)
        assert other.complete is not control.complete
        session = await control.open_session(namespace="team", name="s", actor="a", workspace="w")
        turn = await control.enqueue(session.id, "noop")
        assert (turn.session_id, turn.status) == (session.id, "queued")
        assert (await other.get_session(session.id)).queued_turns == 1
