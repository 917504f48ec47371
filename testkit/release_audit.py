"""An audit of who acted on which release when: the proof that a release is never acted on by two controllers at
once (issue 21), for the churn test and bench/controller_churn.py.

Its inputs, read from the local cluster after the churn (:func:`collect`) or given in memory (the unit tests):

- helmdeck's Events on the Packages: each action's start (``<Action>Started``) and end, with the replica as
  ``reportingInstance`` and the time as ``eventTime`` (engine/runtime/cluster/object_status.py);
- helm's release storage (the Secrets driver): every revision of every release, its status and when its action
  began (the record's ``info.last_deployed``, else the Secret's creation);
- optionally, a log of the helm processes the replicas ran (:func:`helm_wrapper` writes it): when each mutating
  helm command (install, upgrade, rollback, uninstall, test) began and ended, and which replica ran it. The
  controller learns that its helm process ended only when it runs: a replica paused by SIGSTOP records the end on
  waking, though helm (its child, not stopped) finished long before; the process log says when it did;
- the Package objects, and any log text (the controllers' logs).

What it reports (:class:`Finding`), each a reason for the churn test to fail:

- ``overlap``: two actions on one release whose intervals intersect, by different replicas (or one replica twice);
- ``in-progress``: helm's "another operation (install/upgrade/rollback) is in progress" anywhere;
- ``pending``: a release whose latest revision is left ``pending-*``;
- ``unaccounted``: a revision whose action began when no replica was acting on its release;
- ``not-converged``: a Package not Ready=True at its current generation, or still claimed;
- ``upgrades``: a release upgraded more often than its Package was edited (its ``metadata.generation`` - 1), or
  upgraded twice to the same chart and values: one edit is one upgrade, whatever the replicas do (issue 32). An
  upgrade is a revision after the first that is neither a rollback nor an install (helm's description).

An action's interval: from its start Event to its end Event, cut short at the end of the helm process it ran when
the process log shows it; one never ended (a replica SIGKILLed mid-action) lasts until that replica's death
when known (its helm process, left running, is in the process log), else until the audit.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from engine.base.fields import PackageError
from engine.base.wire import STARTED
from engine.kube.rest import get_json
from engine.package.load import package_object
from engine.storage.codec import decode_payload
from engine.storage.helmtime import helm_time

GROUP, VERSION = "helmdeck.dev", "v1alpha1"
IN_PROGRESS = re.compile(r"another operation \(install/upgrade/rollback\) is in progress|"
                         r"another operation .{0,40}is in progress", re.IGNORECASE)
MUTATING = frozenset({"install", "upgrade", "rollback", "uninstall", "test"})
SLACK = 1.0  # seconds: creationTimestamp has whole seconds; Event and record times come from one clock
_PID = re.compile(r"-(\d+)-[0-9a-f]{4}$")  # engine.runtime.drive.lease.default_identity: <host>-<pid>-<hex>

Release = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class ActionEvent:
    """One of helmdeck's Events on a Package: ``release`` it acts on, the replica, the engine's action, its
    reason, when (epoch seconds) and its message."""

    release: Release
    replica: str
    action: str
    reason: str
    at: float
    message: str = ""

    @property
    def start(self) -> bool:
        return self.reason.endswith(STARTED)


@dataclass(frozen=True)
class HelmProcess:
    """One helm command a replica ran on ``release``: ``command`` (install, upgrade...), from ``start`` to ``end``
    (epoch seconds; None: never seen ending)."""

    release: Release
    replica: str
    command: str
    start: float
    end: float | None


@dataclass(frozen=True)
class Revision:
    """One stored revision: its status and when its action began (epoch seconds); ``description`` is helm's
    (``Upgrade complete``, ``Rollback to 1``...), ``made_from`` the chart version and values it was made from
    (the values as canonical JSON)."""

    release: Release
    version: int
    status: str
    started: float
    description: str = ""
    made_from: str = ""

    @property
    def upgrade(self) -> bool:
        """Made by an upgrade: not the first revision, nor a rollback's or a new install's (helm's descriptions
        ``Rollback to N``, ``Install complete``)."""
        return self.version > 1 and not self.description.startswith(("Rollback", "Install"))


@dataclass(frozen=True)
class Interval:
    """One action of ``replica`` on ``release`` from ``start`` to ``end`` (epoch seconds); ``what`` names it;
    ``process``: a helm process (the process log), not an action as the Events tell it."""

    release: Release
    replica: str
    start: float
    end: float
    what: str
    process: bool = False


@dataclass(frozen=True)
class Finding:
    """Something the audit refuses: ``kind`` (overlap, in-progress, pending, unaccounted, not-converged, upgrades), the
    release or Package it is about and the facts, in words."""

    kind: str
    release: Release
    text: str

    def __str__(self) -> str:
        return f"{self.kind} {self.release[0]}/{self.release[1]}: {self.text}"


@dataclass
class AuditInput:
    """Everything the audit reads; ``until``: when it was collected (epoch seconds); ``deaths``: replica ->
    when it was SIGKILLed; ``unconverged``: Packages not at rest, with why; ``edits``: release -> how often its
    Package's spec was changed since it was created (releases not in it are not counted)."""

    events: list[ActionEvent] = field(default_factory=list)
    revisions: list[Revision] = field(default_factory=list)
    processes: list[HelmProcess] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    unconverged: dict[Release, str] = field(default_factory=dict)
    deaths: dict[str, float] = field(default_factory=dict)
    until: float = 0.0
    edits: dict[Release, int] = field(default_factory=dict)


