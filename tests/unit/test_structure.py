"""The package is built of parts that own their state: no class mixes in more than two bases
(besides Protocol and Generic), and the worker that composes the parts holds few of them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "stream_perceptron"
TYPING_BASES = {"Protocol", "Generic"}


def _crowded(source: str) -> list[str]:
    """The classes of ``source`` with more than two bases besides Protocol and Generic."""
    def name(base: ast.expr) -> str:
        target = base.value if isinstance(base, ast.Subscript) else base
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")

    return [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)
            and len([b for b in node.bases if name(b) not in TYPING_BASES]) > 2]


def _init_attributes(source: str, cls_name: str) -> set[str]:
    """The attributes ``cls_name.__init__`` sets on ``self`` in ``source``."""
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {t.attr for node in ast.walk(init) if isinstance(node, ast.Assign | ast.AnnAssign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def test_no_class_has_more_than_two_bases_besides_protocol_and_generic():
    crowded = [f"{path.relative_to(PACKAGE)}: {name}" for path in sorted(PACKAGE.rglob("*.py"))
               for name in _crowded(path.read_text())]
    assert crowded == []


def test_the_worker_holds_at_most_twelve_attributes():
    attributes = _init_attributes((PACKAGE / "worker" / "loop.py").read_text(), "Worker")
    assert {"checkpointer", "partitions", "processor"} <= attributes  # the check reads the class
    assert len(attributes) <= 12, sorted(attributes)


def test_the_checks_find_what_they_look_for():
    planted = ("class C(A, B, typing.Generic[T], D, Protocol):\n"
               "    def __init__(self):\n        self.a = 1\n        self.b: int = 2\n        x = 3\n"
               "        other.c = 4\n"
               "class Fine(A, Generic[T], Protocol):\n    pass\n")
    assert _crowded(planted) == ["C"]
    assert _init_attributes(planted, "C") == {"a", "b"}
