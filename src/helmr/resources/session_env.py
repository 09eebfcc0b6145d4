"""Per-session settings: the environment values and Secret keys a Session gives its actor.

The shapes are Kubernetes' own (a container's ``env`` with ``value`` or
``valueFrom.secretKeyRef``, and ``envFrom`` with ``secretRef``), restricted to what a
Session may name: literal values, and keys of Secrets in its own namespace. A runner
started for the Session gets them in its pod spec, Secret keys as ``secretKeyRef``
(the kubelet reads them; no value is ever written into a Helmr object, log or event).

The REST API's start names the same settings in a shape of its own
(``helmr.protocol.api_requests``), turned into a :class:`SessionEnv` for the Session's
object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import ConfigDict, Field

from helmr.resources.base import JsonDict, WireModel, cel, rules
from helmr.resources.fields import DnsSubdomain

RESERVED_PREFIX = "HELMR_"
"""Helmr sets the variables of this prefix itself: no setting may name one."""

ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
EnvName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        pattern=ENV_NAME_PATTERN,
        description="Variable name: letters, digits, `_`, `-` and `.`, not starting with a digit.",
    ),
]
EnvPrefix = Annotated[str, Field(min_length=1, max_length=64, pattern=ENV_NAME_PATTERN)]
EnvValue = Annotated[str, Field(max_length=32_768, description="Variable value.")]
SecretDataKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description="A key of the Secret's `data`.",
    ),
]

MAX_ENV = 64
MAX_ENV_FROM = 8


def not_reserved(field: str, what: str) -> JsonDict:
    """The CEL rule that keeps ``field`` (when set) out of Helmr's own variables."""
    return cel(
        f"!has(self.{field}) || !self.{field}.startsWith('{RESERVED_PREFIX}')",
        f"{what} must not start with {RESERVED_PREFIX}: Helmr sets those variables itself",
        field_path=f".{field}",
    )


class SecretKeyRef(WireModel):
    """One key of a Secret in the Session's namespace."""

    name: DnsSubdomain = Field(description="Name of the Secret, in the Session's namespace.")
    key: SecretDataKey


class EnvSource(WireModel):
    """Where a variable's value comes from."""

    secret_key_ref: SecretKeyRef = Field(description="A key of a Secret.")


class SessionEnvVar(WireModel):
    """One environment variable of the Session's actor: a value, or a Secret's key."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            not_reserved("name", "env[].name"),
            cel(
                "has(self.value) != has(self.valueFrom)",
                "env[]: give exactly one of value and valueFrom",
            ),
        )
    )

    name: EnvName
    value: EnvValue | None = None
    value_from: EnvSource | None = Field(
        default=None, description="A Secret's key whose value the variable takes."
    )


class SecretRef(WireModel):
    """A Secret in the Session's namespace."""

    name: DnsSubdomain = Field(description="Name of the Secret, in the Session's namespace.")


class SessionEnvFrom(WireModel):
    """Every key of a Secret as a variable (with ``prefix`` before its name)."""

    model_config = ConfigDict(json_schema_extra=rules(not_reserved("prefix", "envFrom[].prefix")))

    secret_ref: SecretRef = Field(description="The Secret whose keys become variables.")
    prefix: EnvPrefix | None = Field(default=None, description="Put before each key's name.")


@dataclass(frozen=True, slots=True)
class SessionEnv:
    """A Session's settings, as its ``spec.env`` and ``spec.envFrom`` (or a start's) name them."""

    env: tuple[SessionEnvVar, ...] = ()
    env_from: tuple[SessionEnvFrom, ...] = ()

    @classmethod
    def of(
        cls, env: Sequence[SessionEnvVar] | None, env_from: Sequence[SessionEnvFrom] | None
    ) -> SessionEnv:
        return cls(tuple(env or ()), tuple(env_from or ()))

    def __bool__(self) -> bool:
        return bool(self.env or self.env_from)

    @property
    def names_secrets(self) -> bool:
        """Whether a Secret's key or keys are among them (read at a pooled runner's adoption)."""
        return bool(self.env_from) or any(var.value_from is not None for var in self.env)


NO_ENV = SessionEnv()
"""A Session that names no settings."""
