"""The suite's order: as collected, or with ``SP_TEST_ORDER=reverse`` or ``shuffle:SEED`` another
one, to find a test that passes only after another has run (docs/development.md). The same
order on every pytest-xdist process, which requires it."""

from __future__ import annotations

import os
import random

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order = os.environ.get("SP_TEST_ORDER", "").strip()
    if not order:
        return
    if order == "reverse":
        items.reverse()
    elif order.startswith("shuffle:") and order[len("shuffle:"):].isdigit():
        random.Random(int(order[len("shuffle:"):])).shuffle(items)
    else:
        raise pytest.UsageError(f"SP_TEST_ORDER: {order!r} is not 'reverse' or 'shuffle:SEED' (an integer)")


def pytest_report_header(config: pytest.Config) -> str | None:
    order = os.environ.get("SP_TEST_ORDER", "").strip()
    return f"test order: {order}" if order else None
