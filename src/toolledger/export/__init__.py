"""Exports of a stored run: JSON (complete, re-importable), Markdown, self-contained HTML,
a static site of many runs (``export_site``), and a run's spans re-sent over OTLP
(``reexport``).

Exports only read the store. Every export carries the run's head hash and record count,
so ``toolledger.verify(..., expected_head=..., expected_count=...)`` can detect a cut-off
tail later. ``tree_order`` (imported ``as`` itself, outside ``__all__``) is for the CLI's
tree, not for users.
"""

from ._common import ExportInfo
from ._otlp import reexport
from ._tree import tree_order as tree_order
from .html import export_html
from .json import export_json
from .markdown import export_markdown
from .site import SiteInfo, export_site

__all__ = [
    "ExportInfo",
    "SiteInfo",
    "export_html",
    "export_json",
    "export_markdown",
    "export_site",
    "reexport",
]
