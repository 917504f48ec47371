"""``helmdeck plan``: what a reconcile would do to every package, acting on nothing.

For each package, in dependency order (as ``helmfile show-dag``), the plan
gives the release state and the next action from the one decision
(:func:`engine.reconcile.state.determine_state` and
:func:`engine.reconcile.next_action.next_action`), why, and a summary of the
objects and hooks an install or upgrade would add, change or remove (the one
comparison, :mod:`engine.monitor.comparison`, that ``diff`` shows and the smart
upgrade's checksum digests). The request is made as a pass makes it: a spec
changed since the last attempt starts with fresh failure counters, so a stalled
package whose spec changed plans the upgrade the next pass runs. Spec first, as the
decision: an unchanged spec renders nothing; a changed one (or an install or
upgrade the state asks for) renders once, through the release service's
render cache. Drift is looked for only where the package enables it and the
release is otherwise in sync. A release of this package set that no package declares any more is
listed as ``uninstall`` (what ``reconcile --prune`` and ``cleanup`` remove). A HelmRelease whose object the
cluster holds is Flux's: it is planned as Flux's state detection reads it (:func:`engine.reconcile.state.flux_state`,
chart and values, what the app shows too), so a release Flux deployed shows no false change. The plan holds object
references and counts, never values: nothing secret is in it.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from engine.base import wire
from engine.base.fields import PackageError
from engine.base.masking import Masker
from engine.helm import HelmError
from engine.monitor import comparison
from engine.package.identity import storage_apart_reason
from engine.package.load import said_of
from engine.package.model import PackageSpec
from engine.package.order import dependency_order
from engine.reconcile import next_action as na
from engine.reconcile import state as st
from engine.reconcile.atomic import AtomicRelease, helm_refusal
from engine.reconcile.errors import ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked
from engine.reconcile.request import Request
from engine.reconcile.status import EngineStatus
from engine.resolve.release import resolve
from engine.runtime.diff import manifest_diff, unified
from engine.runtime.drive.controller import PackageController
from engine.runtime.ledger.book import BadPackageFiles, ReleaseBook
from engine.runtime.ledger.gate import ActionGate
from engine.runtime.state import CleanupItem, ReleaseKey
from engine.service import ReleaseService
from engine.service.types import PackageNotHelm
from engine.sources import SourceError
from engine.storage.observation import Observation
from engine.storage.observer import Observer


class Engine(Protocol):
    """What a plan reads of the engine (the facade is one): its book, gate, packages, controller, release
    service and observer, the stored manifest (with its hooks) and values of a revision, its masker, the
    folder's skipped objects and left-out Flux fields, a manifest diff and cleanup's dry run. A port, so that the facade
    can offer ``plan()`` without this module importing it."""

    book: ReleaseBook
    gate: ActionGate
    controller: PackageController
    service: ReleaseService
    observer: Observer

    @property
    def package_errors(self) -> list[PackageError]: ...

    async def manifest(self, key: ReleaseKey, revision: int) -> str: ...

    async def recorded_manifest(self, key: ReleaseKey, revision: int) -> str: ...

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]: ...

    async def cleanup(self, *, dry_run: bool = False, ignore_namespaces: tuple[str, ...] = (),
                      confirmed: Collection[str] | None = None) -> list[CleanupItem]: ...

    masker: Masker

    @property
    def skipped(self) -> str: ...

    @property
    def left_out(self) -> tuple[str, ...]: ...

    async def diff_against(self, key: ReleaseKey, desired: str, *, reveal: bool = False) -> str: ...


UNINSTALL = na.UNINSTALL  # a release of this package set whose package is gone (prune, cleanup)
# What Flux's next reconcile does to a release it owns, by its state against the document (st.flux_state).
_FLUX_ACTIONS = {st.ABSENT: na.INSTALL, st.OUT_OF_SYNC: na.UPGRADE, st.FAILED: na.UPGRADE, st.LOCKED: "wait",
                 st.TARGET_CHANGED: na.UNINSTALL}


@dataclass(frozen=True)
class PackagePlan:
    """One package's line of the plan.

    ``file``: the file declaring the package (:attr:`PackageSpec.declared_in`: its name, or for ``--kustomize``
    its path in the repository). ``state``: the release state, or ``Suspended`` (the package is suspended:
    nothing is decided, no change counted). ``action``: the next action
    (``install``, ``upgrade``, ``test``, ``rollback``, ``uninstall-remediation``,
    ``unlock``, ``correct-drift``; ``uninstall`` for a release whose package is gone, or whose release target
    changed: then ``added`` is what the install after it adds), ``wait``
    (dependencies not Ready, or a lock not stale yet), ``stalled``, or None (nothing to do, or suspended).
    ``added``/``changed``/``removed``: object references (``Kind/namespace/name``)
    an install or upgrade would touch; ``drifted``: objects found drifted;
    ``rendered``: the objects were compared. ``error``: the package could not be planned.
    ``revision``, ``values_diff`` and ``manifest_diff``: the storage revision it would replace, and what would
    change in the values and manifest (unified diffs, Secret values masked as everywhere helmdeck shows them).
    """

    namespace: str
    release: str
    package: str
    file: str
    state: str
    action: str | None
    reasons: tuple[str, ...] = ()
    waiting_for: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    drifted: tuple[str, ...] = ()
    rendered: bool = False
    error: str = ""
    revision: int | None = None  # the helm storage revision it would replace (None: nothing deployed)
    values_diff: str = ""  # deployed -> desired values, unified, secrets masked ("" unchanged or unknown)
    manifest_diff: str = ""  # deployed -> desired manifest per object, unified, secrets masked

    @property
    def changes(self) -> bool:
        """Would a reconcile change something for this package (an action other than waiting)?"""
        return self.action not in (None, "wait", "stalled") and not self.error

    def objects_line(self) -> str:
        """``+1 added ~2 changed -0 removed`` (or the drifted objects), "" when no object is known to change."""
        if self.drifted:
            more = f" and {len(self.drifted) - 5} more" if len(self.drifted) > 5 else ""
            return f"drifted: {', '.join(self.drifted[:5])}{more}"
        if not (self.added or self.changed or self.removed):
            return "no object would change" if self.rendered else ""
        return f"+{len(self.added)} added ~{len(self.changed)} changed -{len(self.removed)} removed"

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["changes"] = self.changes
        return out


@dataclass(frozen=True)
class Plan:
    """Every package's plan (dependency order) and the package files that failed to load."""

    packages: tuple[PackagePlan, ...]
    errors: tuple[str, ...] = field(default=())
    skipped: str = ""  # the folder's objects of kinds helmdeck does not read, in one line
    warnings: tuple[str, ...] = ()  # Flux fields left out (--allow-unsupported)

    @property
    def changes(self) -> bool:
        return any(p.changes for p in self.packages)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(p.error for p in self.packages)

    def as_json(self) -> str:
        return json.dumps({"packages": [p.as_json() for p in self.packages], "errors": list(self.errors),
                           "skipped": self.skipped, "warnings": list(self.warnings),
                           "changes": self.changes}, indent=2)

    def markdown(self) -> str:
        """A pull-request comment: a summary table (release, action, why, revision it replaces), then a
        collapsed ``<details>`` per release that would change, with its values and manifest diffs (masked)."""
        n = sum(p.changes for p in self.packages)
        out = [f"### helmdeck plan: {n} of {len(self.packages)} release{'s' if len(self.packages) != 1 else ''} "
               "would change", "", "| Release | Action | Why | Replaces revision |", "|---|---|---|---|"]
        for p in self.packages:
            why = p.error or "; ".join(p.reasons)
            out.append(f"| `{p.namespace}/{p.release}` | {p.action or 'nothing'} | {_cell(why)} | "
                       f"{p.revision if p.revision is not None else '-'} |")
        for p in self.packages:
            if not (p.changes or p.error):
                continue
            out += ["", f"<details><summary><code>{p.namespace}/{p.release}</code>: {p.action or 'error'}</summary>",
                    ""]
            out += [f"- {_cell(r)}" for r in ((p.error,) if p.error else p.reasons)]
            if p.objects_line():
                out.append(f"- {p.objects_line()}")
            for title, body in (("Values", p.values_diff), ("Manifest", p.manifest_diff)):
                if body:
                    fence = "`" * max(3, _longest_backticks(body) + 1)
                    out += ["", f"{title} diff:", "", f"{fence}diff", body.rstrip("\n"), fence]
            out += ["", "</details>"]
        out += ["", *(f"> package error: {_cell(e)}" for e in self.errors)] if self.errors else []
        if self.skipped:
            out += ["", self.skipped]
        out += [f"> warning: {_cell(w)}" for w in self.warnings]
        return "\n".join(out) + "\n"

    def text(self) -> str:
        """One block per package: ``ns/release  State → action``, why, and the objects line."""
        lines = []
        for p in self.packages:
            action = p.action or "nothing to do"
            lines.append(f"{p.namespace}/{p.release} ({p.file})  {p.state} → {action}")
            for reason in ((p.error,) if p.error else p.reasons):  # a chart's fail message may run on
                lines.extend(f"    {line}".rstrip() for line in reason.splitlines() or [""])
            if p.objects_line():
                lines.append(f"    {p.objects_line()}")
            for body in (p.values_diff, p.manifest_diff):
                lines += [f"    {line}" for line in body.splitlines()]
        for err in self.errors:
            lines.append(f"package error: {err}")
        if self.skipped:
            lines.append(self.skipped)
        lines += [f"warning: {w}" for w in self.warnings]
        n = sum(p.changes for p in self.packages)
        lines.append(f"{n} of {len(self.packages)} package{'s' if len(self.packages) != 1 else ''} would change")
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """``text`` fit for a markdown table cell or list item: one line, pipes and HTML escaped."""
    return html.escape(" ".join(text.split())).replace("|", "\\|")


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


