"""What Helmr does not do, as docs/semantics.md "Out of scope" says (issue 9, item 9)."""

from __future__ import annotations

import pytest

from helmr.errors import InvalidInput
from helmr.events import EventKind
from tests.unit.control.harness import Harness

ASK_KINDS = [EventKind.ASK_CREATED, EventKind.ASK_ANSWERED, EventKind.ASK_CANCELLED]


@pytest.mark.parametrize("kind", ASK_KINDS, ids=str)
async def test_no_ask_events_can_be_recorded(h: Harness, kind: EventKind) -> None:
    """001: "Helmr does not supply an `onTurn` shortcut, an agent adapter requirement, or
    a dedicated ask/approval primitive": nothing records ``ask.*``, and neither can a
    report from outside the state machine."""
    session = await h.session()
    with pytest.raises(InvalidInput):
        await h.control.record_event(session.id, kind, {}, subject="question-1")
    assert await h.kinds(session.id) == []
