"""Order merged events as a tree (pre-order with depths), iteratively: no recursion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["tree_order"]


def tree_order(events: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Return ``(index, depth)`` pairs in pre-order; children keep recorded order.

    An event whose parent is unknown (or would form a cycle) is shown at the top level.
    """
    index_of = {ev.get("event_id"): i for i, ev in enumerate(events)}
    children: list[list[int]] = [[] for _ in events]
    roots: list[int] = []
    for i, ev in enumerate(events):
        parent = index_of.get(ev.get("parent_id"))
        if parent is None or parent == i:
            roots.append(i)
        else:
            children[parent].append(i)
    out: list[tuple[int, int]] = []
    seen = [False] * len(events)
    stack = [(i, 0) for i in reversed(roots)]
    while stack:
        i, depth = stack.pop()
        if seen[i]:
            continue
        seen[i] = True
        out.append((i, depth))
        stack.extend((c, depth + 1) for c in reversed(children[i]))
    # Events stuck in a parent cycle are unreachable from the roots: show them anyway.
    out.extend((i, 0) for i in range(len(events)) if not seen[i])
    return out
