"""TokenReviews and SubjectAccessReviews: the apiserver says who holds a bearer
token, and whether they may do something in a namespace.

Each call is synchronous (the client's); callers run them on a lane of
:mod:`helmr.kube.threads`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where called: ``helmr dev`` imports this module and never calls it.
    from kubernetes import client as k8s


@dataclass(frozen=True, slots=True)
class Reviewed:
    """Who a token is, as the apiserver's TokenReview says."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Reviews:
    """The reviews of one apiserver; tokens reviewed for ``audiences`` (none: the
    apiserver's own)."""

    def __init__(self, api_client: k8s.ApiClient, audiences: Sequence[str] = ()) -> None:
        from kubernetes import client as k8s

        self._authn = k8s.AuthenticationV1Api(api_client)
        self._authz = k8s.AuthorizationV1Api(api_client)
        self._audiences = list(audiences) or None

    def token(self, token: str) -> Reviewed | None:
        """Who holds ``token``; None when the apiserver does not know it."""
        from kubernetes import client as k8s

        review = self._authn.create_token_review(
            k8s.V1TokenReview(
                api_version="authentication.k8s.io/v1",
                kind="TokenReview",
                spec=k8s.V1TokenReviewSpec(token=token, audiences=self._audiences),
            )
        )
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            return None
        info = status.user
        return Reviewed(
            name=info.username or "",
            uid=info.uid or "",
            groups=tuple(info.groups or ()),
            extra={k: tuple(v) for k, v in (info.extra or {}).items()},
        )

    def access(self, who: Reviewed, group: str, resource: str, namespace: str, verb: str) -> bool:
        """Whether ``who`` may ``verb`` the ``resource`` of API ``group`` in ``namespace``."""
        from kubernetes import client as k8s

        review = self._authz.create_subject_access_review(
            k8s.V1SubjectAccessReview(
                api_version="authorization.k8s.io/v1",
                kind="SubjectAccessReview",
                spec=k8s.V1SubjectAccessReviewSpec(
                    user=who.name,
                    uid=who.uid or None,
                    groups=list(who.groups),
                    extra={k: list(v) for k, v in who.extra.items()} or None,
                    resource_attributes=k8s.V1ResourceAttributes(
                        group=group, resource=resource, namespace=namespace, verb=verb
                    ),
                ),
            )
        )
        return bool(review.status is not None and review.status.allowed)
