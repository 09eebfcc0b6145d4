"""Control methods that run one transaction function: the function is the one definition.

``Control.enqueue = writes(turns.enqueue)`` makes ``control.enqueue(...)`` an
async method with ``turns.enqueue``'s parameters (less the transaction) and
docs, run on the store's writer. mypy checks its callers against the
function's signature (``ParamSpec``), so nothing is restated.

A Control may be fenced (the control plane's leader's: see
:mod:`helmr.store.leadership`): its fence runs first in each of its write
transactions, and a fence that raises refuses the write whole.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

from helmr.control.config import ControlConfig
from helmr.store import ReadTx, Store, Tx

P = ParamSpec("P")
R = TypeVar("R")


class Host(Protocol):
    """What a bound method runs on: ``Control``."""

    _store: Store
    _config: ControlConfig
    _fence: Fence | None


Fence = Callable[[Tx], None]
"""Checked at the start of every write transaction; raises to refuse it."""


def _fenced(host: Host, fn: Callable[[Tx], R]) -> Callable[[Tx], R]:
    fence = host._fence
    if fence is None:
        return fn

    def run(tx: Tx) -> R:
        fence(tx)
        return fn(tx)

    return run


class _Bound(Generic[P, R]):
    def __init__(self, fn: Callable[..., R]) -> None:
        self._fn = fn
        self._name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def _run(self, host: Host, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[R]:
        raise NotImplementedError

    @overload
    def __get__(self, host: None, owner: type) -> Self: ...
    @overload
    def __get__(self, host: Host, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, host: Host | None, owner: type) -> Self | Callable[P, Awaitable[R]]:
        if host is None:
            return self

        async def method(*args: P.args, **kwargs: P.kwargs) -> R:
            return await self._run(host, args, kwargs)

        bound = functools.wraps(self._fn)(method)
        # Kept on the host, which Python looks in before this (non-data) descriptor:
        # the method is made once per host, not on every call (two a no-op Turn over
        # the API, each a closure and functools.wraps).
        vars(host)[self._name] = bound
        return bound


class reads(_Bound[P, R]):
    """A method running ``fn(rt, ...)`` on a read snapshot."""

    def __init__(self, fn: Callable[Concatenate[ReadTx, P], R]) -> None:
        super().__init__(fn)

    def _run(self, host: Host, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[R]:
        return host._store.read(lambda rt: self._fn(rt, *args, **kwargs))


class writes(_Bound[P, R]):
    """A method running ``fn(tx, ...)`` as one write transaction."""

    def __init__(self, fn: Callable[Concatenate[Tx, P], R]) -> None:
        super().__init__(fn)

    def _run(self, host: Host, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[R]:
        return host._store.write(_fenced(host, lambda tx: self._fn(tx, *args, **kwargs)))


class writes_configured(_Bound[P, R]):
    """A method running ``fn(tx, config, ...)``: a write that applies ``ControlConfig``."""

    def __init__(self, fn: Callable[Concatenate[Tx, ControlConfig, P], R]) -> None:
        super().__init__(fn)

    def _run(self, host: Host, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[R]:
        return host._store.write(
            _fenced(host, lambda tx: self._fn(tx, host._config, *args, **kwargs))
        )