async def make_plan(engine: Engine) -> Plan:
    """The plan of every package of ``engine`` (started, reading storage; it acts on nothing)."""
    specs = dependency_order(engine.book.packages.values())
    plans = [await plan_package(engine, spec) for spec in specs]
    plans += await plan_removed(engine)
    return Plan(tuple(plans), tuple(str(e) for e in engine.package_errors), engine.skipped,
                engine.left_out)


async def plan_package(engine: Engine, spec: PackageSpec) -> PackagePlan:
    """One package's plan (see :class:`PackagePlan`); a failure is its ``error``, never raised."""
    base = PackagePlan(spec.release_namespace, spec.release_name, spec.name, spec.declared_in, st.UNKNOWN, None)
    suspended = engine.gate.suspension(spec.key)  # the gate's rule, as the queue and reconcile --once
    if suspended is not None:
        return _replace(base, state=st.SUSPENDED, reasons=(f"{suspended}: a reconcile leaves it as it is",))
    controller = engine.controller
    waiting = controller.holds.waiting(spec)
    try:
        await controller.locator.locate(spec)
        resolved = await asyncio.to_thread(functools.partial(resolve, spec, values_from=engine.service.values_from))
    except (PackageError, SourceError) as exc:
        return _replace(base, error=said_of(exc, spec))
    req = Request.from_resolved(resolved, engine.book.status(spec.key) or EngineStatus())
    AtomicRelease.reset_on_spec_change(req)  # as a pass: a changed spec starts afresh (no longer stalled)
    latest = engine.observer.latest(*spec.key)
    owned, message = await controller.flux.owns(spec)
    moved = engine.book.target_change(spec.key, spec) if not owned else None
    gone = (moved.previous, engine.observer.latest(*moved.previous, storage=moved.stored_in)) if moved is not None \
        else (spec.key, latest)  # the release an uninstall removes
    try:
        desired = None
        drifted: tuple[str, ...] = ()
        deployed_values = await _deployed_values(engine, latest)
        if owned:  # Flux acts, as its state detection reads the release (the app's STATE says the same)
            state = st.flux_state(req, latest)
            action, reasons = _FLUX_ACTIONS.get(state.status), [state.reason]
        elif moved is not None:  # as the pass: the release the package drove before goes first
            state, action = st.ReleaseState(st.TARGET_CHANGED, moved.why), na.UNINSTALL
            refused = storage_apart_reason(na.UNINSTALL, moved.previous, moved.stored_in) \
                or spec.helm_refusal(na.INSTALL)  # the uninstall, else the install after it
            reasons = [moved.why, *([refused] if refused else [])]
        else:
            state = st.determine_state(req, latest)
            if state.render:  # the spec changed: render once, as the decision does
                desired = await engine.service.render(spec.release_namespace, spec)
                req.manifest_checksum = await engine.service.checksum(spec.release_namespace, spec)
                state = st.determine_state(req, latest)
            detector = controller.detector_for(spec)  # as the package's ServiceAccount, if it names one
            if state.status == st.IN_SYNC and spec.drift_detection != "disabled" and latest is not None \
                    and detector is not None:
                deployed = await engine.manifest(spec.key, latest.version)
                items = await asyncio.to_thread(detector.detect, deployed, spec.release_namespace,
                                                spec.drift_ignore)
                drifted = tuple(i.ref for i in items)
                if drifted:
                    plural = "s" if len(drifted) != 1 else ""
                    state = st.ReleaseState(st.DRIFTED, f"{len(drifted)} object{plural} drifted")
            action, why = _action(req, state, latest, {o.version: o for o in engine.observer.history(*spec.key)})
            refused = helm_refusal(req, action) if action not in ("stalled", "wait") else None
            reasons = [*_reasons(req, state, latest, deployed_values), *why, *([refused] if refused else [])]
        objects: tuple[tuple[str, ...], ...] = ((), (), ())
        values_text = manifest_text = ""
        if action in (na.INSTALL, na.UPGRADE):
            if desired is None:
                desired = await engine.service.render(spec.release_namespace, spec)
            before = await engine.recorded_manifest(spec.key, latest.version) if latest else ""
            objects = comparison.changes(before, desired)
            manifest_text = await engine.diff_against(spec.key, desired)  # masked
            values_text = _values_diff(engine, deployed_values, resolved.values, resolved.secret_paths, latest)
        elif action == na.UNINSTALL:  # the release target changed: every object goes, then the new ones come
            desired = await engine.service.render(spec.release_namespace, spec)
            old_key, old = gone
            before = await engine.recorded_manifest(old_key, old.version) if old else ""
            objects = (comparison.changes("", desired)[0], (), comparison.changes(before, "")[2])
    except (PackageError, PackageNotHelm, HelmError) as exc:
        return _replace(base, error=said_of(exc, spec))
    if owned is not False:  # Flux applies the change, not helmdeck: said first
        reasons.insert(0, message)
    if waiting:
        reasons.insert(0, controller.holds.message(waiting))
        action = "wait" if action is not None else None
    # Stalled as status and the app say it (the pass that finds no retries left marks it so), not Failed.
    shown = st.STALLED if action == "stalled" else state.status
    return _replace(base, state=shown, action=action, reasons=tuple(reasons),
                    waiting_for=tuple(str(d) for d in waiting), added=objects[0], changed=objects[1],
                    removed=objects[2], drifted=drifted, rendered=desired is not None,
                    revision=latest.version if latest is not None else None, values_diff=values_text,
                    manifest_diff=manifest_text)


