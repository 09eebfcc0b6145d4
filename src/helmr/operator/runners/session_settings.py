"""A Session's settings (``spec.env``, ``spec.envFrom``) as the values a pooled runner
gets at adoption, resolved as the kubelet resolves them in a cold runner's pod spec:
``envFrom`` first (each Secret's keys, with its prefix), then ``env`` (a later name
wins). Secret values are read here, in the Session's namespace, and returned only."""

from __future__ import annotations

import base64

from helmr.kube.client import Kube
from helmr.resources.session_env import SessionEnv


class SettingsUnavailable(Exception):
    """A Secret (or key) the Session names is missing: its runner cannot start."""


async def settings_values(kube: Kube, namespace: str, env: SessionEnv) -> dict[str, str]:
    values: dict[str, str] = {}
    for source in env.env_from:
        data = await kube.get_secret_data(namespace, source.secret_ref.name)
        if data is None:
            raise SettingsUnavailable(f"Secret {source.secret_ref.name} not found")
        prefix = source.prefix or ""
        values |= {prefix + key: _decoded(value) for key, value in data.items()}
    for var in env.env:
        if var.value_from is None:
            values[var.name] = var.value or ""
            continue
        ref = var.value_from.secret_key_ref
        data = await kube.get_secret_data(namespace, ref.name)
        if data is None or ref.key not in data:
            raise SettingsUnavailable(f"Secret {ref.name} has no key {ref.key}")
        values[var.name] = _decoded(data[ref.key])
    return values


def _decoded(value: str) -> str:
    return base64.b64decode(value).decode()
