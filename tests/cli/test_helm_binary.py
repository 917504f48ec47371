"""Which helm runs: --helm, $HELMDECK_HELM (empty = unset), PATH, then helmdeck's own build (helm 4 first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base import tools
from helmdeck import __version__
from helmdeck.helm_binary import HelmNotFound, find_helm
from localcluster import build


def fake_helm(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "helm"
    path.write_text("#!/bin/sh\necho v9.9.9\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    cache = tmp_path / "cache"
    return {
        "flag": fake_helm(tmp_path / "flag"),
        "env": fake_helm(tmp_path / "env"),
        "path": fake_helm(tmp_path / "path"),
        "helm4": fake_helm(build.COMPONENTS["helm4"].bin_dir(cache)),
        "helm3": fake_helm(build.COMPONENTS["helm3"].bin_dir(cache)),
        "cache": cache,
    }


def test_resolution_order(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELMDECK_CACHE", str(places["cache"]))
    path = str(places["path"].parent)
    env = {"PATH": path, "HELMDECK_HELM": str(places["env"])}
    assert find_helm(str(places["flag"]), env).path == str(places["flag"])
    assert find_helm(None, env).path == str(places["env"])
    choice = find_helm(None, {"PATH": path, "HELMDECK_HELM": ""})  # empty counts as unset
    assert (choice.path, choice.source) == (str(places["path"]), "from PATH")
    choice = find_helm(None, {"PATH": str(places["cache"])})
    assert choice.path == str(places["helm4"]) and "helm4" in choice.source
    places["helm4"].unlink()
    assert find_helm(None, {"PATH": ""}).path == str(places["helm3"])
    places["helm3"].unlink()
    with pytest.raises(HelmNotFound, match=r"PATH has no helm.*helm4-.*--helm PATH"):
        find_helm(None, {"PATH": ""})


def test_an_explicit_choice_that_is_missing_is_an_error(places: dict[str, Path]) -> None:
    with pytest.raises(HelmNotFound, match=r"'/nowhere/helm' given by --helm"):
        find_helm("/nowhere/helm", {"PATH": str(places["path"].parent)})
    with pytest.raises(HelmNotFound, match=r"'nohelm' given by \$HELMDECK_HELM"):
        find_helm(None, {"PATH": str(places["path"].parent), "HELMDECK_HELM": "nohelm"})
    # A bare name is looked up on PATH.
    assert find_helm("helm", {"PATH": str(places["path"].parent)}).path == str(places["path"])


def test_version_names_the_helm_found_without_path(places: dict[str, Path]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HELMDECK_HELM", "PATH")}
    env.update(PATH="", HELMDECK_HELM="", HELMDECK_CACHE=str(places["cache"]))
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "--version"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"helmdeck {__version__}", f"helm v9.9.9 at {places['helm4']} (helmdeck's own helm4 build: no helm on PATH)"]


def test_the_fallback_is_where_the_local_cluster_builds_helm() -> None:
    # helmdeck.helm_binary asks engine.base.tools (the command line never imports localcluster): the two agree.
    for major in (3, 4):
        assert tools.helm(major) == build.binary(f"helm{major}")