async def plan_removed(engine: Engine) -> list[PackagePlan]:
    """An ``uninstall`` line for every release of this package set that no package declares any more (what
    ``reconcile --prune`` and ``cleanup`` remove, found as ``cleanup --dry-run`` finds them), with the objects
    it would remove."""
    out = []
    try:
        listed = await engine.cleanup(dry_run=True)
    except BadPackageFiles:  # nothing is removed while a file is bad: the plan lists the files' errors
        return []
    moved = {engine.book.previous_target(s.key, s) for s in engine.book.packages.values()}  # planned by their package
    for item in listed:
        if item.result != "would-remove" or (item.namespace, item.name) in moved:
            continue
        key = (item.namespace, item.name)
        latest = engine.observer.latest(*key)
        base = PackagePlan(item.namespace, item.name, "", "", "Orphaned", UNINSTALL,
                           ("no package of this set declares it any more: reconcile --prune (or cleanup) "
                            "uninstalls it",))
        try:
            deployed = await engine.recorded_manifest(key, latest.version) if latest is not None else ""
        except (PackageError, HelmError, OSError) as exc:
            out.append(_replace(base, error=str(exc)))
            continue
        removed = comparison.changes(deployed, "")[2]
        out.append(_replace(base, removed=removed, rendered=True))
    return out


