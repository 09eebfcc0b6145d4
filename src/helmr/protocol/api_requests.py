"""The public REST API's requests (``/v1``): paths, queries, headers, bodies, and their limits.

One definition for both ends: ``helmr.server`` parses every request into
these models and ``helmr.client`` builds its requests from them (so a field
name or a limit cannot differ between the two). Requests forbid unknown
fields, so a misspelt (or camelCase) field is a 400, not a silently dropped
idempotency key. The replies are ``helmr.protocol.api``'s views and
``helmr.events``' pages; the route patterns are ``helmr.protocol.api_routes``'.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from helmr.constraints import NO_NUL
from helmr.protocol.contract import EPOCH_HEADER
from helmr.resources.fields import DnsLabel, DnsSubdomain, Key
from helmr.resources.session_env import (
    ENV_NAME_PATTERN,
    MAX_ENV,
    MAX_ENV_FROM,
    RESERVED_PREFIX,
    EnvName,
    EnvPrefix,
    EnvSource,
    EnvValue,
    SecretDataKey,
    SecretKeyRef,
    SecretRef,
    SessionEnv,
    SessionEnvFrom,
    SessionEnvVar,
)

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest event sequence (``after``) a JSON reader anywhere can hold exactly."""
MAX_PAGE = 1000
"""The most records one page of a timeline holds (``limit``)."""
DEFAULT_PAGE = 100
MAX_WAIT = 300.0
"""Seconds one long poll may last; longer holds are cut by proxies and load
balancers anyway, so a client waits longer in several requests."""
DEFAULT_WAIT = 30.0


def _digits(value: Any) -> Any:
    # Query strings only: pydantic alone would read "1_000", "+5" or " 5".
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a nonnegative decimal integer")
    return value


# Field before the validator, or pydantic cannot express the bounds in JSON Schema.
Cursor = Annotated[
    int,
    Field(ge=0, le=MAX_SAFE_INTEGER, description="An event sequence: a nonnegative safe integer."),
    BeforeValidator(_digits),
]
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE), BeforeValidator(_digits)]
Id = Annotated[str, Field(min_length=1, max_length=128, pattern=NO_NUL)]
# Names that become Kubernetes object names (namespace, actor, workspace) are a
# DnsLabel, an application's own keys (idempotency, session) a Key: the rules the
# CRDs enforce too.


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoBody(_Input):
    """An empty JSON object (or no body at all)."""


# Paths


class ActorPath(_Input):
    namespace: DnsLabel
    actor: DnsLabel


class WorkspacePath(_Input):
    namespace: DnsLabel
    workspace: DnsLabel


class SessionPath(_Input):
    session_id: Id


class TurnPath(SessionPath):
    turn_id: Id


# Queries and headers


class WaitQuery(_Input):
    timeout: float = Field(
        default=DEFAULT_WAIT,
        ge=0,
        le=MAX_WAIT,
        allow_inf_nan=False,
        description="Seconds to wait for a terminal status; then the current view with "
        "timeout=true (the turn goes on).",
    )


class EventsQuery(_Input):
    after: Cursor = 0
    limit: PageLimit = Field(
        default=DEFAULT_PAGE, description=f"Records per page, 1 to {MAX_PAGE}."
    )


class StreamQuery(_Input):
    after: Cursor = 0


class StreamHeaders(BaseModel):
    # Headers: anything else a client or proxy sends is not ours to refuse.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    last_event_id: Cursor | None = Field(
        default=None,
        alias="Last-Event-ID",
        description="The last sequence received; wins over `after` (an EventSource reconnect).",
    )