def replica_of(instance: str) -> str:
    """The replica an Event's ``reportingInstance`` names, as ``pid N`` when it is a default identity
    (``<host>-<pid>-<hex>``, what the process log records), else the identity itself."""
    found = _PID.search(instance)
    return f"pid {found.group(1)}" if found else instance


_NOT_RUN = " not run: "  # the end Event of an action whose helm was never spawned ("Helm upgrade not run: ...")


def intervals(events: Iterable[ActionEvent], processes: Iterable[HelmProcess] = (),
              deaths: Mapping[str, float] | None = None, until: float = float("inf")) -> list[Interval]:
    """Each start Event paired with the next end Event of the same release, replica and action; cut at the end of
    the helm process of that replica and release that began within it (the process log), if earlier; one never
    ended lasts until its replica's death (``deaths``) if after its start, else ``until``. A start whose end
    says its helm was not run (the recheck before the spawn refused it: engine.reconcile.action) and within which
    that replica began no helm process is no action: it is left out."""
    deaths = deaths or {}
    ran: dict[tuple[Release, str], list[HelmProcess]] = defaultdict(list)
    for proc in processes:
        ran[(proc.release, proc.replica)].append(proc)
    open_: dict[tuple[Release, str, str], ActionEvent] = {}
    out: list[Interval] = []

    def close(begun: ActionEvent, end: float, ended: ActionEvent | None = None) -> None:
        began = [p for p in ran.get((begun.release, begun.replica), ()) if begun.at - SLACK <= p.start <= end]
        if ended is not None and _NOT_RUN in ended.message and not began:
            return
        helm = [p.end for p in began if p.end is not None]
        if helm:
            end = min(end, max(helm))
        out.append(Interval(begun.release, begun.replica, begun.at, max(end, begun.at), begun.reason))

    for ev in sorted(events, key=lambda e: e.at):
        key = (ev.release, ev.replica, ev.action)
        if ev.start:
            if key in open_:  # a second start without an end: the first ended unseen, by the second at the latest
                close(open_[key], ev.at)
            open_[key] = ev
        elif key in open_:
            close(open_.pop(key), ev.at, ev)
    for begun in open_.values():
        death = deaths.get(begun.replica)
        close(begun, death if death is not None and death >= begun.at else until)
    return out


def overlaps(spans: Iterable[Interval]) -> list[Finding]:
    """Every pair of intervals on one release that intersect (a sweep per release, ordered by start): of two
    replicas, or of one replica twice as its Events tell (its action and the helm process it ran are one)."""
    by_release: dict[Release, list[Interval]] = defaultdict(list)
    for span in spans:
        by_release[span.release].append(span)
    found: list[Finding] = []
    for release, items in by_release.items():
        items.sort(key=lambda s: (s.start, s.end))
        for i, first in enumerate(items):
            for later in items[i + 1:]:
                if later.start >= first.end:
                    break
                if later.replica == first.replica and (later.process or first.process):
                    continue
                who = ("one replica twice: " if later.replica == first.replica else "") + (
                    f"{first.what} by {first.replica} [{first.start:.3f}, {first.end:.3f}] and {later.what} by "
                    f"{later.replica} [{later.start:.3f}, {later.end:.3f}]")
                found.append(Finding("overlap", release, who))
    return found


def process_spans(processes: Iterable[HelmProcess], until: float) -> list[Interval]:
    """The helm processes as intervals (one never seen ending lasts until ``until``)."""
    return [Interval(p.release, p.replica, p.start, p.end if p.end is not None else until, f"helm {p.command}",
                     process=True) for p in processes]


def unaccounted(revisions: Iterable[Revision], spans: Iterable[Interval]) -> list[Finding]:
    """Revisions whose action began when no interval of their release was open (within :data:`SLACK`)."""
    by_release: dict[Release, list[Interval]] = defaultdict(list)
    for span in spans:
        by_release[span.release].append(span)
    return [Finding("unaccounted", rev.release, f"revision {rev.version} ({rev.status}) began at {rev.started:.3f} "
                    "while no replica was acting on the release")
            for rev in revisions
            if not any(s.start - SLACK <= rev.started <= s.end + SLACK for s in by_release.get(rev.release, ()))]


