"""Run helm CLI actions as subprocesses (argument lists, never a shell).

Works with helm 3.13+ and helm 4: the major version is detected once per
binary and the package options are mapped onto each CLI's flags (helm 4
spells ``--wait`` as ``--wait=watcher``, ``--atomic`` as
``--rollback-on-failure`` and ``--force`` as ``--force-replace``).
Which package field sets which option is decided in :mod:`engine.reconcile.options`.
Values reach helm through temporary files with mode 0600, removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from engine.base.loader import Dumper
from engine.helm.errors import HelmError, HelmMissing, HelmTooOld, classify
from engine.helm.postrender_client import ERRORS_ENV
from engine.kube.client import KubeConfigError, KubeTarget, api_client
from engine.kube.rest import get_json

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
# Called with no arguments right before each helm process of the current task is spawned (no await between the
# call and the fork); whatever it raises propagates and nothing is spawned. A caller that must not start helm once
# some condition lapsed (a claim: engine.reconcile.action.observed_run) sets it around its call.
BEFORE_SPAWN: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "helmdeck_before_spawn", default=None)
# Go's collector for helm's runs unless the environment sets its own: a helm run is short, and at Go's default
# (100) collecting is ~15% of a small install's CPU (72 -> 62 ms per one-ConfigMap install on a quiet machine);
# its peak memory grew 5-10% (58 -> 62 MiB; a 300-object chart 89 -> 98 MiB).
HELM_GOGC = "400"
# Slack on top of helm's own --timeout before we stop waiting for the process.
_PROCESS_GRACE = 60.0
# Seconds a stopped helm gets after SIGTERM to record its outcome before it is killed.
STOP_GRACE = 5.0


@dataclass(frozen=True, order=True)
class HelmVersion:
    """A helm CLI version; ``raw`` is what ``helm version`` printed."""

    major: int
    minor: int
    patch: int
    raw: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.raw or f"v{self.major}.{self.minor}.{self.patch}"


# The first helm with --take-ownership on install and upgrade.
TAKE_OWNERSHIP_SINCE = HelmVersion(3, 17, 0)
# The first Kubernetes whose API server always validates fields itself (ServerSideFieldValidation GA, its gate
# locked on): there helm's own OpenAPI check is skipped anyway (see Helm.server_validates).
SERVER_VALIDATES_SINCE = (1, 27)


@dataclass(frozen=True)
class PostRenderer:
    """How helm invokes helmdeck's post-renderer.

    helm 3 takes an executable path (``executable``); helm 4 takes the name of
    an installed ``postrenderer/v1`` plugin (``plugin_name``) found in
    ``plugins_dir``, which becomes ``HELM_PLUGINS`` for that run only (never the
    user's plugin directory). ``args`` go to ``--post-renderer-args``.
    """

    executable: Path | None = None
    plugin_name: str | None = None
    plugins_dir: Path | None = None
    args: tuple[str, ...] = ()

    def flags(self, major: int) -> list[str]:
        """The helm flags for a helm of this major version."""
        target = self.plugin_name if major >= 4 else (str(self.executable) if self.executable else None)
        if target is None:
            return []
        out = ["--post-renderer", target]
        for arg in self.args:
            out += ["--post-renderer-args", arg]
        return out

    def env(self, major: int) -> dict[str, str]:
        return {"HELM_PLUGINS": str(self.plugins_dir)} if major >= 4 and self.plugins_dir else {}


@dataclass(frozen=True)
class ActionOptions:
    """What every helm action's options have, after Flux's action specs; ``timeout`` in seconds."""

    timeout: float = 300.0
    wait: bool = True
    disable_hooks: bool = False
    kube_as_user: str = ""  # the user helm impersonates (spec.serviceAccountName), "" for none
    # Flux's spec.waitStrategy.name: "legacy" waits as helm 3 did (helm 4's --wait=legacy); "poller" or "" is
    # helm 4's kstatus watcher (Flux's poller: helm-controller internal/action/wait.go getWaitStrategy). helm 3
    # has only its own (legacy) wait.
    wait_strategy: str = ""
    # Why this action needs helm 4 (the package field asking for what only helm 4 does), "" when it does not:
    # helm 3 refuses the action with it (HelmTooOld) rather than act otherwise.
    needs_helm4: str = ""


@dataclass(frozen=True)
class ApplyOptions(ActionOptions):
    """How an action that applies objects applies them (install, upgrade, rollback): helm 4's ``--server-side``
    (``server_side``: None leaves helm's own default) and ``--force-conflicts`` (taking over fields another
    manager set; helm 4 refuses it with client-side apply). helm 3 has neither (its three-way merge takes fields
    over anyway): both are dropped there."""

    server_side: bool | None = None
    force_conflicts: bool = False


@dataclass(frozen=True)
class UninstallOptions(ActionOptions):
    """``helm uninstall`` options, after Flux's ``spec.uninstall``."""

    keep_history: bool = False
    cascade: str = ""  # --cascade (background, foreground, orphan); "" is helm's own, background


@dataclass(frozen=True)
class RollbackOptions(ApplyOptions):
    """``helm rollback`` options, after Flux's ``spec.rollback``.

    ``recreate`` maps to helm 3's ``--recreate-pods``; helm 4 has no such flag
    and it is dropped there.
    """

    wait_for_jobs: bool = False
    force: bool = False
    recreate: bool = False
    cleanup_on_fail: bool = False
    max_history: int | None = None


@dataclass(frozen=True)
class ReleaseOptions(ApplyOptions):
    """What install and upgrade options share: they take a chart, values, labels and a post-renderer."""

    wait_for_jobs: bool = False
    create_namespace: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    post_renderer: PostRenderer | None = None
    skip_crds: bool = False  # the CRD policy (engine.helm.crds.helm_skips)
    # Adopt existing objects helm does not own (--take-ownership), as Flux's helm-controller does unless
    # disableTakeOwnership (internal/action/install.go NewInstall, upgrade.go NewUpgrade); helm before 3.17
    # has no such flag and refuses them, as before.
    take_ownership: bool = False


@dataclass(frozen=True)
class InstallOptions(ReleaseOptions):
    """``helm install`` options, after Flux's ``spec.install``."""

    replace: bool = False


@dataclass(frozen=True)
class UpgradeOptions(ReleaseOptions):
    """``helm upgrade`` options, after Flux's ``spec.upgrade``.

    ``install=True`` adds ``--install`` (upgrade or install in one call).
    ``reuse_values`` is Flux's ``preserveValues``; ``reset_values`` makes helm
    use exactly the given values (helm otherwise reuses the previous release's
    values when none are given, as Flux avoids with ResetValues).
    """

    install: bool = False
    force: bool = False
    cleanup_on_fail: bool = False
    reuse_values: bool = False
    reset_values: bool = False
    max_history: int | None = None


# Each option field and the helm flags it becomes (``o``: the options, ``m``: helm's major version): the one
# mapping for every action. The post-renderer's flags come with its environment (_post_rendering).
_FLAGS: dict[str, Callable[[Any, int], list[str]]] = {
    "timeout": lambda o, m: ["--timeout", go_duration(o.timeout)],
    "install": lambda o, m: _flag("--install", o.install),
    "create_namespace": lambda o, m: _flag("--create-namespace", o.create_namespace and getattr(o, "install", True)),
    "wait": lambda o, m: _wait(o.wait, o.wait_strategy, m),
    "wait_strategy": lambda o, m: [],  # with "wait"
    "wait_for_jobs": lambda o, m: _flag("--wait-for-jobs", o.wait and o.wait_for_jobs),
    "force": lambda o, m: _flag("--force-replace" if m >= 4 else "--force", o.force),
    "recreate": lambda o, m: _flag("--recreate-pods", o.recreate and m < 4),
    "cleanup_on_fail": lambda o, m: _flag("--cleanup-on-fail", o.cleanup_on_fail),
    "reuse_values": lambda o, m: _flag("--reuse-values", o.reuse_values),
    "reset_values": lambda o, m: _flag("--reset-values", o.reset_values and not o.reuse_values),
    "disable_hooks": lambda o, m: _flag("--no-hooks", o.disable_hooks),
    "replace": lambda o, m: _flag("--replace", o.replace),
    "keep_history": lambda o, m: _flag("--keep-history", o.keep_history),
    "cascade": lambda o, m: ["--cascade", o.cascade] if o.cascade else [],
    "force_conflicts": lambda o, m: _flag("--force-conflicts", o.force_conflicts and m >= 4),
    "server_side": lambda o, m: [] if o.server_side is None or m < 4 else [f"--server-side={o.server_side}".lower()],
    "needs_helm4": lambda o, m: [],  # checked by _option_flags
    "max_history": lambda o, m: [] if o.max_history is None else ["--history-max", str(o.max_history)],
    "labels": lambda o, m: _labels(o.labels),
    "post_renderer": lambda o, m: [],
    "skip_crds": lambda o, m: _flag("--skip-crds", o.skip_crds),
    "take_ownership": lambda o, m: _flag("--take-ownership", o.take_ownership),
    "kube_as_user": lambda o, m: ["--kube-as-user", o.kube_as_user] if o.kube_as_user else [],
}


def _wait(wait: bool, strategy: str, major: int) -> list[str]:
    """helm's --wait: helm 4's ``legacy`` when asked, else its default watcher; helm 3's own wait."""
    if not wait:
        return []
    return ["--wait=legacy"] if strategy == "legacy" and major >= 4 else ["--wait"]


def _option_flags(opts: ActionOptions, major: int) -> list[str]:
    """The helm flags of an action's options, field by field (helm takes flags in any order). Raises HelmTooOld
    for options only helm 4 can follow (``needs_helm4``) on an older helm."""
    if opts.needs_helm4 and major < 4:
        raise HelmTooOld(f"{opts.needs_helm4}, which helm {major} cannot do: run helmdeck with helm 4 (--helm), or "
                         "leave the field out")
    return [flag for f in dataclasses.fields(opts) for flag in _FLAGS[f.name](opts, major)]


def go_duration(seconds: float) -> str:
    """Whole seconds as Go's ``time.Duration.String`` writes them (``1m30s``, ``5m0s``, ``1h0m0s``), which helm
    accepts and Flux's messages show."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
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
        self._detecting: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None  # one detection at once
        self._server_validates: bool | None = None

    # -- plumbing ----------------------------------------------------------
    def _resolve(self) -> str:
        path = shutil.which(self.binary)
        if path is None:
            raise HelmMissing(
                f"helm binary {self.binary!r} not found; install helm 3.13+ or pass --helm PATH",
                action="version",
            )
        return path

    async def _run(
        self, action: str, args: Sequence[str], timeout: float | None = None, env: Mapping[str, str] | None = None,
    ) -> str:
        """Run helm with ``args``; return stdout. Raises a typed HelmError on failure."""
        binary = self._resolve()
        env = {"GOGC": HELM_GOGC, **os.environ, **self.env, **(env or {})}
        check = BEFORE_SPAWN.get()
        if check is not None:
            check()
        try:
            proc = await asyncio.create_subprocess_exec(
                binary, *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                # Its own session: ctrl+c in the terminal reaches helmdeck, which decides when helm
                # stops (a graceful stop lets it finish), rather than cancelling helm mid-action.
                start_new_session=True,
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
            await _stop(proc)
            raise
        stdout = out.decode(errors="replace")
        stderr = err.decode(errors="replace")
        if proc.returncode != 0:
            raise classify(action, stderr + "\n" + stdout, proc.returncode or 1, stderr=stderr)
        return stdout

    async def version(self) -> HelmVersion:
        """Detect (once, however many passes start at once) the helm version; raises HelmMissing or
        HelmTooOld."""
        if self._version is not None:
            return self._version
        loop = asyncio.get_running_loop()
        if self._detecting is None or self._detecting[0] is not loop:  # a lock belongs to one event loop
            self._detecting = (loop, asyncio.Lock())
        async with self._detecting[1]:
            return await self._detect()

    async def _detect(self) -> HelmVersion:
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

    async def server_validates(self) -> bool:
        """Whether the target's API server validates fields itself (Kubernetes 1.27 or newer: its ``/version``,
        asked once per Helm and kept; False when it cannot be read, and asked again next time).

        Where it does, helm's client-side OpenAPI check decides nothing and only costs helm CPU (about 50 ms of
        a 170 ms install): helm's Build (helm v4 ``pkg/kube/client.go`` ``buildResourceList``, v3 ``Build``)
        asks kubectl's ``Factory.Validator`` (``k8s.io/kubectl/pkg/cmd/util/factory_client_access.go``) for
        a ``ParamVerifyingSchema`` (``pkg/validation/schema.go``), which fetches and parses the server's
        OpenAPI v3 document of each object's group version only to find that PATCH takes ``fieldValidation``
        (cli-runtime ``resource.NewQueryParamVerifierV3`` ``HasSupport``), and then validates nothing on
        the client. The server's check is unchanged by ``--disable-openapi-validation``: helm 4 applies with
        ``fieldValidation=Strict`` whatever the flag (``ClientCreateOption``/``ClientUpdateOption``
        defaults), helm 3 with the server's default (a warning). On an older server the client check is the
        only one, so the flag is not passed there."""
        if self._server_validates is None:
            self._server_validates = await asyncio.to_thread(_server_validates, self.target)
        return self._server_validates or False

    async def _validation(self) -> list[str]:
        """``--disable-openapi-validation`` where helm's client-side check is a no-op (:meth:`server_validates`)."""
        return ["--disable-openapi-validation"] if await self.server_validates() else []

    async def _major(self) -> int:
        return (await self.version()).major

    # -- actions -----------------------------------------------------------
    async def install(
        self, release: str, namespace: str, chart: Path, values: Mapping[str, Any],
        options: InstallOptions | None = None,
    ) -> dict[str, Any]:
        """``helm install``; returns helm's JSON view of the release.

        Raises a HelmError subclass; the release may still have been written
        (read storage to know).
        """
        return await self._release("install", release, namespace, chart, values, options or InstallOptions())

    async def upgrade(
        self, release: str, namespace: str, chart: Path, values: Mapping[str, Any],
        options: UpgradeOptions | None = None,
    ) -> dict[str, Any]:
        """``helm upgrade`` (``--install`` when asked); as :meth:`install`."""
        return await self._release("upgrade", release, namespace, chart, values, options or UpgradeOptions())

    async def _release(
        self, action: str, release: str, namespace: str, chart: Path, values: Mapping[str, Any],
        opts: ReleaseOptions,
    ) -> dict[str, Any]:
        """What install and upgrade share: the chart, the values file, the post-renderer, helm's JSON."""
        major = await self._major()
        if opts.take_ownership and await self.version() < TAKE_OWNERSHIP_SINCE:
            opts = dataclasses.replace(opts, take_ownership=False)
        args = [action, release, str(chart), *self._common(namespace), "--output", "json",
                *_option_flags(opts, major), *await self._validation()]
        with _post_rendering(args, opts.post_renderer, major) as (args, env), _values_file(values) as vf:
            out = await self._run(action, [*args, "--values", str(vf)], opts.timeout + _PROCESS_GRACE, env)
        return _json_object(out)

    async def rollback(
        self,
        release: str,
        namespace: str,
        revision: int = 0,
        options: RollbackOptions | None = None,
    ) -> None:
        """``helm rollback`` to ``revision`` (0 = the previous one). Raises HelmError."""
        opts = options or RollbackOptions()
        args = ["rollback", release, str(revision), *self._common(namespace),
                *_option_flags(opts, await self._major())]
        await self._run("rollback", args, opts.timeout + _PROCESS_GRACE)

    async def uninstall(self, release: str, namespace: str, options: UninstallOptions | None = None) -> None:
        """``helm uninstall``. Raises ReleaseNotFound when there is no such release."""
        opts = options or UninstallOptions()
        args = ["uninstall", release, *self._common(namespace), *_option_flags(opts, await self._major())]
        await self._run("uninstall", args, opts.timeout + _PROCESS_GRACE)

    async def test(
        self, release: str, namespace: str, *, timeout: float = 300.0, filters: Sequence[str] = (),
        kube_as_user: str = "",
    ) -> str:
        """``helm test``; ``filters`` are helm's ``name=x`` / ``!name=x``; ``kube_as_user`` the user to
        impersonate ("" none). Returns helm's output.

        Raises HelmError when a test fails or times out (storage records the
        hooks' phases either way).
        """
        args = ["test", release, *self._common(namespace), "--timeout", go_duration(timeout)]
        if filters:
            args += ["--filter", ",".join(filters)]
        args += _FLAGS["kube_as_user"](ActionOptions(kube_as_user=kube_as_user), 0)
        return await self._run("test", args, timeout + _PROCESS_GRACE)

    async def template(
        self,
        release: str,
        namespace: str,
        chart: Path,
        values: Mapping[str, Any],
        *,
        post_renderer: PostRenderer | None = None,
        kube_version: str | None = None,
        api_versions: Sequence[str] = (),
        is_upgrade: bool = False,
    ) -> str:
        """``helm template`` (offline render); returns the manifests. Raises RenderError."""
        major = await self._major()
        args = ["template", release, str(chart), "--namespace", namespace]
        if kube_version:
            args += ["--kube-version", kube_version]
        for api in api_versions:
            args += ["--api-versions", api]
        args += _flag("--is-upgrade", is_upgrade)
        with _post_rendering(args, post_renderer, major) as (args, env), _values_file(values) as vf:
            return await self._run("template", [*args, "--values", str(vf)], 120, env)

    async def dry_run(
        self, release: str, namespace: str, chart: Path, values: Mapping[str, Any], *,
        post_renderer: PostRenderer | None = None, kube_as_user: str = "",
    ) -> dict[str, Any]:
        """``helm upgrade --install --dry-run=server -o json``: the release helm would make, rendered as it
        would act (an install when the release is absent or uninstalled, else an upgrade: helm decides, from
        storage, as the real action does), with ``lookup`` reading the live objects. Returns helm's JSON view
        of the release (``manifest``, ``hooks``, ``info``...); nothing is stored. helm 3.13+ and helm 4 take
        the flag the same way. Raises RenderError (and other HelmError subclasses)."""
        major = await self._major()
        args = ["upgrade", release, str(chart), "--install", "--dry-run=server", *self._common(namespace),
                "--output", "json", *_FLAGS["kube_as_user"](ActionOptions(kube_as_user=kube_as_user), major),
                *await self._validation()]
        with _post_rendering(args, post_renderer, major) as (args, env), _values_file(values) as vf:
            return _json_object(await self._run("template", [*args, "--values", str(vf)], 120, env))

    async def history(self, release: str, namespace: str) -> list[dict[str, Any]]:
        """``helm history -o json``: one dict per revision, oldest first."""
        out = await self._run("history", ["history", release, *self._common(namespace), "--output", "json"], 60)
        data = json.loads(out or "[]")
        return data if isinstance(data, list) else []

    async def status(self, release: str, namespace: str) -> dict[str, Any]:
        """``helm status -o json``. Raises ReleaseNotFound."""
        out = await self._run("status", ["status", release, *self._common(namespace), "--output", "json"], 60)
        return _json_object(out)


