"""The packages folder, watched live with watchfiles.

``load()`` reads every package file; ``watch()`` yields a
:class:`InputUpdate` per burst of file changes (an editor's save burst is
one burst: watchfiles groups changes until none arrives for ``step_ms``,
at most ``debounce_ms``). A change reaches only the packages it touches: its
package file, one of its values files, or a file under its chart directory.

Loading also resolves each package (:mod:`engine.resolve`), off the event
loop, so that values files are parsed once per change and never on the loop.

A file that turns bad keeps its last good spec (the package keeps
reconciling as it was) and is reported; a removed package file reports its
release as removed (the runtime uninstalls it only with pruning on).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.base.fields import PackageError
from engine.base.paths import resolved
from engine.package.flux import LeftOut
from engine.package.load import as_declared, left_out_as_declared, load_folder
from engine.package.model import PACKAGE_SUFFIXES, Origin, PackageSpec
from engine.resolve.release import resolve
from engine.runtime.drive.ports import InputUpdate

if TYPE_CHECKING:
    import anyio

log = logging.getLogger(__name__)

ReleaseKey = tuple[str, str]


class PackageFolder:
    """Loads and watches one packages folder."""

    def __init__(self, directory: Path, *, debounce_ms: int = 1500, step_ms: int = 150,
                 allow_unsupported: bool = False, origins: Callable[[Path], Origin | None] | None = None):
        self.directory = resolved(directory)
        self.allow_unsupported = allow_unsupported  # Flux fields helmdeck does not implement: left out
        # Where each file's object was declared, when the files are copies (--kustomize): their paths resolve
        # there, and their problems are said of it.
        self.origins = origins
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._good: dict[Path, list[PackageSpec]] = {}  # package file -> its last good specs
        self._specs: dict[ReleaseKey, PackageSpec] = {}
        self._stopping = False
        self._cycle: anyio.Event | None = None  # stops the current watch cycle

    @property
    def specs(self) -> dict[ReleaseKey, PackageSpec]:
        return dict(self._specs)

    def removal(self, spec: PackageSpec) -> str:
        """A removed package's release is kept unless the engine prunes (then the prune says what it did)."""
        return "its package file was removed; the release is kept (run with --prune to uninstall such releases)"

    def load(self, touched: set[Path] | None = None) -> InputUpdate:
        """(Re)load the folder. ``touched`` are changed paths (None = treat everything as changed)."""
        if touched is not None:
            touched = {resolved(p) for p in touched}
        loaded = load_folder(self.directory, allow_unsupported=self.allow_unsupported, origins=self.origins)
        errors = loaded.errors
        good: dict[Path, list[PackageSpec]] = {}
        for spec in loaded.specs:
            good.setdefault(spec.file, []).append(spec)
        bad_files = {e.file for e in errors}
        for file in bad_files:
            if file in self._good and file not in good and file.exists():
                good[file] = self._good[file]  # keep the last good specs of a file that turned bad
        self._good = good
        new: dict[ReleaseKey, PackageSpec] = {}
        for specs in good.values():
            for spec in specs:
                new.setdefault(spec.key, spec)
        old = self._specs
        changed = {k for k, s in new.items() if old.get(k) != s}
        if touched is None:
            changed = set(new)
        else:
            # A bad file's kept spec did not change, even though its file did.
            changed |= {k for k, s in new.items() if s.file not in bad_files and _touches(s, touched)}
        removed = set(old) - set(new)
        self._specs = new
        for spec in new.values():
            warm(spec)
        errors, left_out = self._as_declared(errors), self._left_out_as_declared(loaded.left_out)
        for err in errors:
            log.warning("package problem: %s", err)
        skipped = loaded.skipped_line()
        if skipped:
            log.info("%s: %s", self.directory, skipped)
        for item in left_out:
            log.warning("%s", item)
        unread = unread_subfolders(self.directory, {f for spec in new.values() for f in spec.values_files})
        return InputUpdate(new, frozenset(changed), frozenset(removed), tuple(errors), frozenset(self._roots()),
                            skipped, tuple(str(item) for item in left_out) + ((unread,) if unread else ()))

    def _as_declared(self, errors: list[PackageError]) -> list[PackageError]:
        """The problems of copies said of where their objects were declared (:func:`as_declared`)."""
        if self.origins is None:
            return errors
        out = []
        for err in errors:
            origin = self.origins(err.file)
            out.append(as_declared(err, origin) if origin is not None else err)
        return out

    def _left_out_as_declared(self, items: Iterable[LeftOut]) -> list[LeftOut]:
        if self.origins is None:
            return list(items)
        out = []
        for item in items:
            origin = self.origins(item.file)
            out.append(left_out_as_declared(item, origin) if origin is not None else item)
        return out

    def _roots(self) -> set[Path]:
        """Paths to watch: the folder, every chart directory and values-file folder (deduplicated)."""
        paths = {self.directory}
        for spec in self._specs.values():
            if spec.chart_request is None:  # a remote chart's path is in helmdeck's cache: not watched
                paths.add(spec.chart_path)
            paths.update(p.parent for p in spec.values_files)
        existing = sorted(p for p in paths if p.exists())
        return {p for p in existing if not any(q != p and q in p.parents for q in existing)}

    def stop(self) -> None:
        """End :meth:`watch` (the watcher notices within a few hundred milliseconds)."""
        self._stopping = True
        if self._cycle is not None:
            self._cycle.set()

    async def watch(self) -> AsyncIterator[InputUpdate]:
        """Yield an update per change burst until :meth:`stop`. Call :meth:`load` first."""
        import anyio  # a command that watches nothing (reconcile --once, status) does without them
        import watchfiles

        while not self._stopping:
            roots = self._roots()
            self._cycle = anyio.Event()
            async for changes in watchfiles.awatch(
                *roots, debounce=self._debounce_ms, step=self._step_ms, stop_event=self._cycle,
            ):
                touched = {Path(p) for _, p in changes}
                # Reading package files is blocking I/O: keep it off the event loop.
                try:
                    update = await anyio.to_thread.run_sync(self.load, touched)
                except Exception:  # a defect in reading one burst must not end the watch: later changes count
                    log.exception("reading the packages folder %s failed; still watching it", self.directory)
                    continue
                if update.changed or update.removed or _relevant(touched, self.directory):
                    yield update
                if self._roots() != roots:
                    self._cycle.set()  # new chart or values folders to watch: restart the watcher


