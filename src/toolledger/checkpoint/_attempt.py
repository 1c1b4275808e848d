"""The attempt-id format: encoded by the guard, parsed by the guard and telemetry. Pure.

An attempt id is a call's execution fence. It may carry the ids of the live span that
claimed the call, so that a call resumed after a crash (and telemetry's re-export) can
link to it without an extra write: ``<32 hex>`` or ``<32 hex>.<trace 32 hex>.<span 16 hex>``
(a valid identifier either way). This module is the one place that knows the format.
"""

from __future__ import annotations

import os
import re

__all__ = ["new_attempt_id", "parse_link"]

# What ``_is_hex`` accepts at a length, in the form the guard and OpenTelemetry write (hex
# digits only): checked without a Python frame; anything else goes to ``_is_hex``.
_HEX_32 = re.compile("[0-9a-fA-F]{32}").fullmatch
_HEX_16 = re.compile("[0-9a-fA-F]{16}").fullmatch


def new_attempt_id(trace_id: str | None, span_id: str | None, base: str | None = None) -> str:
    """Return a fresh attempt id, carrying ``trace_id``/``span_id`` when both are valid.

    ``base``: its first part (32 hex digits: the guard puts who runs the attempt there,
    see ``guard._seams.attempt_base``); random when not given or not 32 hex digits.
    """
    if base is None or not (
        (type(base) is str and _HEX_32(base) is not None and base.strip("0"))
        or (len(base) == 32 and _is_hex(base, 32))
    ):
        base = os.urandom(16).hex()
    if trace_id is None or span_id is None:
        return base
    if (
        type(trace_id) is str
        and type(span_id) is str
        and _HEX_32(trace_id) is not None
        and _HEX_16(span_id) is not None
        and trace_id.strip("0")
        and span_id.strip("0")
    ) or (_is_hex(trace_id, 32) and _is_hex(span_id, 16)):
        return f"{base}.{trace_id}.{span_id}"
    return base


def parse_link(attempt_id: object) -> dict[str, str] | None:
    """Return ``{"trace_id", "span_id"}`` carried by an attempt id, or ``None``."""
    if not isinstance(attempt_id, str) or not attempt_id:
        return None
    parts = attempt_id.split(".")
    if len(parts) == 3 and _is_hex(parts[1], 32) and _is_hex(parts[2], 16):
        return {"trace_id": parts[1], "span_id": parts[2]}
    return None


def _is_hex(value: object, length: int) -> bool:
    if not isinstance(value, str) or len(value) != length:
        return False
    try:
        int(value, 16)
    except ValueError:
        return False
    return value.strip("0") != ""  # all-zero ids are invalid span context ids