def left_pending(revisions: Iterable[Revision]) -> list[Finding]:
    """Releases whose latest revision is ``pending-*``."""
    latest: dict[Release, Revision] = {}
    for rev in revisions:
        if rev.release not in latest or rev.version > latest[rev.release].version:
            latest[rev.release] = rev
    return [Finding("pending", rev.release, f"revision {rev.version} left {rev.status}")
            for rev in latest.values() if rev.status.startswith("pending")]


def extra_upgrades(revisions: Iterable[Revision], edits: Mapping[Release, int]) -> list[Finding]:
    """Releases of ``edits`` with more upgrades than edits, or with two upgrades made from the same chart and
    values (one edit upgraded twice: a failed or cancelled upgrade redone counts too, which the churn never
    asks for)."""
    by_release: dict[Release, list[Revision]] = defaultdict(list)
    for rev in revisions:
        if rev.upgrade and rev.release in edits:
            by_release[rev.release].append(rev)
    found: list[Finding] = []
    for release, upgrades in sorted(by_release.items()):
        upgrades.sort(key=lambda r: r.version)
        listed = ", ".join(f"{r.version} ({r.status})" for r in upgrades)
        if len(upgrades) > edits[release]:
            found.append(Finding("upgrades", release, f"{len(upgrades)} upgrades for {edits[release]} edits: "
                                                      f"revisions {listed}"))
        first: dict[str, int] = {}
        for rev in upgrades:
            if rev.made_from and rev.made_from in first:
                found.append(Finding("upgrades", release, f"revisions {first[rev.made_from]} and {rev.version} "
                                                          "were both upgrades to the same chart and values"))
            first.setdefault(rev.made_from, rev.version)
    return found


def in_progress(events: Iterable[ActionEvent], logs: Iterable[str]) -> list[Finding]:
    """helm's "another operation is in progress" in an Event's message or a log line."""
    found = [Finding("in-progress", ev.release, f"{ev.reason} by {ev.replica}: {ev.message[:300]}")
             for ev in events if IN_PROGRESS.search(ev.message)]
    for text in logs:
        found += [Finding("in-progress", ("", "log"), line[:300]) for line in text.splitlines()
                  if IN_PROGRESS.search(line)]
    return found


def audit(data: AuditInput) -> list[Finding]:
    """Every finding over ``data`` (empty: no release was acted on by two at once, none is left pending, every
    Package converged, none was upgraded more than once per edit)."""
    spans = intervals(data.events, data.processes, data.deaths, data.until)
    helm_spans = process_spans(data.processes, data.until)
    found = overlaps(spans + helm_spans)
    found += in_progress(data.events, data.logs)
    found += left_pending(data.revisions)
    found += unaccounted(data.revisions, spans + helm_spans)
    found += extra_upgrades(data.revisions, data.edits)
    found += [Finding("not-converged", ref, why) for ref, why in sorted(data.unconverged.items())]
    return found


# -- reading it from the cluster ---------------------------------------------------------------------------------


def _micro(value: str) -> float | None:
    return helm_time(value) if value else None


def read_events(api: client.ApiClient, namespace: str, releases: Mapping[Release, Release]) -> list[ActionEvent]:
    """helmdeck's Events on the Packages of ``namespace`` (``releases``: Package -> its release)."""
    out: list[ActionEvent] = []
    for item in _pages(api, f"/api/v1/namespaces/{namespace}/events", "involvedObject.kind=Package"):
        obj = item.get("involvedObject") or {}
        ref = (str(obj.get("namespace") or namespace), str(obj.get("name") or ""))
        at = _micro(str(item.get("eventTime") or "")) or _micro(str(item.get("lastTimestamp") or ""))
        if at is None or not item.get("reportingInstance"):
            continue
        out.append(ActionEvent(releases.get(ref, ref), replica_of(str(item["reportingInstance"])),
                               str(item.get("action") or ""), str(item.get("reason") or ""), at,
                               str(item.get("message") or "")))
    return out


def read_revisions(api: client.ApiClient, namespace: str) -> list[Revision]:
    """Every revision helm's Secrets driver stores in ``namespace``."""
    out: list[Revision] = []
    for item in _pages(api, f"/api/v1/namespaces/{namespace}/secrets", None, "owner=helm"):
        meta, labels = item["metadata"], item["metadata"].get("labels") or {}
        started = _micro(str(meta.get("creationTimestamp") or "")) or 0.0
        payload = (item.get("data") or {}).get("release")
        description = made_from = ""
        if payload:
            record = decode_payload(base64.b64decode(payload))
            info = record.get("info") or {}
            started = helm_time(str(info.get("last_deployed") or "")) or started
            description = str(info.get("description") or "")
            chart = ((record.get("chart") or {}).get("metadata") or {}).get("version")
            made_from = f"{chart} {json.dumps(record.get('config') or {}, sort_keys=True)}"
        out.append(Revision((namespace, str(labels.get("name"))), int(labels.get("version") or 0),
                            str(labels.get("status") or ""), started, description, made_from))
    return out


