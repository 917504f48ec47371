"""Which helm binary the headless commands and the app run.

Order: ``--helm``, then ``$HELMDECK_HELM`` (empty counts as unset), then
``helm`` on ``PATH``, then helmdeck's own build in its cache (``make build``
/ ``make demo`` put it there; helm 4 before helm 3). An explicit choice
(flag or variable) that cannot be found is an error rather than a reason to
look further: the operator asked for that binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.base import tools

ENV_VAR = "HELMDECK_HELM"
# helmdeck's own builds, most preferred first (the majors of engine.base.tools.helm).
CACHED = (4, 3)


class HelmNotFound(RuntimeError):
    """No helm binary was found; the message lists every place looked at and the fixes."""


@dataclass(frozen=True)
class HelmChoice:
    """The helm binary to run: ``path`` (absolute) and ``source``, how it was chosen (one phrase)."""

    path: str
    source: str

    def describe(self) -> str:
        """``/path/to/helm (from PATH)``: for ``--version`` and the log."""
        return f"{self.path} ({self.source})"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _cached() -> list[tuple[str, Path]]:
    return [(f"helm{major}", tools.helm(major)) for major in CACHED]


def find_helm(flag: str | None, env: Mapping[str, str] | None = None) -> HelmChoice:
    """Resolve the helm binary (see the module docstring for the order).

    ``flag`` is ``--helm`` (None when not given); ``env`` defaults to
    ``os.environ`` (its ``PATH`` and ``HELMDECK_HELM`` are read). Raises
    :class:`HelmNotFound` naming what was tried.
    """
    env = os.environ if env is None else env
    search_path = env.get("PATH", "")
    for value, source in ((flag, "--helm"), (env.get(ENV_VAR) or None, f"${ENV_VAR}")):
        if value is None:
            continue
        found = shutil.which(value, path=search_path) if os.sep not in value else value
        if found is None or not _executable(Path(found)):
            raise HelmNotFound(f"helm binary {value!r} given by {source} not found or not executable; "
                               f"fix {source} or leave it unset to use helm on PATH")
        return HelmChoice(str(Path(found).absolute()), f"from {source}")
    on_path = shutil.which("helm", path=search_path)
    if on_path is not None:
        return HelmChoice(str(Path(on_path).absolute()), "from PATH")
    cached = _cached()
    for name, path in cached:
        if _executable(path):
            return HelmChoice(str(path), f"helmdeck's own {name} build: no helm on PATH")
    raise HelmNotFound(
        f"no helm binary: --helm and ${ENV_VAR} are unset, PATH has no helm, and helmdeck has not built one "
        f"({', '.join(str(p) for _, p in cached)}); install helm 3.13+ on PATH, pass --helm PATH, "
        "or run `make build`")


def helm_version(path: str) -> str:
    """``helm version --short`` of ``path`` (e.g. ``v4.3.2+g…``), or ``?`` when it cannot run."""
    try:
        proc = subprocess.run([path, "version", "--short"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return proc.stdout.strip() or "?"