def _replace(plan: PackagePlan, **changes: Any) -> PackagePlan:
    return PackagePlan(**{**asdict(plan), **changes})


def _action(req: Request, state: st.ReleaseState, latest: Observation | None,
            stored: dict[int, Observation]) -> tuple[str | None, list[str]]:
    """The next action for ``state`` (``stored``: the release's revisions in storage) and what the decision said
    when it ends the pass instead."""
    try:
        return na.next_action(req, state, latest, stored=stored), []
    except (ExceededMaxRetries, MissingRollbackTarget) as exc:
        return "stalled", [str(exc)]
    except ReleaseLocked as exc:
        return "wait", [str(exc)]


async def _deployed_values(engine: Engine, latest: Observation | None) -> dict[str, Any] | None:
    if latest is None:
        return None
    return await engine.values(latest.release_key, latest.version)


def _reasons(req: Request, state: st.ReleaseState, latest: Observation | None,
             deployed_values: dict[str, Any] | None) -> list[str]:
    """Why, in the operator's words: ``chart 0.1.0 → 0.2.0``, ``values changed``, ``post-renderers or
    commonMetadata changed``, else the state's reason."""
    out = []
    if latest is not None and state.status == st.OUT_OF_SYNC and not state.reason.endswith("maintenance"):
        if latest.chart_name != req.chart.name:
            out.append(f"chart {latest.chart_name} → {req.chart.name}")
        elif latest.chart_version != req.chart.version:
            out.append(f"chart {latest.chart_version} → {req.chart.version}")
        if deployed_values is not None and _canonical(deployed_values) != _canonical(req.values):
            out.append("values changed")
        if latest.label_map.get(wire.POST_RENDER_DIGEST, "") != req.spec.rendering.digest:
            out.append("post-renderers or commonMetadata changed")
        if not out and state.reason.startswith("values or chart files changed"):
            out.append("chart files changed")
    return out or [state.reason]


