"""Whether the actor's files changed: their names, sizes and modification times,
compared at each look (polling: nothing to install, and an actor is a few files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

IGNORED_PARTS = frozenset({"__pycache__", ".git", ".helmr", ".pytest_cache", ".mypy_cache"})


class FileWatch:
    def __init__(self, path: Path, *, ignored: Sequence[Path] = ()) -> None:
        """``path``: a file or a directory (every file under it but ``ignored`` ones)."""
        self.path = path
        self.ignored = tuple(p.resolve() for p in ignored)
        self._seen = self._look()

    def changed(self) -> bool:
        """Whether anything changed since the last look."""
        now = self._look()
        changed, self._seen = now != self._seen, now
        return changed

    def _look(self) -> dict[Path, tuple[int, int]]:
        files = self.path.rglob("*") if self.path.is_dir() else [self.path]
        seen: dict[Path, tuple[int, int]] = {}
        for file in files:
            if IGNORED_PARTS.intersection(file.parts) or file.suffix == ".pyc":
                continue
            if any(file.is_relative_to(ignored) for ignored in self.ignored):
                continue
            try:
                stat = file.stat()
            except OSError:
                continue  # removed meanwhile: its absence is the change
            seen[file] = (stat.st_size, stat.st_mtime_ns)
        return seen