def read_packages(api: client.ApiClient, namespace: str) -> tuple[dict[Release, Release], dict[Release, str],
                                                                  dict[Release, int]]:
    """(Package -> its release, the Packages not converged with why, release -> its Package's edits): converged
    is Ready=True for the current generation (Flux's ``observedGeneration``) and no actor claim left
    (``status.claim``); the edits are the generation less one (the API server counts every spec change)."""
    releases: dict[Release, Release] = {}
    unconverged: dict[Release, str] = {}
    edits: dict[Release, int] = {}
    for obj in _pages(api, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/packages"):
        ref = (namespace, str(obj["metadata"]["name"]))
        try:
            releases[ref] = package_object(obj).key
        except PackageError as exc:
            unconverged[ref] = f"invalid: {exc}"
            continue
        status = obj.get("status") or {}
        ready: dict[str, Any] = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
        generation = obj["metadata"].get("generation")
        edits[releases[ref]] = int(generation or 1) - 1
        if status.get("observedGeneration") != generation or ready.get("status") != "True":
            unconverged[ref] = (f"generation {generation}, observed {status.get('observedGeneration')}, Ready "
                                f"{ready.get('status')} {ready.get('reason')}: {str(ready.get('message'))[:200]}")
        elif status.get("claim"):
            unconverged[ref] = f"still claimed: {status['claim']}"
    return releases, unconverged, edits


def collect(api: client.ApiClient, namespace: str, *, processes: Iterable[HelmProcess] = (),
            logs: Iterable[str] = (), deaths: Mapping[str, float] | None = None, until: float) -> AuditInput:
    """The audit's input from the local cluster's ``namespace`` (Packages and releases in it) and what the
    churn kept (helm process log, controller logs, deaths)."""
    releases, unconverged, edits = read_packages(api, namespace)
    return AuditInput(read_events(api, namespace, releases), read_revisions(api, namespace), list(processes),
                      list(logs), unconverged, dict(deaths or {}), until, edits)


def _pages(api: client.ApiClient, path: str, fields: str | None = None,
           labels: str | None = None) -> Iterable[dict[str, Any]]:
    token = ""
    while True:
        query = [("limit", "500")] + ([("continue", token)] if token else [])
        query += [("fieldSelector", fields)] if fields else []
        query += [("labelSelector", labels)] if labels else []
        body = get_json(api, path, query)
        yield from body.get("items") or ()
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return


# -- the helm process log ----------------------------------------------------------------------------------------


def helm_wrapper(work: Path, helm: str) -> tuple[Path, Path]:
    """A helm that logs each command's start and end (epoch seconds, its parent's pid: the replica, the
    arguments) to a file, then the real one's exit code; returns (the wrapper, the log). It stays in helm's
    process group and ignores SIGTERM itself, so the controller's cancel (a signal to the group) reaches helm and
    the end is still written."""
    calls = work / "helm-processes.log"
    calls.touch()
    wrapper = work / "helm-audited"
    out = shlex.quote(str(calls))
    wrapper.write_text(
        "#!/bin/sh\n"
        "trap '' TERM INT\n"
        f'echo "start $(date +%s.%N) $$ $PPID $*" >> {out}\n'
        f'(trap - TERM INT; exec {shlex.quote(helm)} "$@")\n'  # helm itself keeps the default actions
        "rc=$?\n"
        f'echo "end $(date +%s.%N) $$ $rc" >> {out}\n'
        "exit $rc\n")
    wrapper.chmod(0o755)
    return wrapper, calls


def read_processes(log: Path) -> list[HelmProcess]:
    """The mutating helm commands (not ``--dry-run``) in :func:`helm_wrapper`'s log."""
    begun: dict[str, tuple[float, str, str, Release]] = {}
    out: list[HelmProcess] = []
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0] == "start":
            args = parts[4:]
            if args[0] in MUTATING and not any(a.startswith("--dry-run") for a in args):
                namespace = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--namespace", "-n")), "")
                begun[parts[2]] = (float(parts[1]), f"pid {parts[3]}", args[0], (namespace, args[1]))
        elif len(parts) >= 3 and parts[0] == "end" and parts[2] in begun:
            start, replica, command, release = begun.pop(parts[2])
            out.append(HelmProcess(release, replica, command, start, float(parts[1])))
    out += [HelmProcess(release, replica, command, start, None) for start, replica, command, release in begun.values()]
    return out
