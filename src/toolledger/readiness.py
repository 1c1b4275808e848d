"""Tool readiness: diagnostics for tool definitions that models misuse or that are unsafe.

``check_tool(tool)`` looks at one tool definition and returns ``Diagnostic`` records with
stable codes. It reads, never calls: no I/O here, and the tool is not modified.

Rules this module keeps:

- Accepted shapes: a ``toolledger.Tool`` (``input_schema=``, ``effects=``), an Anthropic tool
  dict (``input_schema``), an OpenAI Chat Completions tool (``{"type": "function",
  "function": {...parameters}}``), an OpenAI Responses tool (``{"type": "function",
  "name", "parameters"}``) and an MCP tool (an ``mcp.types.Tool`` of mcp 1.x or 2.x, or a
  listing entry dict with ``inputSchema``). Provider-defined server tools (Anthropic
  ``web_search_…``, OpenAI ``web_search``, …) have no schema of ours: nothing to check.
- Codes are API (never renamed): ``name``, ``description`` (warning), ``closed_input``,
  ``argument_description`` (warning), ``unbounded_string``, ``unbounded_array``,
  ``no_recover`` (warning). Every other diagnostic is an ``error``.
- ``path`` names the offending place in the tool's own shape, dotted
  (``function.parameters.properties.to``), so it can be found in the source.
- Schemas are walked iteratively (no recursion limit); ``$ref`` targets are checked where
  they are defined (``$defs``), never followed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import InvalidArgumentError

__all__ = ["CODES", "Diagnostic", "EFFECTS", "check_tool", "tool_name"]

Severity = Literal["error", "warning"]

#: Every diagnostic code and its severity.
CODES: Mapping[str, Severity] = {
    "name": "error",
    "description": "warning",
    "closed_input": "error",
    "argument_description": "warning",
    "unbounded_string": "error",
    "unbounded_array": "error",
    "no_recover": "warning",
}

#: The values of ``toolledger.tool(effects=...)``.
EFFECTS = ("none", "idempotent", "side-effect")

#: Portable tool names: what Anthropic, OpenAI and MCP all accept.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MIN_WORDS = 3
_SCHEMA_CHILDREN = ("anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("$defs", "definitions")


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One finding of ``check_tool``.

    Attributes:
        code: Stable code (see ``CODES``).
        severity: ``"error"`` or ``"warning"``.
        path: Where, dotted, in the tool's own shape (``input_schema.properties.to``).
        message: What is wrong and what to do.
    """

    code: str
    severity: Severity
    path: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shape:
    """A tool definition reduced to what the checks need."""

    name: Any
    name_path: str
    description: Any
    description_path: str
    schema: Any
    schema_path: str
    effects: str | None  # None: not declared
    recover: bool
    explanation: str | None
    effects_path: str


def _diag(code: str, path: str, message: str) -> Diagnostic:
    return Diagnostic(code=code, severity=CODES[code], path=path, message=message)


def check_tool(tool: object) -> list[Diagnostic]:
    """Return the readiness diagnostics of one tool definition (empty: ready).

    Checks: a portable name (``^[A-Za-z0-9_-]{1,64}$``); a description of at least three
    words; an input schema that is a closed object (``additionalProperties: false``, at
    every object level); a description on every argument; a ``maxLength`` (or ``enum`` /
    ``const``) on every string and a ``maxItems`` on every array; and, for a tool that
    declares side effects, a ``recover`` hook or an explanation of why there is none
    (``effects={"kind": "side-effect", "explanation": "..."}``).

    Args:
        tool: A ``toolledger.Tool``, an Anthropic / OpenAI (chat or Responses) tool dict,
            or an MCP tool (object or listing entry).

    Returns:
        The diagnostics, in the order: name, description, effects, schema (depth first).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``tool`` is none of the accepted
            shapes, or a ``toolledger.Tool`` has an unknown ``effects`` value.
    """
    shape = _shape(tool)
    if shape is None:
        return []  # a provider-defined server tool: nothing of ours to check
    out: list[Diagnostic] = []
    name = shape.name
    if not isinstance(name, str) or not _NAME.match(name):
        out.append(
            _diag(
                "name",
                shape.name_path,
                f"tool name {name!r} is not portable: use 1-64 letters, digits, _ or - "
                "(what Anthropic, OpenAI and MCP all accept)",
            )
        )
    description = shape.description
    words = len(description.split()) if isinstance(description, str) else 0
    if words < _MIN_WORDS:
        out.append(
            _diag(
                "description",
                shape.description_path,
                "describe what the tool does and when to use it in at least "
                f"{_MIN_WORDS} words (found {words})",
            )
        )
    if shape.effects == "side-effect" and not shape.recover and not shape.explanation:
        out.append(
            _diag(
                "no_recover",
                shape.effects_path,
                "the tool declares side effects but has no recover hook: a lost outcome "
                "will be reported as unknown; add recover=, or explain why none is possible",
            )
        )
    out.extend(_check_schema(shape.schema, shape.schema_path))
    return out


