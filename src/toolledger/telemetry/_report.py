"""How a swallowed telemetry failure is logged (once as a warning per kind, then debug).

Rules of this module: no OpenTelemetry import; ``report`` never raises.
"""

from __future__ import annotations

import logging

__all__ = ["logger", "report"]

logger = logging.getLogger("toolledger.telemetry")
_reported: set[str] = set()


def report(what: str, exc: BaseException) -> None:
    """Log a swallowed telemetry failure (a warning the first time per kind, then debug)."""
    key = f"{what}:{type(exc).__qualname__}"
    level = logging.DEBUG if key in _reported else logging.WARNING
    _reported.add(key)
    logger.log(level, "telemetry %s failed; span data dropped: %r", what, exc)