def _values_diff(engine: Engine, deployed: dict[str, Any] | None, desired: Any,
                 secret_paths: Any, latest: Observation | None) -> str:
    """Deployed against desired values as a unified YAML diff, Secret values masked ("" when equal)."""
    before = engine.masker.values_yaml(deployed, reveal=False, secret_paths=secret_paths) if deployed else ""
    after = engine.masker.values_yaml(dict(desired), reveal=False, secret_paths=secret_paths)
    if before == after:
        return ""
    return unified(before, after, f"revision {latest.version} values" if latest else "nothing deployed",
                   "desired values")


def _canonical(values: Any) -> str:
    return json.dumps(values, sort_keys=True, default=str)


# -- plan --base: the desired state of one commit against another's -------------------------------------
ADDED, REMOVED, CHANGED, UNCHANGED = "Added", "Removed", "Changed", "Unchanged"


@dataclass(frozen=True)
class _Desired:
    """One package resolved and rendered by one engine (its values and manifest, as a pass would use)."""

    spec: PackageSpec
    values: dict[str, Any]
    secret_paths: Any
    chart: str
    manifest: str


async def make_change_plan(base: Engine, head: Engine, base_name: str) -> Plan:
    """What the change from ``base`` (an engine over the base commit's packages) to ``head`` (over the working
    tree's) would do, whatever the cluster holds: a package only in ``head`` is an ``install``, only in ``base``
    an ``uninstall``, in both an ``upgrade`` when its chart, values or rendered manifest differ, else nothing.
    ``state`` says which (``Added``, ``Removed``, ``Changed``, ``Unchanged``); values and manifest diffs are
    base against head, masked; ``revision`` is the cluster's latest revision it would replace. Both engines
    are started and read-only; ``base_name`` (the git ref) labels the diffs."""
    keys = [s.key for s in dependency_order(head.book.packages.values())]
    keys += [s.key for s in dependency_order(base.book.packages.values()) if s.key not in head.book.packages]
    plans = []
    for key in keys:
        old_spec, new_spec = base.book.packages.get(key), head.book.packages.get(key)
        shown = new_spec or old_spec
        assert shown is not None
        plan = PackagePlan(key[0], key[1], shown.name, shown.declared_in, UNCHANGED, None)
        latest = head.observer.latest(*key)
        try:
            old = await _desired(base, old_spec) if old_spec is not None else None
            new = await _desired(head, new_spec) if new_spec is not None else None
        except (PackageError, SourceError, PackageNotHelm, HelmError) as exc:
            plans.append(_replace(plan, error=said_of(exc, old_spec, new_spec)))
            continue
        state, action, reasons = _change(old, new, base_name)
        secret_paths = (*(old.secret_paths if old else ()), *(new.secret_paths if new else ()))
        masker = head.masker
        values_text = ""
        if (old.values if old else None) != (new.values if new else None):
            values_text = unified(
                masker.values_yaml(old.values, reveal=False, secret_paths=secret_paths) if old else "",
                masker.values_yaml(new.values, reveal=False, secret_paths=secret_paths) if new else "",
                f"{base_name} values" if old else "/dev/null", "working tree values" if new else "/dev/null")
        before, after = old.manifest if old else "", new.manifest if new else ""
        objects = comparison.changes(before, after)
        manifest_text = await asyncio.to_thread(
            manifest_diff, before, after, base_name, masker, [v.values for v in (old, new) if v is not None])
        plans.append(_replace(plan, state=state, action=action, reasons=tuple(reasons), added=objects[0],
                              changed=objects[1], removed=objects[2], rendered=True,
                              revision=latest.version if latest is not None else None,
                              values_diff=values_text, manifest_diff=manifest_text))
    errors = tuple(f"{base_name}: {e}" for e in base.package_errors) + tuple(str(e) for e in head.package_errors)
    return Plan(tuple(plans), errors, head.skipped, head.left_out)


