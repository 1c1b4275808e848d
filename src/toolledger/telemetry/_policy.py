"""Content capture policy, intent switch, redaction and value bounds for span attributes.

Rules of this module:

- Content (tool arguments and results, step inputs and outputs) goes on spans only when
  capture is on: ``capture_content=True``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
  set to a true value, ``SPAN_ONLY`` or ``SPAN_AND_EVENT``. An invalid value logs a warning
  (once per value) and falls back to no content.
- Intent text (goal, justification, approval reason) is on by default; ``capture_intent=False``
  drops it.
- Content and intent strings are truncated to ``CONTENT_MAX_CHARS`` characters.
- ``redact(attributes) -> attributes`` runs last, before anything is set on a span. A redact
  hook that raises or returns something other than a mapping drops the whole batch (fail
  closed) rather than leaking it.
- ``None`` values are dropped; values that are not OTel attribute types become strings.
- Process-wide defaults set by ``toolledger.configure()`` live in ``DEFAULTS``.
"""

from __future__ import annotations

import enum
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .attributes import CONTENT_ATTRIBUTES, INTENT_ATTRIBUTES

__all__ = [
    "CAPTURE_ENV",
    "CONTENT_MAX_CHARS",
    "DEFAULTS",
    "OPENINFERENCE_ENV",
    "AttributeValue",
    "Defaults",
    "Policy",
    "Redactor",
    "content_from_env",
    "resolve_policy",
    "to_json_text",
]

logger = logging.getLogger("toolledger.telemetry")

#: The GenAI instrumentation switch for message/tool content.
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: ``false`` leaves the OpenInference keys (``openinference.span.kind``, ``input.value`` …) out.
OPENINFERENCE_ENV = "TOOLLEDGER_OPENINFERENCE"
#: Content and intent strings longer than this many characters are cut.
CONTENT_MAX_CHARS = 8192
_TRUNCATED = "…[truncated]"

_ON = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_OFF = frozenset({"", "false", "0", "no", "off", "no_content", "event_only"})
_warned: set[str] = set()
_FREE_TEXT = CONTENT_ATTRIBUTES | INTENT_ATTRIBUTES
_PLAIN = frozenset({str, int, bool, float})

AttributeValue = Any
Redactor = Callable[[dict[str, AttributeValue]], Mapping[str, AttributeValue]]


def content_from_env() -> bool:
    """Return whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` turns content on.

    ``true``/``SPAN_ONLY``/``SPAN_AND_EVENT`` (any case) mean on; unset, ``false``,
    ``NO_CONTENT`` and ``EVENT_ONLY`` (toolledger emits no log events) mean off; anything else
    logs a warning and means off.
    """
    raw = os.environ.get(CAPTURE_ENV)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value not in _OFF and raw not in _warned:
        _warned.add(raw)
        logger.warning(
            "%s=%r is not valid (use true, false, SPAN_ONLY, SPAN_AND_EVENT or NO_CONTENT); "
            "content capture stays off",
            CAPTURE_ENV,
            raw,
        )
    return False


@dataclass(slots=True, kw_only=True)
class Defaults:
    """Process-wide defaults set by ``toolledger.configure()`` (``None``: not set)."""

    tracer_provider: Any = None
    meter_provider: Any = None
    logger_provider: Any = None
    capture_content: bool | None = None
    capture_intent: bool = True
    redact: Redactor | None = None
    openinference: bool | None = None

    def reset(self) -> None:
        """Forget everything ``configure()`` set."""
        self.tracer_provider = None
        self.meter_provider = None
        self.logger_provider = None
        self.capture_content = None
        self.capture_intent = True
        self.redact = None
        self.openinference = None


DEFAULTS = Defaults()


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What may go on a span, and the redaction applied before it does."""

    capture_content: bool = False
    capture_intent: bool = True
    redact: Redactor | None = None
    max_chars: int = CONTENT_MAX_CHARS
    #: Also set the OpenInference keys Phoenix/Langfuse display (``_openinference``).
    openinference: bool = True

    def apply(self, raw: Mapping[str, Any]) -> dict[str, AttributeValue]:
        """Return the attributes of ``raw`` that this policy allows, bounded and redacted.

        Never raises: a failing ``redact`` hook yields ``{}`` (fail closed).
        """
        out: dict[str, AttributeValue] = {}
        for key, value in raw.items():
            if value is None:
                continue
            if key not in _FREE_TEXT:
                # the hot path: plain values of structural attributes (an Enum is not one)
                out[key] = value if type(value) in _PLAIN else _coerce(value)
            elif key in CONTENT_ATTRIBUTES:
                if self.capture_content:
                    out[key] = self._cut(value if isinstance(value, str) else to_json_text(value))
            elif self.capture_intent:  # intent text
                if type(value) is str and len(value) <= self.max_chars:
                    out[key] = value
                else:
                    out[key] = self._cut(_coerce(value))
        if self.redact is None or not out:
            return out
        try:
            redacted = self.redact(dict(out))
            if not isinstance(redacted, Mapping):
                raise TypeError(f"redact returned {type(redacted).__name__}, not a mapping")
            return {str(k): _coerce(v) for k, v in redacted.items() if v is not None}
        except Exception as exc:  # fail closed: never set unredacted attributes
            logger.warning("telemetry redact hook failed (%r); attributes dropped", exc)
            return {}

    def _cut(self, value: AttributeValue) -> AttributeValue:
        if isinstance(value, str) and len(value) > self.max_chars:
            return value[: self.max_chars] + _TRUNCATED
        return value


def resolve_policy(
    *, capture_content: bool | None, capture_intent: bool | None, redact: Redactor | None
) -> Policy:
    """Merge per-run settings with ``configure()`` defaults and the environment.

    ``capture_content``: the run's value, else ``configure()``'s, else the env var.
    ``capture_intent``: off if the run or ``configure()`` turned it off (a run cannot turn
    back on what the process switched off). ``redact``: the run's, else ``configure()``'s.
    """
    content = capture_content
    if content is None:
        content = DEFAULTS.capture_content
    if content is None:
        content = content_from_env()
    intent = capture_intent is not False and DEFAULTS.capture_intent
    oi = DEFAULTS.openinference
    if oi is None:
        oi = os.environ.get(OPENINFERENCE_ENV, "").strip().lower() not in _OFF - {""}
    return Policy(
        capture_content=bool(content),
        capture_intent=intent,
        redact=redact if redact is not None else DEFAULTS.redact,
        openinference=bool(oi),
    )


_JSON_TEXT = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str
).encode


def to_json_text(value: Any) -> str:
    """Serialise ``value`` as compact JSON with sorted keys, as the store keeps it (so live
    and re-exported spans agree); non-JSON values become strings."""
    try:
        return _JSON_TEXT(value)
    except (TypeError, ValueError):
        return str(value)


def _coerce(value: Any) -> AttributeValue:
    """Return ``value`` as an OTel attribute value (str, bool, int, float or a sequence)."""
    if isinstance(value, (str, bool, int, float)):
        if isinstance(value, enum.Enum):
            return value.value
        return value
    if isinstance(value, enum.Enum):
        return _coerce(value.value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return to_json_text(value)