def tool_name(tool: Any) -> str:
    """Return a tool's name for display (``"?"`` when it has none)."""
    try:
        shape = _shape(tool)
    except InvalidArgumentError:
        return "?"
    if shape is None:  # a server tool (always a mapping)
        return str(tool.get("name") or tool.get("type") or "?")
    return str(shape.name) if shape.name is not None else "?"


# -- shapes ---------------------------------------------------------------------------------


def _shape(tool: Any) -> _Shape | None:
    from .tools import Tool

    if isinstance(tool, Tool):
        return _toolledger_shape(tool)
    if not isinstance(tool, Mapping):
        dumped = _mcp_dump(tool)
        if dumped is None:
            raise InvalidArgumentError(
                message="check_tool takes a toolledger.Tool, an Anthropic/OpenAI tool dict or "
                f"an MCP tool; got {type(tool).__name__}"
            )
        tool = dumped
    return _dict_shape(tool)


def _mcp_dump(tool: Any) -> dict[str, Any] | None:
    """An MCP ``Tool`` object (pydantic, mcp 1.x or 2.x) as its wire dict, else ``None``."""
    dump = getattr(tool, "model_dump", None)
    if not callable(dump) or not hasattr(tool, "name"):
        return None
    try:
        value = dump(by_alias=True, exclude_none=True, mode="json")
    except Exception:  # not a pydantic v2 model of the expected kind
        return None
    if not isinstance(value, dict) or "inputSchema" not in value:
        return None
    return value


def _toolledger_shape(tool: Any) -> _Shape:
    effects = tool.effects
    explanation: str | None = None
    if isinstance(effects, Mapping):
        explanation = effects.get("explanation")
        effects = effects.get("kind")
    if effects is not None and effects not in EFFECTS:
        raise InvalidArgumentError(
            message=f"tool {tool.name}: effects must be one of {', '.join(EFFECTS)} (or a "
            f'mapping {{"kind": ..., "explanation": ...}}); got {effects!r}',
            details={"tool": tool.name},
        )
    return _Shape(
        name=tool.name,
        name_path="name",
        description=tool.description,
        description_path="description",
        schema=tool.input_schema,
        schema_path="input_schema",
        effects=effects,
        recover=tool.recover is not None,
        explanation=explanation if isinstance(explanation, str) and explanation.strip() else None,
        effects_path="effects",
    )


def _dict_shape(tool: Mapping[str, Any]) -> _Shape | None:
    kind = tool.get("type")
    function = tool.get("function")
    if kind == "function" and isinstance(function, Mapping):  # OpenAI Chat Completions
        return _plain(function, "function.", function.get("parameters"), "function.parameters")
    if kind == "function":  # OpenAI Responses
        return _plain(tool, "", tool.get("parameters"), "parameters")
    if "inputSchema" in tool:  # MCP listing entry
        return _mcp_shape(tool)
    if "input_schema" in tool or kind in (None, "custom"):  # Anthropic custom tool
        return _plain(tool, "", tool.get("input_schema"), "input_schema")
    return None  # a provider-defined server tool


def _plain(spec: Mapping[str, Any], prefix: str, schema: Any, schema_path: str) -> _Shape:
    return _Shape(
        name=spec.get("name"),
        name_path=f"{prefix}name",
        description=spec.get("description"),
        description_path=f"{prefix}description",
        schema=schema,
        schema_path=schema_path,
        effects=None,
        recover=False,
        explanation=None,
        effects_path="",
    )


