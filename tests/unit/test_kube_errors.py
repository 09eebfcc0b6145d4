"""The Kubernetes client's errors come out of helmr.kube as Helmr's own, by status,
with what the apiserver's Status says."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from helmr.kube import errors, threads


def refusal(status: int, reason: str, **fields: object) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "status": "Failure", "code": status, **fields})
    return error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, errors.BadRequest),
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Gone),
        (422, errors.Invalid),
        (429, errors.TooManyRequests),
        (500, errors.ServerError),
        (504, errors.ServerError),
        (0, errors.ServerError),
        (418, errors.KubeError),
    ],
)
def test_each_status_is_its_own_error(status: int, kind: type[errors.KubeError]) -> None:
    error = errors.translated(ApiException(status=status, reason="why"))
    assert type(error) is kind
    assert error.status == status
    assert error.reason == "why"


def test_the_status_message_and_details_are_kept() -> None:
    error = errors.translated(
        refusal(
            403,
            "Forbidden",
            message="ValidatingAdmissionPolicy 'p' with binding 'b' denied request: held",
            details={"name": "w", "kind": "workspaces"},
        )
    )
    assert isinstance(error, errors.Forbidden)
    assert error.message == "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: held"
    assert error.details == {"name": "w", "kind": "workspaces"}
    assert str(error) == error.message


def test_a_body_that_is_no_status_keeps_the_reason() -> None:
    error = ApiException(status=422, reason="Unprocessable Entity")
    error.body = "spec.containers[0].resources: Invalid value"
    translated = errors.translated(error)
    assert isinstance(translated, errors.Invalid)
    assert translated.message == "Unprocessable Entity"
    assert translated.body == "spec.containers[0].resources: Invalid value"
    assert translated.details == {}


async def test_a_call_on_the_kubernetes_threads_raises_the_translated_error() -> None:
    def read() -> None:
        raise refusal(404, "Not Found", message='pods "p" not found')

    with pytest.raises(errors.NotFound, match='pods "p" not found') as raised:
        await threads.call(read)
    assert isinstance(raised.value.__cause__, ApiException)
