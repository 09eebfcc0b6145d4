"""The status last written to each object, remembered so that a status that
changed nothing is not patched again. After a restart, the status each Session
resource has (kopf lists them) counts as written: a restarted control plane does
not patch every Session again, nor read each one back for its conditions.

Kept as the status patch's JSON text, not as the model: one is remembered per
open Session and per Workspace for as long as the control plane runs, and the
text is several times smaller than the model with its conditions
(``benchmarks/bench_operator_memory.py``; docs/sizing.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from helmr.resources.base import Status

Key = TypeVar("Key", bound=Hashable)
StatusT = TypeVar("StatusT", bound=Status)


def _wire_json(status: Status) -> str:
    # Without its nulls: a merge patch's null removes a field, so the server keeps
    # none, and a status read back from it (``seen``) has none. Equal text, then,
    # means the patch would change nothing.
    return status.model_dump_json(by_alias=True, exclude_none=True)


class WrittenStatuses(Generic[Key, StatusT]):
    def __init__(self, kind: type[StatusT]) -> None:
        self._kind = kind
        self._written: dict[Key, str] = {}

    async def write(
        self,
        key: Key,
        status: StatusT,
        patch: Callable[[StatusT], Awaitable[bool]],
        *,
        again: bool = False,
    ) -> None:
        """``patch(status)``, unless it is the status last written for ``key`` (and
        not written ``again``: another process may have written since); it is
        remembered once ``patch`` says it landed."""
        text = _wire_json(status)
        if self._written.get(key) == text and not again:
            return
        if await patch(status):
            self._written[key] = text

    def seen(self, key: Key, status: StatusT) -> None:
        """The status the object has on the server, as read (kopf's listing after a
        restart): remembered unless this process has written one since it started,
        which is newer than any status it reads."""
        self._written.setdefault(key, _wire_json(status))

    def forget(self, key: Key) -> None:
        """The object is gone: nothing is remembered for it."""
        self._written.pop(key, None)

    def last(self, key: Key) -> StatusT | None:
        """The status last written for ``key`` by this process, if any."""
        text = self._written.get(key)
        return None if text is None else self._kind.model_validate_json(text)
