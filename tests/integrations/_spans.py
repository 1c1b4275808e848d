"""Reading finished SDK spans in the adapters' nesting tests."""

from __future__ import annotations

from typing import Any


def only(spans: list[Any], scope: str, name: str) -> Any:
    """The one span named ``name`` from the instrumentation scope ``scope``."""
    found = [s for s in spans if s.instrumentation_scope.name == scope and s.name == name]
    assert len(found) == 1, [(s.instrumentation_scope.name, s.name) for s in spans]
    return found[0]


def ancestors(span: Any, spans: list[Any]) -> list[int]:
    """The span ids of ``span``'s ancestors among ``spans``, nearest first."""
    by_id = {s.context.span_id: s for s in spans}
    out: list[int] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        out.append(parent.span_id)
        parent = by_id[parent.span_id].parent
    return out
