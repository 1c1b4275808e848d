"""The journal's value rules are the checkpoint layer's: one set for records and results.

A tool result that is not exact JSON is stored by the same rules the journal records it
with (``checkpoint._encode``), so a replay compares equal values. Pure; no I/O.
"""

from __future__ import annotations

from ..checkpoint import encoded_json, exact_floats, to_json

__all__ = ["encoded_json", "exact_floats", "to_json"]
