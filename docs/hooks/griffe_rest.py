"""A griffe extension: the package's reST docstrings read as Markdown by mkdocstrings.

The docstrings are written for Sphinx-style readers and the doctests: roles such as
``:class:`~a.b.C``` and ``:math:`R/γ```, literal blocks introduced by ``::``, and doctest
blocks (``>>>``) anywhere in the text. Markdown would take a doctest's ``[1][0]`` for a
reference link and a role for plain text, so before rendering each role becomes inline code
(``~`` keeps the last name, as Sphinx shows it), ``::`` becomes ``:``, and each doctest block
becomes a fenced ``pycon`` block. The source files are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
_DOCTEST = re.compile(r"^(\s*)>>> ")


def _role(match: re.Match[str]) -> str:
    short, target = match.groups()
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def as_markdown(text: str) -> str:
    """``text`` (a reST docstring) with its roles, ``::`` and doctest blocks made Markdown
    (tests/unit/test_docs.py shows each)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = _DOCTEST.match(lines[i])
        if start is None:
            line = _ROLE.sub(_role, lines[i])
            out.append(line[:-1] if line.endswith("::") else line)
            i += 1
            continue
        indent = start.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class RestDocstrings(griffe.Extension):
    """Rewrites every loaded object's docstring with :func:`as_markdown`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