def unread_subfolders(directory: Path, used: set[Path], budget: int = 2000) -> str:
    """One line naming the subfolders of ``directory`` holding ``.yaml``/``.yml`` files (at any depth) that the
    folder does not read, and what does ("" when none). A chart's folder (with a ``Chart.yaml``) and the files
    in ``used`` (values files the packages name) are the packages' own, not left out. Looks at ``budget``
    entries at most: a note, not a second reader."""
    found: list[str] = []
    try:
        subfolders = sorted((e for e in os.scandir(directory) if e.is_dir() and not e.name.startswith(".")),
                            key=lambda e: e.name)
    except OSError:
        return ""
    for sub in subfolders:
        stack = [Path(sub.path)]
        while stack and budget > 0:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            budget -= len(entries)
            if any(e.name == "Chart.yaml" for e in entries):
                continue  # a chart: its templates are no packages
            if any(e.name.endswith(PACKAGE_SUFFIXES) and e.is_file() and resolved(Path(e.path)) not in used
                   for e in entries):
                found.append(sub.name)
                break
            stack += [Path(e.path) for e in entries if e.is_dir() and not e.name.startswith(".")]
    if not found:
        return ""
    return (f"subfolders of {directory} are not read: {', '.join(found)} (--packages reads the folder's own files; "
            "--kustomize DIR builds a repository path with its subfolders, as Flux does)")


def warm(spec: PackageSpec) -> None:
    """Resolve ``spec`` now (blocking), so the engine's first verdicts need no I/O; a problem is
    reported by the pass that needs the resolution."""
    with contextlib.suppress(PackageError):
        resolve(spec)


def _touches(spec: PackageSpec, touched: set[Path]) -> bool:
    for path in touched:
        if path == spec.file or path in spec.values_files:
            return True
        if path == spec.chart_path or spec.chart_path in path.parents:
            return True
    return False


def _relevant(touched: set[Path], directory: Path) -> bool:
    """A change in the packages folder itself (e.g. a file turned bad) is worth reporting."""
    return any(p.parent == directory for p in touched)
