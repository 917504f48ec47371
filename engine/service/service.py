"""The release service: smart upgrade, render, delete, cleanup, monitors, maintenance.

A port of Deckhouse's nelm release ``Service`` (see DESIGN.md, "Release
service") onto the helm CLI, with helmdeck's additions: it decides with the
reconcile loop's decision (spec first: an unchanged spec renders nothing),
takes packages through the resolution stage and helm options from the one
mapping, renders are cached by what they depend on, and monitors are driven
by shared watches instead of a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import wire
from engine.base.fields import PackageError
from engine.helm import Helm, PostRenderer, ReleaseNotFound, UninstallOptions
from engine.helm.crds import prepare_crds
from engine.helm.kustomize import KustomizeMissing
from engine.helm.postrender_plugin import PostRendererLayout, install
from engine.kube.client import impersonating
from engine.kube.discovery import Discovery
from engine.monitor.comparison import recorded_manifest
from engine.monitor.monitor import expected_objects
from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.monitor.watch import WatchHub
from engine.package.model import PackageSpec
from engine.reconcile.options import kube_user, upgrade_options
from engine.reconcile.state import IN_SYNC, content_state, in_maintenance
from engine.resolve.release import PostRenderSettings, ResolvedRelease, crd_labels, post_render_settings, resolve
from engine.resolve.values import ValuesFrom
from engine.service.manifest_reads import ManifestReads
from engine.service.monitors import AbsentCallback, MonitorRegistry, StatusCallback
from engine.service.records import Driver, ReleaseRecord, ReleaseStore
from engine.service.render import (
    RenderCache,
    Rendered,
    RenderKey,
    helmdeck_version,
    manifest_checksum,
)
from engine.service.types import CleanupReport, MaintenanceState, PackageNotHelm, UpgradeAction, UpgradeResult
from engine.sources.chart import is_chart
from engine.storage.codec import StorageDecodeError

log = logging.getLogger(__name__)

Key = tuple[str, str]


class ReleaseService:
    """Helm release lifecycle for packages, as Deckhouse's nelm ``Service``.

    ``helm`` runs every action; ``api`` (same cluster) reads release
    storage, discovery and watches. ``on_absent(namespace, name)`` is called
    once when a monitor finds resources of the release missing, and not
    again until :meth:`upgrade` of that release has run (the runtime should
    schedule one reconcile of the package). ``on_status(namespace, name,
    status)`` is called whenever what a monitor shows changes. Both run on
    the event loop of the service's first async call (see
    :mod:`engine.service.monitors`).

    ``latest(namespace, name)`` reads a release's latest revision; by default
    the service reads storage itself (labels only), an engine passes its
    observer's view so the latest revision is read one way. ``identity(namespace, name)``
    (an attribute) is the user a release's monitor reads as ("" helmdeck's own; a package's ServiceAccount).

    ``namespaces`` limits :meth:`cleanup` to those namespaces (None: all).
    ``driver`` is helm's storage driver. ``post_renderer`` defaults to the
    layout installed in helmdeck's cache directory on first use. ``values_from`` is the resolution's
    valuesFrom hook (:mod:`engine.runtime.drive.values_objects`: objects read beforehand).
    ``server_render`` False renders offline (``helm template``: no cluster, ``lookup`` finds nothing).
    """

    def __init__(
        self,
        helm: Helm,
        api: client.ApiClient,
        *,
        on_absent: AbsentCallback | None = None,
        on_status: StatusCallback | None = None,
        namespaces: Sequence[str] | None = None,
        driver: Driver = "secret",
        post_renderer: PostRendererLayout | None = None,
        render_cache_size: int = 1024,
        monitor_sync_timeout: float = 10.0,
        watch_timeout: int = 300,
        latest: Callable[[str, str], ReleaseRecord | None] | None = None,
        values_from: ValuesFrom | None = None,
        server_render: bool = True,
    ):
        self.helm = helm
        self._api = api
        self.values_from = values_from
        self.namespaces = list(namespaces) if namespaces else None
        self._monitored: dict[Key, int] = {}  # revision each monitor was built from
        self.render_cache = RenderCache(render_cache_size)
        self._store = ReleaseStore(api, driver)
        self._manifests = ManifestReads(self._store.manifests)
        self._latest_view = latest
        self._discovery = Discovery(api)
        self._monitors = MonitorRegistry(
            WatchHub(api, watch_timeout=watch_timeout), on_absent, on_status,
            hub_as=lambda user: WatchHub(impersonating(api, user), watch_timeout=watch_timeout))
        # The user a release's monitor reads as ("" helmdeck's own): the engine's controller sets it.
        self.identity: Callable[[str, str], str] | None = None
        self._layout = post_renderer
        self._sync_timeout = monitor_sync_timeout
        self._locks: dict[Key, asyncio.Lock] = {}
        self._monitor_locks: dict[Key, asyncio.Lock] = {}
        self._server_render = server_render

    def notify_absent(self, callback: AbsentCallback) -> None:
        """Have the monitors call ``callback(namespace, name)`` when a release's resources are absent (the
        engine's controller, built after this service, queues the package)."""
        self._monitors.on_absent = callback

    # -- upgrade ----------------------------------------------------------------------
    async def upgrade(
        self, namespace: str, package: PackageSpec, *, release_labels: Mapping[str, str] | None = None,
    ) -> UpgradeResult:
        """Install or upgrade ``package``'s release in ``namespace`` when, and only when, needed.

        As nelm's ``Service.Upgrade``, deciding with the reconcile loop's own
        decision (:func:`engine.reconcile.state.content_state`): in maintenance
        (``NoResourceReconciliation``) with the release deployed and already
        marked ``maintenance=true``, drop the monitor and return (nothing
        rendered). Otherwise run ``helm upgrade --install`` when the release is
        absent, its last status is not deployed, its maintenance label differs
        from the package's mode, its monitor reports absent resources, or its
        spec digest changed and the render's manifest checksum differs from
        its label. An unchanged spec digest decides without rendering (spec
        first, as Flux). Then start or refresh the monitor (drop it in
        maintenance). Entering and leaving maintenance each cost exactly one
        upgrade: the maintenance label changes the render.

        ``release_labels`` are added to the release labels of an upgrade
        (e.g. the runtime's package set; helmdeck's own keys win); they do not
        decide whether to upgrade, and helm carries them over otherwise.

        Raises PackageNotHelm (no chart), PackageError (chart or values
        unreadable), HelmError subclasses (render or upgrade failed; the
        release may still have been written), ApiException (storage or
        discovery unreadable). Do not hold :meth:`pause_monitor` around
        this call: the service keeps its own monitor quiet while helm runs.
        """
        self._monitors.bind_loop(asyncio.get_running_loop())
        _require_chart(package.chart_path)
        key = (namespace, package.release_name)
        mode = MaintenanceState(package.maintenance)
        async with self._lock(key):
            reported = self._monitors.take_report(key)
            resolved = await self._resolve(package)
            latest = await self._latest(key)
            if latest is not None and in_maintenance(package.maintenance, latest.status, dict(latest.labels)):
                self._monitors.remove(key)
                return UpgradeResult(*key, "maintenance", "in maintenance: resources are not reconciled",
                                     latest.label(wire.MANIFEST_CHECKSUM) or "", latest.version)
            if mode is MaintenanceState.Managed and latest is not None and latest.status == "deployed" \
                    and not self._monitors.has(key):
                # A fresh service knows nothing yet: look before deciding, so absent resources count now.
                await self._start_monitor(key, latest.version)
            rendered: Rendered | None = None
            reason = self._reason(key, latest, resolved, None, reported)
            if reason is _RENDER:
                rendered = await self._render(namespace, resolved, latest)
                reason = self._reason(key, latest, resolved, rendered.checksum, reported)
            if reason is None:
                stored = latest.label(wire.MANIFEST_CHECKSUM) if latest is not None else None
                checksum = rendered.checksum if rendered else (stored or "")
                return UpgradeResult(*key, "none", "unchanged", checksum, latest.version if latest else None)
            rendered = rendered or await self._render(namespace, resolved, latest)
            action: UpgradeAction = "install" if latest is None or latest.status == "uninstalled" else "upgrade"
            # The apply method decides whether conflicts are forced, by the one rule of install and upgrade
            # (engine.reconcile.options.server_side): leaving maintenance, the package wins over fields edited by
            # hand meanwhile, server-side by force, client-side by helm's three-way merge.
            method = None if action == "install" or latest is None else \
                await asyncio.to_thread(self._store.apply_method, latest)
            await self._helm_upgrade(key, resolved, rendered.checksum, release_labels or {}, method=method)
            after = await asyncio.to_thread(self._store.latest, *key)  # what helm just wrote: read storage
            if mode is MaintenanceState.NoResourceReconciliation:
                self._monitors.remove(key)
            elif after is not None:
                await self._start_monitor(key, after.version)
            log.info("%s %s/%s: %s", action, namespace, package.release_name, reason)
            return UpgradeResult(*key, action, str(reason), rendered.checksum, after.version if after else None)

    def _reason(
        self, key: Key, latest: ReleaseRecord | None, resolved: ResolvedRelease, checksum: str | None,
        reported: bool,
    ) -> str | object | None:
        """Why the release needs an upgrade, None when it does not, or ``_RENDER`` when only a render
        can tell (the spec changed): the reconcile loop's decision on what storage holds now."""
        if latest is None or latest.status == "uninstalled":
            return "release absent"
        if latest.status != "deployed":
            return f"last status is {latest.status}"
        absent = tuple(r.ref for r in self._monitors.absent(key)) if resolved.spec.restores_absent else ()
        if not absent and reported and resolved.spec.restores_absent:
            absent = ("reported by the monitor",)
        verdict = content_state(release_labels=dict(latest.labels), maintenance=resolved.spec.maintenance,
                                spec_digest=resolved.spec_digest, checksum=checksum, absent=absent,
                                smart=resolved.spec.smart_upgrade)
        if verdict.render:
            return _RENDER
        return None if verdict.status == IN_SYNC else verdict.reason

    async def _helm_upgrade(
        self, key: Key, resolved: ResolvedRelease, checksum: str, extra: Mapping[str, str],
        *, method: str | None,
    ) -> None:
        """``helm upgrade --install``; ``method``: the latest revision's apply method, None for an install."""
        install = method is None
        package = resolved.spec
        release_labels = wire.release_labels(
            package=package.name, spec_digest=resolved.spec_digest, maintenance=bool(package.maintenance),
            package_set=extra.get(wire.PACKAGE_SET), manifest_checksum=checksum, extra=dict(extra),
            post_render_digest=package.rendering.digest)
        renderer = await self._renderer(resolved.spec, resolved.post_render)
        opts = upgrade_options(package, labels=release_labels, post_renderer=renderer,
                               method=method, install=True)
        if not install:
            opts = dataclasses.replace(opts, create_namespace=False)
        await prepare_crds(self._api, resolved.chart.path, package.crds.for_action(install), install=install,
                           timeout=opts.timeout, values=resolved.values, as_user=opts.kube_as_user,
                           labels=crd_labels(package))
        with self._monitors.quiet(key):
            await self.helm.upgrade(key[1], key[0], resolved.chart.path, resolved.values, opts)

    async def _start_monitor(self, key: Key, revision: int) -> None:
        """Monitor ``revision``'s manifest; a failure is logged, never raised (the next upgrade retries).
        Concurrent starts for one release (start-up and a first pass) build it once."""
        async with self._monitor_locks.setdefault(key, asyncio.Lock()):
            if self._monitored.get(key) == revision and self._monitors.has(key):
                return
            await self._build_monitor(key, revision)

    async def _build_monitor(self, key: Key, revision: int) -> None:
        try:
            manifest = await self._manifests.manifest(key[0], key[1], revision)
            objects = await asyncio.to_thread(expected_objects, manifest, key[0], self._discovery)
        except (ApiException, StorageDecodeError, KeyError, yaml.YAMLError) as exc:
            log.warning("cannot monitor %s/%s revision %d: %s", key[0], key[1], revision, exc)
            return
        monitor = self._monitors.replace(key, objects, self.identity(*key) if self.identity else "")
        self._monitored[key] = revision
        # Wait on the loop, not in a worker thread: hundreds of monitors starting at once must not
        # hold the thread pool every other blocking call (resolution, storage reads) needs.
        deadline = time.monotonic() + self._sync_timeout
        while not monitor.synced:
            if time.monotonic() >= deadline or not monitor.listing():
                log.warning("monitor of %s/%s not synced after %.0fs", *key, self._sync_timeout)
                break
            await asyncio.sleep(0.02)
        self._monitors.announce(key)

    # -- render -----------------------------------------------------------------------
    async def render(self, namespace: str, package: PackageSpec) -> str:
        """The manifests :meth:`upgrade` would apply (post-rendered; the objects, then the hooks), from the
        cache when fresh (:mod:`engine.service.render`).

        Rendered as helm would act: an install dry run for a release that is
        not installed (``.Release.IsInstall`` true), an upgrade dry run for
        one that is, on the server (``helm upgrade --install
        --dry-run=server``, as the package's ServiceAccount when it names one)
        so ``lookup`` sees the live objects, as helm-diff does. A service
        made with ``server_render=False`` (no cluster) renders offline
        (``helm template``, ``--is-upgrade`` for an installed release) and the
        manifest then opens with a comment document saying so.

        As nelm's ``Service.Render``. Raises PackageNotHelm, PackageError,
        RenderError (and other HelmError subclasses).
        """
        _require_chart(package.chart_path)
        resolved = await self._resolve(package)
        rendered = await self._render(namespace, resolved, await self._latest((namespace, package.release_name)))
        return OFFLINE_NOTE + rendered.manifest if rendered.offline else rendered.manifest

    async def _resolve(self, package: PackageSpec) -> ResolvedRelease:
        return await asyncio.to_thread(functools.partial(resolve, package, values_from=self.values_from))

    async def _render(self, namespace: str, resolved: ResolvedRelease, latest: ReleaseRecord | None) -> Rendered:
        """The render :meth:`render` describes, for the release as ``latest`` (storage's view) has it."""
        package = resolved.spec
        installed = latest is not None and latest.status != "uninstalled"  # as helm upgrade --install decides
        user = kube_user(package)
        key = RenderKey(resolved.chart.digest, resolved.values_digest, helmdeck_version(),
                        str(await self.helm.version()),
                        namespace, package.release_name, resolved.post_render.stamp,
                        resolved.post_render.rendering.canonical, latest.version if installed and latest else None,
                        self._server_render, user)
        cached = self.render_cache.get(key)
        if cached is not None:
            return cached
        renderer = await self._renderer(resolved.spec, resolved.post_render)
        if self._server_render:
            release = await self.helm.dry_run(package.release_name, namespace, resolved.chart.path, resolved.values,
                                              post_renderer=renderer, kube_as_user=user)
            manifest = recorded_manifest(release)
        else:
            manifest = await self.helm.template(package.release_name, namespace, resolved.chart.path,
                                                resolved.values, post_renderer=renderer, is_upgrade=installed)
        rendered = Rendered(manifest, manifest_checksum(manifest), offline=not self._server_render)
        self.render_cache.put(key, rendered)
        return rendered

    async def _post_renderer(self) -> PostRendererLayout:
        if self._layout is None:
            self._layout = await asyncio.to_thread(install)
        return self._layout

    async def _renderer(self, package: PackageSpec, settings: PostRenderSettings) -> PostRenderer:
        """The one post-renderer of render, upgrade and the reconcile actions (its config file is written
        off the event loop). Raises PackageError on ``spec.postRenderers`` when kustomize is absent."""
        layout = await self._post_renderer()
        try:
            return await asyncio.to_thread(layout.renderer, settings.labels, settings.config)
        except KustomizeMissing as exc:
            raise PackageError(package.file, "spec.postRenderers", exc.message) from None

    # -- delete and cleanup ---------------------------------------------------------------
    async def delete(self, namespace: str, name: str, options: UninstallOptions | None = None) -> bool:
        """Uninstall release ``namespace/name`` and drop its monitor.

        Idempotent, unlike nelm's ``Delete``: a missing release is success.
        Returns True when helm uninstalled something, False when there was no
        release. Raises HelmError subclasses when the uninstall fails.
        """
        self._monitors.bind_loop(asyncio.get_running_loop())
        key = (namespace, name)
        async with self._lock(key):
            self._monitors.remove(key)
            try:
                await self.helm.uninstall(name, namespace, options)
            except ReleaseNotFound:
                return False
            return True

    async def cleanup(
        self, keep: Collection[str], ignore_namespaces: Collection[str] = (), *, dry_run: bool = False,
        selector: Mapping[str, str] | None = None, order: Callable[[list[Key]], list[Key]] | None = None,
        only: Collection[str] | None = None,
    ) -> CleanupReport:
        """Uninstall helmdeck-managed releases that no longer belong, as nelm's ``Service.Cleanup``.

        Lists releases whose storage carries ``wire.MANAGED_BY=helmdeck``
        (server-side label selector, in the service's namespaces or all) and
        uninstalls each whose ``<namespace>/<release-name>`` is not in
        ``keep`` and whose namespace is not in ``ignore_namespaces``.
        Releases not managed by helmdeck are never listed, so never touched;
        ``selector`` narrows the set further (e.g. to one package set's releases).
        One failure does not stop the rest; a dry run reports the same set
        as removed without uninstalling. ``order`` sorts the releases (keys) before
        they are removed one at a time (the engine's: dependents first). ``only``, when given, is the
        refs an operator confirmed: any other is skipped ("not confirmed"). Raises ApiException only when
        storage cannot be listed.
        """
        records = await asyncio.to_thread(self._store.managed, self.namespaces, selector)
        if order is not None:
            by_key = {(rec.namespace, rec.name): rec for rec in records}
            records = [by_key[key] for key in order(list(by_key))]
        removed: list[str] = []
        failed: list[tuple[str, str]] = []
        skipped: list[tuple[str, str]] = []
        for rec in records:
            if rec.ref in keep:
                skipped.append((rec.ref, "kept"))
            elif rec.namespace in ignore_namespaces:
                skipped.append((rec.ref, "namespace ignored"))
            elif rec.status == "uninstalled":
                skipped.append((rec.ref, "already uninstalled"))
            elif only is not None and rec.ref not in only:
                skipped.append((rec.ref, "not confirmed (it became removable after the list was shown)"))
            elif dry_run:
                removed.append(rec.ref)
            else:
                try:
                    await self.delete(rec.namespace, rec.name)
                except Exception as exc:  # one release's failure must not stop the others
                    failed.append((rec.ref, getattr(exc, "message", None) or str(exc)))
                    log.warning("cleanup of %s failed: %s", rec.ref, exc)
                else:
                    removed.append(rec.ref)
        return CleanupReport(tuple(removed), tuple(failed), tuple(skipped), dry_run)

    # -- monitors ---------------------------------------------------------------------------
    def has_monitor(self, namespace: str, name: str) -> bool:
        """True when release ``namespace/name`` has a monitor (paused or not)."""
        return self._monitors.has((namespace, name))

    def pause_monitor(self, namespace: str, name: str) -> int:
        """Add one to the release's pause counter (nelm's ``PauseMonitor``); returns the count.

        A paused monitor reports nothing (no absence callback, status shows
        only "paused"). Each pause needs one :meth:`resume_monitor`.
        """
        return self._monitors.pause((namespace, name))

    def resume_monitor(self, namespace: str, name: str) -> int:
        """Take one from the pause counter, never below zero (nelm's ``ResumeMonitor``); returns the count.

        At zero the monitor checks again at once and reports what it finds.
        """
        return self._monitors.resume((namespace, name))

    @contextlib.contextmanager
    def monitor_paused(self, namespace: str, name: str) -> Iterator[None]:
        """Pause the release's monitor inside the block (for actions other than :meth:`upgrade`)."""
        self.pause_monitor(namespace, name)
        try:
            yield
        finally:
            self.resume_monitor(namespace, name)

    def remove_monitor(self, namespace: str, name: str) -> None:
        """Stop and drop the release's monitor; no-op when there is none (nelm's ``RemoveMonitor``)."""
        self._monitors.remove((namespace, name))

    def monitor_status(self, namespace: str, name: str) -> MonitorStatus:
        """What the release's monitor shows now (``off`` when it has none)."""
        return self._monitors.status((namespace, name))

    def stop_monitors(self, timeout: float = 5.0) -> bool:
        """Stop every monitor and end every watch thread (nelm's ``StopMonitors``).

        Blocks until the threads ended (up to ``timeout`` seconds each);
        returns True when all did. Later upgrades start monitors again.
        """
        return self._monitors.stop(timeout)

    # -- hooks for the reconcile runtime ----------------------------------------------------
    async def post_renderer_for(self, package: PackageSpec) -> PostRenderer:
        """The post-renderer :meth:`upgrade` uses for ``package`` (its own post-rendering, then its origin
        and maintenance labels)."""
        return await self._renderer(package, post_render_settings(package))

    async def checksum(self, namespace: str, package: PackageSpec) -> str:
        """The manifest checksum :meth:`upgrade` would store for ``package`` (cached render).

        Raises PackageNotHelm, PackageError, RenderError.
        """
        _require_chart(package.chart_path)
        resolved = await self._resolve(package)
        return (await self._render(namespace, resolved, await self._latest((namespace, package.release_name)))).checksum

    async def refresh_monitor(self, namespace: str, name: str) -> None:
        """Monitor the latest deployed revision of ``namespace/name`` (after an action outside
        :meth:`upgrade`); drop the monitor when the release is gone or not deployed. Never raises."""
        self._monitors.bind_loop(asyncio.get_running_loop())
        key = (namespace, name)
        try:
            latest = await self._latest(key)
        except ApiException as exc:
            log.warning("cannot read release %s/%s for its monitor: %s", namespace, name, exc)
            return
        if latest is None or latest.status != "deployed":
            self._monitors.remove(key)
            return
        if not self._monitors.has(key) or self._monitored.get(key) != latest.version:
            await self._start_monitor(key, latest.version)

    def take_absent_report(self, namespace: str, name: str) -> bool:
        """True when the monitor reported absent resources since the last call (clears the report,
        so the next absence reports again)."""
        return self._monitors.take_report((namespace, name))

    def absent(self, namespace: str, name: str) -> tuple[ResourceStatus, ...]:
        """Absent objects of the release's monitor (none while paused, unsynced or without a monitor)."""
        return self._monitors.absent((namespace, name))

    def quiet(self, namespace: str, name: str) -> contextlib.AbstractContextManager[None]:
        """No absence reports for the release inside (while an install or upgrade changes its objects)."""
        return self._monitors.quiet((namespace, name))

    async def _latest(self, key: Key) -> ReleaseRecord | None:
        if self._latest_view is not None:
            return self._latest_view(*key)
        return await asyncio.to_thread(self._store.latest, *key)

    def _lock(self, key: Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())


_RENDER = object()  # _reason's "render to decide"
# What an offline render opens with: a comment document (no object), so comparisons are unchanged.
OFFLINE_NOTE = ("# helmdeck: rendered offline (helm template, no cluster): lookup found no live object and "
                "the manifest may differ from what helm would apply\n---\n")


def _require_chart(path: Path) -> None:
    if not is_chart(path):
        raise PackageNotHelm(f"{path} holds no Helm chart (no Chart.yaml, not a .tgz)")
