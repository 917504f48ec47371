"""helm's version is detected once per Helm, however many passes ask for it at once (the controller starts
--concurrency passes together)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from engine.helm import Helm


async def test_passes_starting_together_run_helm_version_once(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    helm = tmp_path / "helm"
    helm.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nsleep 0.3\necho v3.15.2\n')
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    cli = Helm(helm)
    found = await asyncio.gather(*(cli.version() for _ in range(8)))
    assert {(v.major, v.minor, v.patch) for v in found} == {(3, 15, 2)}
    assert calls.read_text().splitlines() == ["version"]
    await cli.version()
    assert calls.read_text().splitlines() == ["version"]
