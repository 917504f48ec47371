"""The Flux oracle: Flux's own library code (tests/oracle/main.go, a Go program importing Flux's modules),
asked from the tests, so helmdeck's functions are compared with Flux's on generated inputs.

:data:`COMPONENT` builds it as the other Go binaries are built (:mod:`localcluster.build`), cached in
``<cache>/bin/oracle-<digest>/`` where the digest covers its source, go.mod and go.sum and the Go toolchain
(a change rebuilds it). It imports the module versions helm-controller v1.6.3 runs (tests/oracle/go.mod says
which, and why one differs), built with :data:`TOOLCHAIN` (the go command fetches it from the Go module proxy
when the machine's Go is another). A test that asks it carries ``pytest.mark.binaries("oracle")``;
the session builds it before the first test (tests/conftest.py) and starts one process for all of them
(the ``flux_oracle`` fixture): line-delimited JSON, one answer per request, in order.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localcluster.build import Component

SOURCE = Path(__file__).resolve().parent / "oracle"
TOOLCHAIN = "go1.26.8"  # the machine's Go; helm-controller v1.6.3 and the modules it pins say go 1.26.0
_FILES = ("main.go", "observation.go", "go.mod", "go.sum")


def _digest() -> str:
    h = hashlib.sha256(TOOLCHAIN.encode())
    for name in _FILES:
        h.update(f"\0{name}\0".encode() + (SOURCE / name).read_bytes())
    return h.hexdigest()[:12]


COMPONENT = Component(name="oracle", module="helmdeck.local/tests/oracle", version=_digest(),
                      binaries={"oracle": "."}, on_demand=True, source=SOURCE, toolchain=TOOLCHAIN)


class OracleError(RuntimeError):
    """The oracle process ended or answered what is not JSON; the message has its stderr's end."""


class Oracle:
    """One running oracle process. :meth:`ask` one request; :meth:`ask_many` a batch, written by a thread
    while the answers are read (no pipe fills up). Not thread-safe: one caller at a time."""

    def __init__(self, binary: Path):
        self._proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """The oracle's answer to ``request`` (see tests/oracle/main.go for the operations)."""
        return self.ask_many([request])[0]

    def ask_many(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The answers to ``requests``, in order."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        lines = [json.dumps(r) + "\n" for r in requests]
        stdin = self._proc.stdin
        writer = threading.Thread(target=lambda: (stdin.writelines(lines), stdin.flush()), daemon=True)
        writer.start()
        out = []
        for _ in lines:
            line = self._proc.stdout.readline()
            if not line:
                raise OracleError(f"the oracle ended: {self._stderr()}")
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                raise OracleError(f"the oracle answered {line[:200]!r}") from None
        writer.join()
        return out

    def _stderr(self) -> str:
        self._proc.wait(timeout=5)
        assert self._proc.stderr is not None
        return self._proc.stderr.read()[-2000:]

    def close(self) -> None:
        """End the process (closing its stdin ends its loop)."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

