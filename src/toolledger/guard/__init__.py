"""Guarded tool calls: the approval gate, the checkpoint decision, the claim, the effect,
the completion and the delivery, for sync, async and batched calls.

``run.call``/``run.acall``/``run.call_many``/``run.deliver``/``run.adeliver`` delegate here.
This module only re-exports. The flow (``_flow``) decides over a frozen call (``_call``)
and yields its reads and writes; the drivers (``_drivers``, ``_batch``) perform them.
"""

from __future__ import annotations

from ._batch import call_many
from ._deliver import adeliver, deliver, deliver_many
from ._drivers import acall, call, current_call

__all__ = ["acall", "adeliver", "call", "call_many", "current_call", "deliver", "deliver_many"]
