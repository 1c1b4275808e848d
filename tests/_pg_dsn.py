"""The PostgreSQL rule every test folder shares, importable by name (``from _pg_dsn import``).

It lives in its own module rather than only in ``tests/conftest.py`` because several test
folders have a ``conftest.py`` of their own without ``__init__.py``, so the module name
``conftest`` does not reliably mean the root one.
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
