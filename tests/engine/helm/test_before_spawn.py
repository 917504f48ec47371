"""engine.helm.cli.BEFORE_SPAWN: a check the caller sets is asked right before each helm process is spawned, and
what it raises stops the spawn (the claim's recheck, engine.reconcile.action.observed_run, rides on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.helm import BEFORE_SPAWN, Helm


def _fake_helm(tmp_path: Path) -> tuple[Path, Path]:
    ran = tmp_path / "ran"
    binary = tmp_path / "helm"
    binary.write_text(f"#!/bin/sh\necho \"$@\" >> {ran}\necho v4.0.0\n")
    binary.chmod(0o755)
    return binary, ran


async def test_a_check_that_raises_spawns_no_helm(tmp_path: Path) -> None:
    binary, ran = _fake_helm(tmp_path)
    helm = Helm(binary)

    def lapsed() -> None:
        raise RuntimeError("the claim lapsed")

    token = BEFORE_SPAWN.set(lapsed)
    try:
        with pytest.raises(RuntimeError, match="lapsed"):
            await helm.version()
    finally:
        BEFORE_SPAWN.reset(token)
    assert not ran.exists()  # nothing spawned
    assert str(await helm.version()) and ran.read_text().startswith("version")  # unset: helm runs


async def test_the_check_is_asked_before_every_spawn_of_the_task(tmp_path: Path) -> None:
    binary, ran = _fake_helm(tmp_path)
    asked: list[int] = []
    token = BEFORE_SPAWN.set(lambda: asked.append(len(ran.read_text().splitlines()) if ran.exists() else 0))
    try:
        await Helm(binary).version()
    finally:
        BEFORE_SPAWN.reset(token)
    assert asked == [0]  # asked once, before the one process ran
