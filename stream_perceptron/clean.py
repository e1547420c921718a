"""Text that anyone who writes to a topic chooses, cleaned before it is shown.

A topic's name, a client id, a detector's name or a class name reaches a terminal (``watch``), a
web page (``dashboard``) and a metric's label (``/metrics``). :func:`clean_text` takes out what
could act on whatever shows it, and bounds its length: terminal escape sequences whole, the
other control characters, and the bidirectional overrides and isolates. Rich markup and HTML are
left as they are: the terminal renderer never reads a text as markup, and the web page sets text
only.
"""

from __future__ import annotations

import re
from typing import Any

# A terminal escape sequence, 7-bit (ESC ...) or 8-bit (a C1 introducer): CSI with its parameters
# and final byte; OSC, DCS, SOS, PM and APC strings up to their terminator (or the text's end);
# any other ESC with its intermediate and final bytes.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[ -/]*[0-~]?",
    re.DOTALL,
)
# What is left of control characters (C0, DEL, C1) and the bidirectional overrides and isolates,
# which reorder what a terminal or a page shows after them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"[\t\n\v\f\r]")


def clean_text(text: str, limit: int) -> str:
    """``text`` as it may be shown: escape sequences removed whole, other control characters
    removed (tabs and line breaks become spaces), at most ``limit`` characters.

    >>> clean_text("w1\\x1b]0;pwned\\x07\\x1b[2J x\\x9b31m\\ty\\u202e", 64)
    'w1 x y'
    >>> clean_text("[bold red]x[/]", 64), clean_text("é" * 100, limit=3)
    ('[bold red]x[/]', 'ééé')
    """
    return _CONTROL.sub("", _SPACE.sub(" ", _ESCAPE.sub("", text)))[:limit]


MAX_CLASS_TEXT = 100
"""The characters kept of a class name where it is shown (``SP_LIMITS__MAX_CLASS_CHARS``' default)."""

_INT64 = 2**63


def class_text(value: Any, limit: int = MAX_CLASS_TEXT) -> str | None:
    """A class name (a JSON string, or an integer within int64) as it is shown: a string cleaned
    (:func:`clean_text`) and cut to ``limit`` characters, an integer as its digits; None for
    anything else (a bool, a float, a larger integer, ...), which is not a class name.

    >>> class_text("cat\\x1b[2J\\n"), class_text(3), class_text(True), class_text(3.0), class_text(10**30)
    ('cat ', '3', None, None, None)
    """
    if isinstance(value, str):
        return clean_text(value, limit)
    if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
        return str(value)
    return None


__all__ = ["MAX_CLASS_TEXT", "class_text", "clean_text"]
