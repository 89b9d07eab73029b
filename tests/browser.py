"""Headless Chromium for the tests that need a real browser: the report's page, the
timeline in Catapult's trace viewer. Driven over the DevTools protocol on a pipe (stdlib only)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

from conftest import unavailable


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        unavailable("chromium is not installed and this user cannot apt-get install it")
    proc = subprocess.run(
        ["apt-get", "install", "-y", "chromium"],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    exe = shutil.which("chromium")
    if proc.returncode != 0 or not exe:
        unavailable(f"apt-get install chromium failed: {proc.stderr[-500:]}")
    return exe


class CDP:
    """Chrome DevTools Protocol over --remote-debugging-pipe (fd 3 in, fd 4 out), stdlib only."""

    def __init__(self, exe: str, profile: Path):
        r_in, self._w = os.pipe()
        self._r, w_out = os.pipe()

        def wire():  # runs in the child before exec: the pipe ends become fds 3 and 4
            os.dup2(r_in, 3)
            os.dup2(w_out, 4)

        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "--window-size=1400,2000",
        ]
        self.proc = subprocess.Popen(
            [exe, *flags, "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(r_in)
        os.close(w_out)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _recv(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout: float = 120,
    ) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}} | (
            {"sessionId": session} if session else {}
        )
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._recv(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._recv(deadline))

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError, EOFError):
            self.call("Browser.close", timeout=20)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)
