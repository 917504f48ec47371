"""helm's version is detected once per Helm, however many passes ask for it at once (the controller starts
--concurrency passes together); the environment helm runs in."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.helm.cli import HELM_GOGC


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


async def test_helm_runs_with_a_lazier_go_collector_unless_the_environment_sets_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helm's runs get GOGC=400 (HELM_GOGC: less of a short run's CPU in Go's collector); a GOGC the user's
    environment or the Helm's own env sets is kept."""
    helm = tmp_path / "helm"
    helm.write_text('#!/bin/sh\necho "v4.3.2 GOGC=$GOGC"\n')
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("GOGC", raising=False)
    assert (await Helm(helm).version()).raw.endswith(f"GOGC={HELM_GOGC}")
    assert (await Helm(helm, env={"GOGC": "50"}).version()).raw.endswith("GOGC=50")
    monkeypatch.setenv("GOGC", "off")
    assert (await Helm(helm).version()).raw.endswith("GOGC=off")
