"""Real headless Chromium for the tests of what a person looks at (the dashboard), driven through Debian's
chromedriver over its HTTP WebDriver API with `requests` (no browser download, no new dependency).

`chromium()` is a context manager yielding a `Browser`; a missing /usr/bin/chromium or chromedriver skips
the test, except under KIJITO_PULL_REQUIRE_E2E=1 (.ci/run installs both), where it is a failure.
Chromium runs with the flags this machine's closed network needs and a fresh profile directory.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from tests.redisserver import free_port
from tests.required import missing

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def binaries() -> tuple[str, str]:
    """(chromium, chromedriver); skips the test when either is missing (fails under KIJITO_PULL_REQUIRE_E2E=1)."""
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.access(CHROMIUM, os.X_OK) and os.access(driver, os.X_OK)):
        missing("Chromium is not installed (apt-get install chromium chromium-driver; .ci/run installs them)")
    return CHROMIUM, driver


class Browser:
    """One WebDriver session of headless Chromium."""

    def __init__(self, driver_url: str, session: str):
        self.base = f"{driver_url}/session/{session}"
        self.http = requests.Session()

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        answer = self.http.request(method, self.base + path, json=body, timeout=timeout)
        value = answer.json().get("value")
        if answer.status_code != 200:
            raise AssertionError(f"WebDriver {method} {path}: {answer.status_code} {value}")
        return value

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        """Run `source` (a function body; `return` its answer) in the page."""
        return self._call("POST", "/execute/sync", {"script": source, "args": list(args)})

    def text(self, selector: str) -> str | None:
        """The text of the first element `selector` matches, None when there is none."""
        return self.script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                           selector)

    def wait_for(self, source: str, *args: Any, timeout: float = 5.0) -> float:
        """Seconds until the script `source` returns something true; AssertionError after `timeout`."""
        started = time.monotonic()
        while True:
            if self.script(source, *args):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError(f"not within {timeout} s: {source}")
            time.sleep(0.05)

    def html(self) -> str:
        return self.script("return document.documentElement.outerHTML;")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))

    def size(self, width: int, height: int) -> None:
        self._call("POST", "/window/rect", {"width": width, "height": height})


@contextlib.contextmanager
def chromium(width: int = 1440, height: int = 900) -> Iterator[Browser]:
    """Headless Chromium through a chromedriver of its own on a free loopback port, a fresh profile."""
    binary, driver = binaries()
    port = free_port()
    profile = tempfile.mkdtemp(prefix="kijito-chromium-")
    proc = subprocess.Popen([driver, f"--port={port}", "--allowed-ips=127.0.0.1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/status", timeout=2).json()["value"]["ready"]:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": binary, "args": [*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]}}}}
        answer = requests.post(f"{url}/session", json=caps, timeout=60).json()["value"]
        if "sessionId" not in answer:
            raise AssertionError(f"chromedriver could not start Chromium: {answer}")
        browser = Browser(url, answer["sessionId"])
        try:
            yield browser
        finally:
            with contextlib.suppress(requests.RequestException, AssertionError):
                browser._call("DELETE", "", timeout=20)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(profile, ignore_errors=True)
