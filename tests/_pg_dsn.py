"""The PostgreSQL rule every test folder shares: ``from .._pg_dsn import pg_dsn_or_skip``.

A module of its own, not a conftest fixture, because test modules call it at import or
collection time (module-level skips, parametrized stores) as well as inside tests.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["pg_dsn_or_skip"]


def pg_dsn_or_skip() -> str:
    """Return ``TOOLLEDGER_PG_DSN``; skip without it, unless CI demands PostgreSQL."""
    dsn = os.environ.get("TOOLLEDGER_PG_DSN")
    if not dsn:
        if os.environ.get("TOOLLEDGER_REQUIRE_PG"):
            pytest.fail("TOOLLEDGER_REQUIRE_PG is set but TOOLLEDGER_PG_DSN is not")
        pytest.skip("set TOOLLEDGER_PG_DSN to run PostgreSQL tests")
    return dsn