def _server_validates(target: KubeTarget) -> bool | None:
    """:func:`validates_fields` of ``target``'s API server (its ``/version``); None when it cannot be read."""
    try:
        return validates_fields(get_json(api_client(target), "/version"))
    except (KubeConfigError, ApiException, OSError, ValueError, urllib3.exceptions.HTTPError):
        return None


def validates_fields(version: Mapping[str, Any]) -> bool:
    """Whether an API server of this ``/version`` document (``major``, ``minor``: strings a vendor may suffix,
    ``"28+"``) is Kubernetes :data:`SERVER_VALIDATES_SINCE` or newer. Raises ValueError when either is not a
    number."""
    major, minor = (int(re.sub(r"\D", "", str(version.get(key, ""))) or "x") for key in ("major", "minor"))
    return (major, minor) >= SERVER_VALIDATES_SINCE


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Stop helm and what it started (its session's process group): SIGTERM first, so helm records the
    release failed as it does on ctrl+c, then SIGKILL after :data:`STOP_GRACE` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # start_new_session: helm leads its own group
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE)
            return
        except TimeoutError:
            continue


@contextlib.contextmanager
def _post_rendering(args: list[str], renderer: PostRenderer | None,
                    major: int) -> Iterator[tuple[list[str], dict[str, str]]]:
    """``args`` plus the post-renderer flags, and the environment the run needs (helm 4's HELM_PLUGINS).

    helm 4 drops a failing post-renderer plugin's stderr (it says only "exited with error") and helm 3
    puts it after its "Error:" line, so the post-renderer also writes its message to a private file
    named in ``ERRORS_ENV``; a HelmError raised inside the block gets that message added."""
    if renderer is None:
        yield args, {}
        return
    args, env = [*args, *renderer.flags(major)], renderer.env(major)
    fd, name = tempfile.mkstemp(prefix=f"postrender-{os.getpid()}-", suffix=".txt", dir=values_dir())
    os.close(fd)
    path = Path(name)
    try:
        yield args, {**env, ERRORS_ENV: name}
    except HelmError as exc:
        detail = path.read_text(errors="replace").strip()
        if not detail:
            raise
        raise type(exc)(f"{exc.message}: {detail}", action=exc.action, tail=(*exc.tail, detail),
                        returncode=exc.returncode) from None
    finally:
        path.unlink(missing_ok=True)


