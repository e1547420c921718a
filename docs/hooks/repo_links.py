"""An MkDocs hook: links from a page to files of the repository outside ``docs/``.

The pages are read in two places: on GitHub, where ``[bench/README.md](../bench/README.md)``
opens the file, and on the built site, which holds only ``docs/``. Before a page is rendered,
each link whose target resolves outside the docs directory becomes a link into the repository
on its host when ``repo_url`` is set in ``mkdocs.yml`` (``<repo_url>/blob/main/<path>``), and its
text alone otherwise, so ``mkdocs build --strict`` sees no link to a missing page.
Links inside ``docs/`` are left to MkDocs, which checks them.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s#]+)(#[^)\s]*)?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def outside_links(markdown: str, page_path: str, repo_url: str | None) -> str:
    """``markdown`` of the page at ``page_path`` (relative to ``docs/``) with its links to files
    outside ``docs/`` pointed at ``repo_url``, or reduced to their text.

    >>> outside_links("[b](../bench/README.md#x) and [a](accuracy.md)", "perf.md", None)
    'b and [a](accuracy.md)'
    >>> outside_links("[r](../../README.md)", "sub/p.md", "https://example.org/r")
    '[r](https://example.org/r/blob/main/README.md)'
    """

    def replace(m: re.Match[str]) -> str:
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            return m.group(0)
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), target))
        if not resolved.startswith("../"):
            return m.group(0)
        if repo_url:
            return f"[{text}]({repo_url.rstrip('/')}/blob/main/{resolved[3:]}{anchor})"
        return text

    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(replace, line))
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return outside_links(markdown, page.file.src_uri, config.get("repo_url"))
