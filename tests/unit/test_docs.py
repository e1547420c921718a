"""The project's Markdown documents point at things that exist.

Every relative link ``[text](path#anchor)`` in a tracked ``.md`` file names a file of the
repository and, with an anchor, a heading of that file (GitHub's slugs). Every section named in
prose the way these documents name one, a path in backticks followed by a quoted heading (for
example `` `docs/performance.md`, "Method" `` or `` `docs/performance.md` under "Method" ``), is
the start of a heading of that file. Headings and links inside fenced code blocks are not
headings or links.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_TEST_REF = re.compile(r"(?<![:\w/.-])`?((?:tests|bench)/[\w/.-]+\.py)(?:::(\w+)(…)?)?")
_NAMED = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.md)`(?:,|\s+under)?\s*\(?\"([^\"]+)\"")


def _documents() -> list[Path]:
    """The tracked Markdown files."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every .md outside .venv
        return sorted(p for p in ROOT.rglob("*.md") if ".venv" not in p.parts)
    return [ROOT / line for line in out.splitlines() if line]


def _prose(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as ``-``.

    >>> slug("The current code (`27a9eff`)")
    'the-current-code-27a9eff'
    >>> slug("Profile: where the worker's time goes")
    'profile-where-the-workers-time-goes'
    >>> slug("Throughput: the same 100,000 records, median of 3")
    'throughput-the-same-100000-records-median-of-3'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def headings(path: Path) -> tuple[list[str], set[str]]:
    """The heading texts of a Markdown file, and their anchors (repeats numbered ``-1``, ...)."""
    texts: list[str] = []
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        text = m.group(2)
        texts.append(text.replace("`", ""))
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
    return texts, anchors


def _problems(doc: Path, root: Path = ROOT) -> list[str]:
    """What in ``doc`` (a file under ``root``) points at nothing."""
    out: list[str] = []
    where = doc.relative_to(root)
    for line in _prose(doc.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            path_part, _, anchor = target.partition("#")
            linked = (doc.parent / path_part).resolve() if path_part else doc
            if not linked.exists():
                out.append(f"{where}: link to a missing file: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in headings(linked)[1]:
                out.append(f"{where}: no heading for the anchor: {target}")
        for named, section in _NAMED.findall(line):
            file = root / named
            if not file.exists():
                file = doc.parent / named
            if not file.exists():
                continue  # a file name in passing, not a path of this repository
            wanted = section.replace("`", "")
            if not any(text.startswith(wanted) for text in headings(file)[0]):
                out.append(f'{where}: {named} has no section "{section}"')
        for named, test, cut in _TEST_REF.findall(line):
            file = root / named
            if not file.exists():
                out.append(f"{where}: no such file: {named}")
            elif test and not re.search(rf"^\s*(async )?def {test}" + ("" if cut else r"\b"),
                                        file.read_text(), re.M):
                out.append(f"{where}: {named} has no test {test}{cut}")
    return out


DOCUMENTS = _documents()


def test_the_documents_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert {"README.md", "docs/performance.md", "bench/README.md"} <= names


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_and_named_sections_resolve(doc: Path) -> None:
    assert _problems(doc) == []


def test_a_broken_link_and_a_missing_section_are_reported(tmp_path: Path) -> None:
    """The check itself can fail: a file with bad references is reported, each once."""
    (tmp_path / "other.md").write_text("# Real heading (`abc`)\n\n```\n# not a heading\n```\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](other.md#real-heading-abc) [gone](missing.md) [bad](other.md#not-a-heading)\n"
        'See `other.md`, "Real heading", `other.md` under "Real" and `other.md` ("No such part").\n'
        "`tests/t.py::test_real`, `tests/t.py::test_rea…`, tests/t.py::test_gone, `tests/gone.py`\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("def test_real():\n    pass\n")
    assert _problems(doc, tmp_path) == [
        "doc.md: link to a missing file: missing.md",
        "doc.md: no heading for the anchor: other.md#not-a-heading",
        'doc.md: other.md has no section "No such part"',
        "doc.md: tests/t.py has no test test_gone",
        "doc.md: no such file: tests/gone.py",
    ]


def _hook(name: str):
    """A module of ``docs/hooks/`` (the site's MkDocs hooks and griffe extension)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page in the navigation, every link and anchor between
    pages, the API reference from the docstrings and the generated settings table, with no
    warning."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (it is in the dev extra)")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    settings = (tmp_path / "site" / "settings" / "index.html").read_text()
    assert "SP_KAFKA__SSL_PASSWORD" in settings and "SP_LOG_EVERY_SECONDS" in settings
    reference = (tmp_path / "site" / "reference" / "model" / "index.html").read_text()
    assert "learn_many" in reference


def test_every_page_is_in_the_sites_navigation() -> None:
    """A page left out of ``nav`` would be built but found by no one."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if f" {p}" not in nav] == []


def test_rest_roles_doctests_and_literal_blocks_become_markdown() -> None:
    as_markdown = _hook("griffe_rest").as_markdown
    text = "See :class:`~a.b.C`, :func:`f` and :math:`x^2`::\n\n    code\n\n>>> f()[0][1]\n2\n\nEnd."
    assert as_markdown(text) == (
        "See `C`, `f` and `x^2`:\n\n    code\n\n```pycon\n>>> f()[0][1]\n2\n```\n\nEnd.")
    assert as_markdown("    >>> g()\n    3") == "    ```pycon\n    >>> g()\n    3\n    ```"


def test_links_out_of_the_docs_become_text_or_point_at_the_repository() -> None:
    outside_links = _hook("repo_links").outside_links
    page = "[b](../bench/README.md#x), [a](accuracy.md#y), [w](https://example.org)\n```\n[c](../c.md)\n```"
    assert outside_links(page, "perf.md", None) == (
        "b, [a](accuracy.md#y), [w](https://example.org)\n```\n[c](../c.md)\n```")
    assert outside_links("[r](../../README.md)", "reference/x.md", "https://example.org/r/") == (
        "[r](https://example.org/r/blob/main/README.md)")
