"""Run helm CLI actions as subprocesses (argument lists, never a shell).

Works with helm 3.13+ and helm 4: the major version is detected once per
binary and the package options are mapped onto each CLI's flags (helm 4
spells ``--wait`` as ``--wait=watcher``, ``--atomic`` as
``--rollback-on-failure`` and ``--force`` as ``--force-replace``).
Values reach helm through temporary files with mode 0600, removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.helm.errors import HelmError, HelmMissing, HelmTooOld, classify
from engine.kube import KubeTarget

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
# Slack on top of helm's own --timeout before we stop waiting for the process.
_PROCESS_GRACE = 60.0


@dataclass(frozen=True, order=True)
class HelmVersion:
    """A helm CLI version; ``raw`` is what ``helm version`` printed."""

    major: int
    minor: int
    patch: int
    raw: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.raw or f"v{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class UpgradeOptions:
    """Options of ``helm upgrade --install``; ``timeout`` in seconds."""

    timeout: float = 300.0
    wait: bool = True
    create_namespace: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    max_history: int | None = None
    post_renderer: Sequence[str] = ()


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string helm accepts (``1m30s``)."""
    total = max(0, round(seconds))
    minutes, secs = divmod(total, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class Helm:
    """One helm binary bound to one cluster target.

    ``binary`` is a path or a name looked up on PATH. ``env`` adds to (and
    overrides) the process environment of every helm run.
    """

    def __init__(
        self,
        binary: str | os.PathLike[str] = "helm",
        target: KubeTarget | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.binary = str(binary)
        self.target = target or KubeTarget()
        self.env = dict(env or {})
        self._version: HelmVersion | None = None

    # -- plumbing ----------------------------------------------------------
    def _resolve(self) -> str:
        path = shutil.which(self.binary)
        if path is None:
            raise HelmMissing(
                f"helm binary {self.binary!r} not found; install helm 3.13+ or pass --helm PATH",
                action="version",
            )
        return path

    async def _run(self, action: str, args: Sequence[str], timeout: float | None = None) -> str:
        """Run helm with ``args``; return stdout. Raises a typed HelmError on failure."""
        binary = self._resolve()
        env = {**os.environ, **self.env}
        try:
            proc = await asyncio.create_subprocess_exec(
                binary, *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise HelmMissing(f"cannot run {binary}: {exc}", action=action) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise HelmError(f"helm {action} did not finish in {timeout:.0f}s", action=action) from None
        except asyncio.CancelledError:
            # Let helm finish its own cleanup (it records failed on SIGTERM).
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 10)
            raise
        stdout = out.decode(errors="replace")
        stderr = err.decode(errors="replace")
        if proc.returncode != 0:
            raise classify(action, stderr + "\n" + stdout, proc.returncode or 1)
        return stdout

    async def version(self) -> HelmVersion:
        """Detect (once) the helm version; raises HelmMissing or HelmTooOld."""
        if self._version is None:
            out = (await self._run("version", ["version", "--template", "{{.Version}}"], 30)).strip()
            m = _VERSION_RE.search(out)
            if not m:
                raise HelmMissing(f"cannot read helm version from {out!r}", action="version")
            ver = HelmVersion(int(m[1]), int(m[2]), int(m[3]), out)
            if ver < HelmVersion(3, 13, 0):
                raise HelmTooOld(f"helm {ver} is too old; helmdeck needs helm 3.13 or newer", action="version")
            self._version = ver
        return self._version

    def _common(self, namespace: str) -> list[str]:
        return ["--namespace", namespace, *self.target.helm_args()]

    async def _wait_flag(self, wait: bool) -> list[str]:
        if not wait:
            return []
        return ["--wait=watcher"] if (await self.version()).major >= 4 else ["--wait"]

    # -- actions -----------------------------------------------------------
    async def upgrade(
        self,
        release: str,
        namespace: str,
        chart: Path,
        values: Mapping[str, Any],
        options: UpgradeOptions | None = None,
    ) -> dict[str, Any]:
        """``helm upgrade --install``; returns helm's JSON view of the release.

        Raises a HelmError subclass; the release may still have been written
        (read storage to know).
        """
        opts = options or UpgradeOptions()
        args = ["upgrade", release, str(chart), "--install", *self._common(namespace),
                "--timeout", go_duration(opts.timeout), "--output", "json"]
        args += await self._wait_flag(opts.wait)
        if opts.create_namespace:
            args.append("--create-namespace")
        if opts.labels:
            args += ["--labels", ",".join(f"{k}={v}" for k, v in sorted(opts.labels.items()))]
        if opts.max_history is not None:
            args += ["--history-max", str(opts.max_history)]
        args += list(opts.post_renderer)
        with _values_file(values) as vf:
            out = await self._run("upgrade", [*args, "--values", str(vf)], opts.timeout + _PROCESS_GRACE)
        return _json_object(out)

    async def rollback(
        self,
        release: str,
        namespace: str,
        revision: int = 0,
        *,
        timeout: float = 300.0,
        wait: bool = True,
    ) -> None:
        """``helm rollback`` to ``revision`` (0 = the previous one). Raises HelmError."""
        args = ["rollback", release, str(revision), *self._common(namespace),
                "--timeout", go_duration(timeout)]
        args += await self._wait_flag(wait)
        await self._run("rollback", args, timeout + _PROCESS_GRACE)

    async def uninstall(self, release: str, namespace: str, *, timeout: float = 300.0, wait: bool = True) -> None:
        """``helm uninstall``. Raises ReleaseNotFound when there is no such release."""
        args = ["uninstall", release, *self._common(namespace), "--timeout", go_duration(timeout)]
        if wait:
            args.append("--wait")
        await self._run("uninstall", args, timeout + _PROCESS_GRACE)

    async def history(self, release: str, namespace: str) -> list[dict[str, Any]]:
        """``helm history -o json``: one dict per revision, oldest first."""
        out = await self._run("history", ["history", release, *self._common(namespace), "--output", "json"], 60)
        data = json.loads(out or "[]")
        return data if isinstance(data, list) else []

    async def status(self, release: str, namespace: str) -> dict[str, Any]:
        """``helm status -o json``. Raises ReleaseNotFound."""
        out = await self._run("status", ["status", release, *self._common(namespace), "--output", "json"], 60)
        return _json_object(out)


def _json_object(out: str) -> dict[str, Any]:
    # helm may print warnings before the JSON document.
    start = out.find("{")
    if start < 0:
        return {}
    try:
        data = json.loads(out[start:])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _values_file(values: Mapping[str, Any]) -> Iterator[Path]:
    """A 0600 temporary YAML file holding ``values``, removed on exit."""
    fd, name = tempfile.mkstemp(prefix="helmdeck-values-", suffix=".yaml")
    path = Path(name)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(dict(values), fh, sort_keys=True)
        yield path
    finally:
        path.unlink(missing_ok=True)


__all__ = ["Helm", "HelmError", "HelmVersion", "UpgradeOptions", "go_duration"]
