"""Guarded tool calls: the approval gate, the checkpoint decision, the claim, the effect,
the completion and the delivery, for sync, async and batched calls.

``run.call``/``run.acall``/``run.call_many``/``run.deliver``/``run.adeliver`` delegate here.
This module only re-exports; the flow lives in the private modules of this package.
"""

from __future__ import annotations

from ._drivers import acall, adeliver, call, call_many, deliver, deliver_many

__all__ = ["acall", "adeliver", "call", "call_many", "deliver", "deliver_many"]
