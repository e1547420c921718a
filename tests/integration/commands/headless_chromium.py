"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

Chromium reads commands from its file descriptor 3 and writes answers and events to 4, one JSON
object per message, each ended by a NUL byte (the transport Puppeteer's ``pipe: true`` uses), so
no WebSocket client is needed. :class:`Chromium` opens a page (``Target.createTarget``, attached
with a flat session), evaluates JavaScript in it and takes screenshots.

:func:`chromium_binary` finds Debian's ``chromium``; :func:`need_chromium` skips a test without it,
saying why, except in CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

BINARIES = ("chromium", "chromium-browser")

# Runs argv[3:] with the pipe ends argv[1] and argv[2] as its descriptors 3 and 4 (a shell's
# redirections may not name a descriptor above 9).
_ON_FDS_3_AND_4 = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
                   "os.execv(sys.argv[3], sys.argv[3:])")


def chromium_binary() -> str | None:
    """The path of Debian's Chromium (``apt-get install chromium``), or None."""
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def need_chromium() -> str:
    """Chromium's path; skips without it (fails in CI, where it must be installed)."""
    path = chromium_binary()
    if path is None:
        reason = "headless Chromium is not installed (Debian: apt-get install chromium)"
        if in_ci():
            pytest.fail(f"CI must run the browser test, but {reason}", pytrace=False)
        pytest.skip(reason)
    return path


class CdpError(RuntimeError):
    """An error answered by Chromium, or no answer in time."""


class Chromium:
    """One headless Chromium process and its DevTools pipe; use as a context manager."""

    def __init__(self, binary: str, profile: Path, log: Path, *, width: int = 1400,
                 height: int = 1000) -> None:
        self.width, self.height = width, height
        to_r, self._to = os.pipe()  # we write commands; Chromium reads them as its fd 3
        self._from, from_w = os.pipe()  # Chromium writes as its fd 4; we read
        args = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--disable-background-networking", "--disable-component-update", "--mute-audio",
                f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses root with its sandbox on
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ON_FDS_3_AND_4, str(to_r), str(from_w), *args],
                pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )
        os.close(to_r)
        os.close(from_w)
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._done = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._done:
                        self._answers[message["id"]] = message
                        self._done.notify_all()
        with self._done:
            self._closed = True
            self._done.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout_s: float = 60.0) -> dict[str, Any]:
        """Send one command and wait for its answer's ``result``; raises :class:`CdpError`."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        with self._done:
            if not self._done.wait_for(lambda: ident in self._answers or self._closed, timeout_s):
                raise CdpError(f"{method}: no answer from Chromium within {timeout_s} s")
            if ident not in self._answers:
                raise CdpError(f"{method}: Chromium closed its pipe (exit code {self.proc.poll()})")
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def open(self, url: str) -> str:
        """A new page at ``url``; returns its session for :meth:`evaluate` and :meth:`screenshot`."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session: str = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=session)
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path: Path) -> Path:
        """The whole page (not only the viewport) as a PNG at ``path``."""
        height = int(self.evaluate(session, "document.documentElement.scrollHeight"))
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": self.width, "height": max(height, 1), "scale": 1},
        }, session=session)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=5)
        except (CdpError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._to)
        self._reader.join(5)
        os.close(self._from)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