class RunnerHeaders(BaseModel):
    """The runner-specific request header, for the server to parse by alias (here, not
    in ``contract``: the runner only sends it, and starts without pydantic)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    process_epoch: int = Field(alias=EPOCH_HEADER, ge=0)


# Bodies


def _not_reserved(name: str) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(f"must not start with {RESERVED_PREFIX}: Helmr sets those variables")
    return name


# What the Sessions' CRD checks with CEL, in JSON Schema (the fuzzer reads it) and pydantic.
_NOT_RESERVED: dict[str, Any] = {"not": {"pattern": f"^{RESERVED_PREFIX}"}}
ENV_NAME_SCHEMA: dict[str, Any] = {
    "minLength": 1,
    "maxLength": 256,
    "pattern": ENV_NAME_PATTERN,
    **_NOT_RESERVED,
}
EnvVarName = Annotated[
    EnvName, Field(json_schema_extra=_NOT_RESERVED), AfterValidator(_not_reserved)
]
Prefix = Annotated[EnvPrefix, Field(json_schema_extra=_NOT_RESERVED), AfterValidator(_not_reserved)]


class SecretKey(_Input):
    """A variable's value: ``key`` of the Secret ``secret`` in the session's namespace."""

    secret: DnsSubdomain = Field(description="A Secret in the session's namespace.")
    key: SecretDataKey


class SecretSource(_Input):
    """Every key of the Secret ``secret`` (in the session's namespace) as a variable."""

    secret: DnsSubdomain = Field(description="A Secret in the session's namespace.")
    prefix: Prefix | None = Field(default=None, description="Put before each key's name.")


class _SessionSettings(_Input):
    """A new session's own environment: a start's, or a fork's (which, naming none,
    inherits its source's)."""

    env: dict[EnvVarName, EnvValue | SecretKey] | None = Field(
        default=None,
        max_length=MAX_ENV,
        description=(
            "Environment variables of the session's actor, by name: a value, or a key of a"
            " Secret in the session's namespace (`{secret, key}`); kept in the Session's"
            " object (`spec.env`) only."
        ),
        json_schema_extra={"propertyNames": ENV_NAME_SCHEMA},
    )
    env_from: list[SecretSource] | None = Field(
        default=None,
        max_length=MAX_ENV_FROM,
        description=(
            "Secrets in the session's namespace whose every key becomes a variable, after"
            " `prefix` (the Session's `spec.envFrom`)."
        ),
    )

    def session_env(self) -> SessionEnv:
        """The settings as the Session's ``spec.env`` and ``spec.envFrom`` name them."""
        return SessionEnv(
            env=tuple(_variable(name, value) for name, value in (self.env or {}).items()),
            env_from=tuple(
                SessionEnvFrom(secret_ref=SecretRef(name=source.secret), prefix=source.prefix)
                for source in self.env_from or ()
            ),
        )


class StartBody(_SessionSettings):
    workspace: DnsLabel = Field(description="The Workspace the session holds while open.")
    key: Key | None = Field(default=None, description="Application-defined key, kept verbatim.")
    idempotency_key: Key | None = Field(
        default=None, description="A repeated start with this key returns the same session."
    )


def _variable(name: str, value: str | SecretKey) -> SessionEnvVar:
    if isinstance(value, SecretKey):
        ref = SecretKeyRef(name=value.secret, key=value.key)
        return SessionEnvVar(name=name, value_from=EnvSource(secret_key_ref=ref))
    return SessionEnvVar(name=name, value=value)


class ForkBody(_SessionSettings):
    """A fork naming neither ``env`` nor ``env_from`` runs with its source's (the
    source Session's ``spec.env`` and ``spec.envFrom``); naming either, with its own."""

    at_turn: Id = Field(
        description="The completed Turn whose saved state the fork starts from (its id)."
    )
    workspace: DnsLabel | None = Field(
        default=None, description="The new Workspace the fork holds (unset: fork-<ulid>)."
    )
    idempotency_key: Key | None = Field(
        default=None, description="A repeated fork with this key returns the same session."
    )


class EnqueueBody(_Input):
    input: JsonValue = Field(description="Application-defined JSON; null is a valid input.")
    idempotency_key: Key | None = Field(
        default=None, description="A repeated enqueue with this key returns the same turn."
    )


class SendBody(_Input):
    data: JsonValue = Field(description="Application-defined JSON message data.")


class ResumeBody(_Input):
    hold_id: Id


class CancelBody(_Input):
    idempotency_key: Key | None = None
