"""A framework's tool span that an adapter hands over: current, and known as the call's.

Rules this module keeps:

- Some instrumentations start a span for one tool call without making it current, and
  give it its kind only when it ends (openinference-instrumentation-langchain is a
  LangChain callback handler: its ``TOOL`` span is neither current nor a ``TOOL`` yet
  while the tool runs). The adapter that found such a span runs the guarded call inside
  :func:`framework_tool_span`: the span is current, and toolledger's span for the call
  starts under it as ``guard_tool``, as under a span that says it is a tool span.
- The mark is per context (a ``ContextVar``): parallel calls in other threads or tasks
  each see their own host.
- Never raises: a failure costs the nesting (reported), never the tool call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from ._report import report

__all__ = ["framework_tool_span", "is_framework_tool_span"]

#: The span id an adapter handed over in this context (0: none).
_HANDED: ContextVar[int] = ContextVar("toolledger_framework_tool_span", default=0)


@contextlib.contextmanager
def framework_tool_span(span: object) -> Iterator[None]:
    """Make ``span`` (a framework's span for the tool call about to be guarded) current,
    and known as that call's tool span; ``None`` changes nothing."""
    token = handed = None
    try:
        if isinstance(span, trace.Span) and span.get_span_context().is_valid:
            token = otel_context.attach(trace.set_span_in_context(span))
            handed = _HANDED.set(span.get_span_context().span_id)
    except Exception as exc:
        report("framework span", exc)
    try:
        yield
    finally:
        try:
            if handed is not None:
                _HANDED.reset(handed)
            if token is not None:
                otel_context.detach(token)
        except Exception as exc:
            report("framework span", exc)


def is_framework_tool_span(span: trace.Span) -> bool:
    """Whether an adapter handed ``span`` over as the current call's tool span."""
    handed = _HANDED.get()
    return bool(handed) and span.get_span_context().span_id == handed
