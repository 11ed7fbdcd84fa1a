"""A real headless Chromium for the report's test, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on file descriptors 3 and 4), so
nothing beyond the standard library is needed and no port is opened.

Debian's package (``apt-get install chromium``) puts the browser at /usr/bin/chromium;
.ci/chromium installs it for CI. Started as the machine notes advise: no sandbox (root), no GPU,
no background networking (this machine has no network, and the browser would keep trying).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe")


def chromium_path() -> str | None:
    """Where Chromium is (env TUNEBANK_CHROMIUM, else chromium on PATH), or None."""
    return os.environ.get("TUNEBANK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    """The browser did not answer, or answered with an error."""


class Chromium:
    """One headless browser with one page: navigate, evaluate, collect what went wrong, and
    take a screenshot. Use as a context manager."""

    def __init__(self, executable: str, width: int = 1200, height: int = 900, timeout: float = 30.0) -> None:
        self._profile = tempfile.mkdtemp(prefix="tunebank-chromium-")
        to_child, self._send = os.pipe()
        self._receive, from_child = os.pipe()
        child_in = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10)  # clear of 3 and 4 before the dup2s
        child_out = fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
        os.close(to_child)
        os.close(from_child)

        def pipes() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.timeout = timeout
        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=pipes)
        os.close(child_in)
        os.close(child_out)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.page(f"{domain}.enable")

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the browser and remove its profile."""
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._send)
        os.close(self._receive)
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- the protocol ---------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def page(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page."""
        return self.call(method, params, self._session)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event named ``method`` (one already received counts)."""
        for event in self.events:
            if event["method"] == method:
                self.events.remove(event)
                return event
        while True:
            event = self._read()
            if event.get("method") == method:
                return event
            if "method" in event:
                self.events.append(event)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._receive], [], [], max(left, 0))
            if not ready:
                raise BrowserError(f"no answer from the browser in {self.timeout:.0f} s")
            chunk = os.read(self._receive, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed the pipe (exit code {self.proc.poll()})")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        value: dict[str, Any] = json.loads(message)
        return value

    # -- what a test asks -------------------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Load a local file and wait until it has loaded."""
        self.page("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page (an exception is an error)."""
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:60]}...: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Every uncaught exception, console error or warning, and logged error seen so far."""
        out = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                what = details.get("exception", {}).get("description") or details.get("text")
                out.append(f"exception: {what}")
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning",
                                                                                          "assert"):
                out.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error",
                                                                                               "warning"):
                entry = params["entry"]
                out.append(f"log {entry['level']}: {entry.get('text')} {entry.get('url', '')}")
        return out

    def screenshot(self) -> bytes:
        """The whole page as PNG bytes."""
        data = self.page("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        return base64.b64decode(data)