async def _desired(engine: Engine, spec: PackageSpec) -> _Desired:
    await engine.controller.locator.locate(spec)
    resolved = await asyncio.to_thread(functools.partial(resolve, spec, values_from=engine.service.values_from))
    manifest = await engine.service.render(spec.release_namespace, spec)
    return _Desired(spec, dict(resolved.values), resolved.secret_paths,
                    f"{resolved.chart.name} {resolved.chart.version}", manifest)


def _change(old: _Desired | None, new: _Desired | None, base_name: str) -> tuple[str, str | None, list[str]]:
    """The state, action and reasons of one package between the two commits."""
    if old is None:
        return ADDED, na.INSTALL, [f"added since {base_name}"]
    if new is None:
        return REMOVED, UNINSTALL, [f"removed since {base_name}: reconcile --prune (or cleanup) uninstalls it"]
    reasons = []
    if old.chart != new.chart:
        reasons.append(f"chart {old.chart} → {new.chart}")
    if _canonical(old.values) != _canonical(new.values):
        reasons.append("values changed")
    if old.spec.rendering.digest != new.spec.rendering.digest:
        reasons.append("post-renderers or commonMetadata changed")
    if not reasons and comparison.normalised(old.manifest) != comparison.normalised(new.manifest):
        reasons.append("rendered manifest changed")
    if not reasons:
        return UNCHANGED, None, [f"unchanged since {base_name}"]
    return CHANGED, na.UPGRADE, reasons
