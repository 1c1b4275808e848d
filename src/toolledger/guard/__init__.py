"""Guarded tool calls: the approval gate, the checkpoint decision, the claim, the effect,
the completion and the delivery, for sync, async and batched calls.

``run.call``/``run.acall``/``run.call_many``/``run.deliver``/``run.adeliver`` delegate here.
This module only re-exports. The flow (``_flow``) decides over a frozen call (``_call``)
and yields its reads and writes; the drivers (``_drivers``, ``_batch``) perform them.
Names imported ``as`` themselves and left out of ``__all__`` are for toolledger's other
packages, not for users.
"""

from __future__ import annotations

from ._batch import call_many
from ._deliver import Delivery as Delivery
from ._deliver import adeliver, deliver, deliver_many
from ._deliver import apost_once as apost_once
from ._drivers import acall, call, current_call
from ._replay import ReplayReport
from ._run import Run, UndeliveredWarning, run
from ._seams import CRASH_POINTS as CRASH_POINTS
from ._seams import crash_at as crash_at

__all__ = [
    "ReplayReport",
    "Run",
    "UndeliveredWarning",
    "acall",
    "adeliver",
    "call",
    "call_many",
    "current_call",
    "deliver",
    "deliver_many",
    "run",
]
