"""``@toolledger.traced``: a function call as a step of the run active in the context."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from ._run import current_run
from ._step import Step

__all__ = ["traced"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def traced(name: F) -> F: ...


@overload
def traced(name: str | None = None, justification: str | None = None) -> Callable[[F], F]: ...


def traced(name: Callable[..., Any] | str | None = None, justification: str | None = None) -> Any:
    """Decorate a function so each call is a step of the run active in the context.

    ``@toolledger.traced`` or ``@toolledger.traced(name=None, justification=None)``. The
    call's arguments are the step's inputs and its return value the output ``result``.
    Outside a run the function is called unrecorded. Works on sync and async functions.
    """
    if callable(name):
        return traced()(name)

    def decorate(fn: F) -> F:
        step_name = name or fn.__qualname__
        signature = _signature(fn)

        def inputs_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            if signature is None:
                return {"args": list(args), "kwargs": kwargs}
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return {"args": list(args), "kwargs": kwargs}
            # ``self``/``cls`` of a method are the receiver, not an input.
            return {k: v for k, v in bound.arguments.items() if k not in ("self", "cls")}

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                active = current_run()
                if active is None or active.status != "running":
                    return await fn(*args, **kwargs)
                step = Step(active.events, _spec(step_name, justification, inputs_of(args, kwargs)))
                async with step:
                    result = await fn(*args, **kwargs)
                    step.record_output(result=result)
                    return result

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            active = current_run()
            if active is None or active.status != "running":
                return fn(*args, **kwargs)
            with Step(
                active.events, _spec(step_name, justification, inputs_of(args, kwargs))
            ) as step:
                result = fn(*args, **kwargs)
                step.record_output(result=result)
                return result

        return cast(F, wrapper)

    return decorate


def _spec(name: str, justification: str | None, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "justification": justification,
        "justification_source": "developer",
        "inputs": inputs,
    }


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None
