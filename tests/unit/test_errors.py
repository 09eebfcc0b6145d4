"""The error tree: every error a server sends is rebuilt by its code on the client side."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from helmr import errors
from helmr.errors import ErrorBody, HelmrError, from_json


def _tree(cls: type[HelmrError]) -> list[type[HelmrError]]:
    return [cls, *(c for sub in cls.__subclasses__() for c in _tree(sub))]


ALL = _tree(HelmrError)


def test_every_code_names_one_class() -> None:
    codes = [cls.code for cls in ALL]
    assert len(codes) == len(set(codes))
    assert {"not_ready", "unavailable"} <= set(codes)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.code)
def test_an_error_body_is_rebuilt_as_the_class_that_sent_it(cls: type[HelmrError]) -> None:
    sent = cls("what to do", field="limit")
    body = sent.to_json()
    TypeAdapter(ErrorBody).validate_python(body)  # the documented shape of every error response

    received = from_json(sent.status, body)

    assert type(received) is cls
    assert (received.message, received.details) == ("what to do", {"field": "limit"})


def test_not_ready_is_unavailable_so_a_client_retries_both_alike() -> None:
    assert issubclass(errors.NotReady, errors.Unavailable)
    assert errors.NotReady.status == errors.Unavailable.status == 503
