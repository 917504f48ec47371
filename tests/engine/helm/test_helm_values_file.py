"""Values files: private folder, mode 0600, removed afterwards, leftovers of dead processes swept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine.helm import cli


def test_values_file_is_private_and_removed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with cli._values_file({"password": "s3cr3t"}) as path:
        assert path.parent == tmp_path / "helmdeck"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert "s3cr3t" in path.read_text()
    assert not path.exists()


def test_leftovers_of_dead_processes_are_swept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "helmdeck"
    folder.mkdir(mode=0o700)
    dead = folder / "values-999999999-abc.yaml"  # no such process
    alive = folder / f"values-{os.getpid()}-def.yaml"
    dead.write_text("password: old\n")
    alive.write_text("password: in use\n")
    monkeypatch.setattr(cli, "_SWEPT", set())
    assert cli.values_dir() == folder
    assert not dead.exists() and alive.exists()
