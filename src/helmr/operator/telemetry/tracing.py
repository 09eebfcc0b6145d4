"""Whether Turns are traced: by OTLP when an endpoint is set, else not at all.

OpenTelemetry (``helmr.operator.telemetry.otel``) is imported only here and
only then, so the control plane without tracing never loads the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from helmr.operator.telemetry.turn_traces import TurnTraces

log = logging.getLogger(__name__)

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
"""Either one set turns tracing on (the SDK reads them, and the other OTEL_* variables)."""


def from_environ(environ: Mapping[str, str]) -> TurnTraces | None:
    """Turn traces exported by OTLP when an endpoint is set, else None. Only then is
    OpenTelemetry imported; without the ``tracing`` extra, tracing stays off (logged)."""
    if not any(environ.get(name) for name in ENDPOINTS):
        return None
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    try:
        from helmr.operator.telemetry.otel import otlp_traces
    except ImportError as e:
        log.error("OTEL_EXPORTER_OTLP_ENDPOINT is set but %s: install helmr[tracing]", e)
        return None
    return otlp_traces()
