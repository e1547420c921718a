"""An MkDocs hook: the settings page's table, generated from the settings classes.

Each field of :class:`stream_perceptron.settings.Settings` and of its sections becomes one row:
its environment variable, its type (with the bounds the model checks), its default and its
``description``. The table replaces the line ``<!-- settings-table -->`` of ``docs/settings.md``
when the site is built, so the page and the code cannot disagree;
``tests/unit/test_settings.py`` checks that every field has a description and a row.
"""

from __future__ import annotations

import math
import types
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from stream_perceptron.settings import ENV_NESTED, ENV_PREFIX, Settings

MARKER = "<!-- settings-table -->"

_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "secret"}


def _type(annotation: Any, metadata: list[Any]) -> str:
    """``annotation`` in words: ``integer ≥ 1``, ``secret, optional``, `` `a` \\| `b` ``."""
    optional = False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        optional = True
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0]
    if typing.get_origin(annotation) is Literal:
        text = r" \| ".join(f"`{choice}`" for choice in typing.get_args(annotation))
    elif typing.get_origin(annotation) is typing.Annotated:  # FilePath
        text = "path of a file"
    elif isinstance(annotation, type) and issubclass(annotation, Path):
        text = "path"
    else:
        text = _NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))
    bounds = []
    for m in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"),
                           ("min_length", "length ≥"), ("max_length", "length ≤")):
            value = getattr(m, attr, None)
            if value is not None and isinstance(m, annotated_types.BaseMetadata):
                bounds.append(f"{sign} {_number(value)}")
    if bounds:
        text += " " + ", ".join(bounds)
    return text + (", optional" if optional else "")


def _number(value: Any) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        text = repr(value)
        return format(value, "g") if len(text) > 10 else text
    return str(value)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{_number(value)}`"


def _row(env: str, field: FieldInfo) -> str:
    description = " ".join((field.description or "").split()).replace("|", r"\|")
    return f"| `{env}` | {_type(field.annotation, field.metadata)} | {_default(field)} | {description} |"


_HEAD = "| variable | type | default | description |\n|---|---|---|---|"


def settings_table() -> str:
    """The settings as Markdown: a table per section (``SP_KAFKA__*``, …), then the top-level
    settings, each row ``| variable | type | default | description |``."""
    parts: list[str] = []
    top: list[str] = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            prefix = f"{ENV_PREFIX}{section.upper()}{ENV_NESTED}"
            doc = " ".join((model.__doc__ or "").split())
            rows = [_row(prefix + name.upper(), inner) for name, inner in model.model_fields.items()]
            parts.append(f"### `{prefix}*`\n\n{doc}\n\n{_HEAD}\n" + "\n".join(rows))
        else:
            top.append(_row(ENV_PREFIX + section.upper(), field))
    parts.append(f"### Logging\n\n{_HEAD}\n" + "\n".join(top))
    return "\n\n".join(parts) + "\n"


def render(markdown: str) -> str:
    """``markdown`` with the marker line replaced by the table (unchanged without the marker)."""
    return markdown.replace(MARKER, settings_table()) if MARKER in markdown else markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return render(markdown)