def _flag(flag: str, on: bool) -> list[str]:
    return [flag] if on else []


def _labels(labels: Mapping[str, str]) -> list[str]:
    return ["--labels", ",".join(f"{k}={v}" for k, v in sorted(labels.items()))] if labels else []


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


def values_dir() -> Path:
    """helmdeck's private folder (mode 0700) for values files: ``$XDG_RUNTIME_DIR/helmdeck``, else
    ``<tmp>/helmdeck-<uid>``. Files a killed helmdeck left behind are removed on first use."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / "helmdeck" if runtime else Path(tempfile.gettempdir()) / f"helmdeck-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise HelmError(f"{folder} belongs to another user; set XDG_RUNTIME_DIR to a private folder")
    folder.chmod(0o700)
    if folder not in _SWEPT:
        _SWEPT.add(folder)
        for stale in folder.glob("values-*.yaml"):
            pid = stale.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                stale.unlink(missing_ok=True)  # left by a killed helmdeck: may hold secrets
    return folder


_SWEPT: set[Path] = set()


@contextlib.contextmanager
def _values_file(values: Mapping[str, Any]) -> Iterator[Path]:
    """A 0600 YAML file holding ``values`` in :func:`values_dir`, removed on exit."""
    fd, name = tempfile.mkstemp(prefix=f"values-{os.getpid()}-", suffix=".yaml", dir=values_dir())
    path = Path(name)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.dump(dict(values), fh, Dumper=Dumper, sort_keys=True)
        yield path
    finally:
        path.unlink(missing_ok=True)


__all__ = [
    "ActionOptions",
    "Helm",
    "HelmError",
    "HelmVersion",
    "InstallOptions",
    "PostRenderer",
    "ReleaseOptions",
    "RollbackOptions",
    "UninstallOptions",
    "UpgradeOptions",
    "go_duration",
]