def _mcp_shape(tool: Mapping[str, Any]) -> _Shape:
    found = tool.get("annotations")
    notes: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    effects: str | None = None
    if notes:  # only annotated tools declare anything
        if notes.get("readOnlyHint") is True:
            effects = "none"
        elif notes.get("idempotentHint") is True:
            effects = "idempotent"
        else:
            effects = "side-effect"
    shape = _plain(tool, "", tool.get("inputSchema"), "inputSchema")
    return _Shape(
        name=shape.name,
        name_path=shape.name_path,
        description=shape.description,
        description_path=shape.description_path,
        schema=shape.schema,
        schema_path=shape.schema_path,
        effects=effects,
        recover=False,  # MCP has no recover hook: guarded_session reports OUTCOME_UNKNOWN
        explanation=None,
        effects_path="annotations",
    )


# -- schemas --------------------------------------------------------------------------------


def _types(schema: Mapping[str, Any]) -> set[str]:
    found = schema.get("type")
    if isinstance(found, str):
        return {found}
    if isinstance(found, list):
        return {t for t in found if isinstance(t, str)}
    return set()


def _walk(schema: Any, path: str) -> Iterator[tuple[Mapping[str, Any], str, bool]]:
    """Yield ``(subschema, path, is_argument)`` for every subschema, depth first."""
    stack: list[tuple[Any, str, bool]] = [(schema, path, False)]
    while stack:
        node, where, is_argument = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield node, where, is_argument
        children: list[tuple[Any, str, bool]] = []
        props = node.get("properties")
        if isinstance(props, Mapping):
            children.extend((v, f"{where}.properties.{k}", True) for k, v in props.items())
        items = node.get("items")
        if isinstance(items, Mapping):
            children.append((items, f"{where}.items", False))
        elif isinstance(items, list):
            children.extend((v, f"{where}.items.{i}", False) for i, v in enumerate(items))
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            children.extend((v, f"{where}.prefixItems.{i}", False) for i, v in enumerate(prefix))
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            children.append((extra, f"{where}.additionalProperties", False))
        for key in _SCHEMA_CHILDREN:
            branch = node.get(key)
            if isinstance(branch, list):
                children.extend((v, f"{where}.{key}.{i}", False) for i, v in enumerate(branch))
        for key in _SCHEMA_MAPS:
            defs = node.get(key)
            if isinstance(defs, Mapping):
                children.extend((v, f"{where}.{key}.{k}", False) for k, v in defs.items())
        stack.extend(reversed(children))


def _check_schema(schema: Any, path: str) -> list[Diagnostic]:
    if schema is None:
        return [
            _diag(
                "closed_input",
                path,
                "no input schema: declare one (an object with properties and "
                "additionalProperties: false) so the model knows the exact arguments",
            )
        ]
    if not isinstance(schema, Mapping) or (
        "object" not in _types(schema) and "properties" not in schema
    ):
        return [_diag("closed_input", path, "the input schema must be a JSON object schema")]
    out: list[Diagnostic] = []
    for node, where, is_argument in _walk(schema, path):
        types = _types(node)
        is_object = "object" in types or (not types and "properties" in node)
        if is_object and node.get("additionalProperties") is not False:
            out.append(
                _diag(
                    "closed_input",
                    where,
                    "set additionalProperties: false so invented arguments are refused "
                    "instead of silently ignored",
                )
            )
        if is_argument and not _described(node):
            out.append(
                _diag(
                    "argument_description",
                    where,
                    "describe this argument (what it is, its unit or format)",
                )
            )
        if "string" in types and not _bounded(node, "maxLength"):
            out.append(
                _diag(
                    "unbounded_string",
                    where,
                    "set maxLength (or enum/const): an unbounded string lets the model send "
                    "arbitrarily large input",
                )
            )
        if "array" in types and not _bounded(node, "maxItems"):
            out.append(
                _diag(
                    "unbounded_array",
                    where,
                    "set maxItems: an unbounded array lets the model send arbitrarily many items",
                )
            )
    return out


def _described(node: Mapping[str, Any]) -> bool:
    text = node.get("description")
    return isinstance(text, str) and bool(text.strip())


def _bounded(node: Mapping[str, Any], keyword: str) -> bool:
    limit = node.get(keyword)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
        return True
    return "enum" in node or "const" in node
