"""``--kustomize DIR`` as a :class:`~engine.runtime.drive.ports.PackageInput`: the repository path built with
kustomize and substituted (:mod:`engine.package.kustomize`), its objects written one file each into a
private folder that a :class:`~engine.runtime.drive.folder.PackageFolder` reads, so that everything after
the build (the loader, its bounds and wording, last-good specs, the controller) is the folder's.

Variables, lowest first (a name set twice takes the later value): the ConfigMaps and Secrets a Flux
Kustomization on the cluster names in ``spec.postBuild.substituteFrom`` (in their order), that
Kustomization's ``spec.postBuild.substitute`` (``--vars-from-cluster NAMESPACE/NAME``, as Flux lays them),
then each ``--vars-from FILE``, then each ``--var KEY=VALUE``. Each is read again on every build. Values
from a Secret are handed to the masker before anything is built, so plans and diffs mask them, and are
never logged.

Watching: one watch over the git checkout holding DIR (an overlay may name ``../../apps/base``), or DIR
outside git, and the ``--vars-from`` files; a burst of changes to YAML, JSON or ``.env`` files is one
rebuild, and only objects whose text changed are read again.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.fields import PackageError
from engine.base.paths import resolved
from engine.kube import rest
from engine.package.kustomize import BuiltObject, build, objects, write_objects
from engine.package.model import Origin, PackageSpec, in_repository
from engine.package.substitute import (
    NO_VARIABLES,
    SubstitutionError,
    Variables,
    decode_secret_value,
    read_vars_file,
    variables,
)
from engine.runtime.drive.folder import PackageFolder
from engine.runtime.drive.ports import InputUpdate

if TYPE_CHECKING:
    import anyio
    import watchfiles

log = logging.getLogger(__name__)

KUSTOMIZATION_API = "kustomize.toolkit.fluxcd.io/v1"
_WATCHED_SUFFIXES = (".yaml", ".yml", ".json", ".env")


@dataclass(frozen=True)
class KustomizeSource:
    """What ``--kustomize`` and its flags say: the repository ``path``; ``variables`` from ``--var``;
    ``files`` (``--vars-from``); ``cluster`` (``--vars-from-cluster``: the Flux Kustomization
    ``namespace/name`` whose postBuild variables are read from the cluster, or ""); ``root``: the repository's
    folder (``plan --base``'s copy of a commit; default: the git checkout holding ``path``). ``substitute``: whether
    post-build substitution runs (any variable source given, as a Kustomization with ``spec.postBuild``)."""

    path: Path
    variables: Variables = NO_VARIABLES
    files: tuple[Path, ...] = ()
    cluster: str = ""
    root: Path | None = None  # the repository's folder messages name files from (default: the git checkout)

    @property
    def substitute(self) -> bool:
        return bool(self.variables or self.files or self.cluster)


class KustomizeInput:
    """The packages of a built repository path (module docstring). ``api``: for ``--vars-from-cluster``
    (None offline); ``remember``: the masker's, given the values read from Secrets."""

    cluster_interval = 60.0  # seconds between rebuilds reading --vars-from-cluster's objects again

    def __init__(self, source: KustomizeSource, api: client.ApiClient | None,
                 remember: Callable[[Iterable[str]], None], *, allow_unsupported: bool = False,
                 debounce_ms: int = 1500, step_ms: int = 150):
        self.source = source
        self.directory = source.path.resolve()
        self._api = api
        self._remember = remember
        self._debounce_ms, self._step_ms = debounce_ms, step_ms
        self._out = Path(tempfile.mkdtemp(prefix="helmdeck-kustomize-"))  # owner-only (0700)
        weakref.finalize(self, shutil.rmtree, self._out, True)
        self._origins: dict[Path, Origin] = {}  # each object's file -> where the repository declares it
        self.folder = PackageFolder(self._out, allow_unsupported=allow_unsupported, origins=self._origins.get)
        self._checkout = checkout_root(self.directory) or self.directory  # what an overlay may read
        self.root = resolved(source.root) if source.root is not None else self._checkout
        self._stop: anyio.Event | None = None
        self._stopping = False
        self._memo: dict[str, BuiltObject] = {}  # the last build's objects by their built text
        self._variables: Variables | None = None

    def variables(self) -> Variables | None:
        """The post-build variables (module docstring), None when no substitution is asked for. Raises
        PackageError naming the file or object that cannot be read."""
        if not self.source.substitute:
            return None
        out = cluster_variables(self._api, self.source.cluster) if self.source.cluster else NO_VARIABLES
        for file in self.source.files:
            out = read_vars_file(file).over(out)
        out = self.source.variables.over(out)
        self._remember(out.secret_texts())
        return out

    def removal(self, spec: PackageSpec) -> str:
        """A package gone from the built path keeps its release unless the engine prunes."""
        return (f"{spec.kind} {spec.namespace}/{spec.name} is no longer in the build of "
                f"{in_repository(str(self.directory), self.root)}; the release "
                "is kept (run with --prune to uninstall such releases)")

    def load(self, touched: set[Path] | None = None) -> InputUpdate:
        """Build, substitute and read the path now (blocking). A build that fails keeps the last good
        packages and reports the problem, as a package file that turns bad."""
        try:
            output, variables = build(self.directory, reads_under=self._checkout), self.variables()
            if variables != self._variables:  # the memo holds objects substituted with the last variables
                self._memo.clear()
                self._variables = variables
            built = objects(output.text, self.directory, variables, self._memo, output.base)
        except PackageError as exc:
            exc = self._in_repository(exc)
            log.warning("package problem: %s", exc)
            update = self.folder.load(set())
            return dataclasses.replace(update, changed=frozenset(), errors=(exc, *update.errors))
        errors = [self._in_repository(e) for e in built.errors]
        for err in errors:
            log.warning("package problem: %s", err)
        kept = {self._out / name: self._origins[self._out / name] for name in built.kept
                if self._out / name in self._origins}
        self._origins.clear()  # the folder reads it: the same dict, now this build's
        self._origins.update(kept)
        self._origins.update({self._out / b.file: Origin(b.origin, self.root, b.ref)
                              for b in built.objects if b.origin is not None})
        written = write_objects(self._out, built.objects, built.kept)
        # A change under a chart folder or to a values file the objects name reaches their packages too.
        update = self.folder.load(None if touched is None else written | {resolved(p) for p in touched})
        note = built.note()
        if note:
            log.info("%s: %s", in_repository(str(self.directory), self.root), note)
        return dataclasses.replace(update, errors=(*errors, *update.errors),
                                   left_out=update.left_out + ((note,) if note else ()))

    def _in_repository(self, problem: PackageError) -> PackageError:
        """A problem of the build named as the repository names the path and its files (:func:`in_repository`)."""
        return PackageError(Path(in_repository(str(problem.file), self.root)), problem.field,
                            in_repository(problem.problem, self.root), in_repository(problem.fix, self.root),
                            problem.line, obj=problem.obj)

    def watch_roots(self) -> list[Path]:
        """The git checkout holding the path (else the path) and the ``--vars-from`` files' folders."""
        roots = {self._checkout}
        roots.update(resolved(f).parent for f in self.source.files)
        return sorted(p for p in roots if not any(q != p and q in p.parents for q in roots))

    def stop(self) -> None:
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    async def watch(self) -> AsyncIterator[InputUpdate]:
        """Yield an update per burst of changes under the watched roots until :meth:`stop`; with
        ``--vars-from-cluster`` also a rebuild every :attr:`cluster_interval` seconds (the cluster's
        ConfigMaps and Secrets are read again, as Flux reconciles a Kustomization on its interval), yielded
        only when it changed a package or its problems."""
        import anyio  # a command that watches nothing (reconcile --once, status) does without them
        import watchfiles

        self._stop = anyio.Event()
        if self._stopping:
            return
        polling = bool(self.source.cluster)
        problems: tuple[str, ...] | None = None
        async for changes in watchfiles.awatch(
            *self.watch_roots(), debounce=self._debounce_ms, step=self._step_ms, stop_event=self._stop,
            watch_filter=_relevant, rust_timeout=int(self.cluster_interval * 1000) if polling else None,
            yield_on_timeout=polling,
        ):
            update = await anyio.to_thread.run_sync(self.load, {Path(p) for _, p in changes})
            said = tuple(str(e) for e in update.errors)
            if changes or update.changed or update.removed or said != problems:
                yield update
            problems = said


def _relevant(change: watchfiles.Change, path: str) -> bool:
    """A change kustomize may read: YAML, JSON, ``.env`` or a ``Kustomization`` file, not under ``.git``."""
    import watchfiles

    p = Path(path)
    return watchfiles.DefaultFilter()(change, path) and (p.suffix in _WATCHED_SUFFIXES or p.name == "Kustomization")


def checkout_root(directory: Path) -> Path | None:
    """The top of the git checkout holding ``directory`` (``git rev-parse --show-toplevel``), None outside
    one or without git."""
    try:
        proc = subprocess.run(["git", "-C", str(directory), "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def cluster_variables(api: client.ApiClient | None, ref: str) -> Variables:
    """The post-build variables of the Flux Kustomization ``ref`` (``namespace/name``, or ``name`` in
    flux-system) on the cluster, as Flux's kustomize-controller gathers them: each
    ``spec.postBuild.substituteFrom`` entry (a ConfigMap's ``data``, a Secret's decoded ``data``; in the
    Kustomization's namespace; a missing one is an error unless ``optional: true``), later entries over
    earlier ones, then ``spec.postBuild.substitute`` over them all. Read-only. Raises PackageError naming
    the Kustomization and the entry (never a value)."""
    namespace, _, name = ref.rpartition("/")
    namespace = namespace or "flux-system"
    origin = Path(f"Kustomization {namespace}/{name}")
    if api is None:
        raise PackageError(origin, "", "--vars-from-cluster needs a cluster")
    try:
        obj = rest.get_json(api, rest.path(KUSTOMIZATION_API, "kustomizations", namespace, name))
    except ApiException as exc:
        raise PackageError(origin, "", f"cannot be read from the cluster ({exc.reason or 'error'}, {exc.status})",
                           "check --vars-from-cluster NAMESPACE/NAME and that Flux's Kustomization API is served"
                           ) from None
    except Exception as exc:  # the cluster unreachable, say: named, never a crash of the load
        raise PackageError(origin, "", f"cannot be read from the cluster ({type(exc).__name__})") from None
    post = (obj.get("spec") or {}).get("postBuild") or {}
    out = NO_VARIABLES
    try:
        for i, entry in enumerate(post.get("substituteFrom") or []):
            field = f"spec.postBuild.substituteFrom[{i}]"
            kind, ref_name = entry.get("kind"), entry.get("name")
            if kind not in ("ConfigMap", "Secret") or not isinstance(ref_name, str):
                raise PackageError(origin, field, f"kind {kind!r} is not ConfigMap or Secret")
            plural = "configmaps" if kind == "ConfigMap" else "secrets"
            try:
                body = rest.get_json(api, rest.path("v1", plural, namespace, ref_name))
            except ApiException as exc:
                if exc.status == 404 and entry.get("optional"):
                    continue
                raise PackageError(origin, field, f"{kind} {namespace}/{ref_name} cannot be read "
                                   f"({exc.reason or 'error'}, {exc.status})",
                                   "create it, or mark the entry optional: true") from None
            except Exception as exc:
                raise PackageError(origin, field, f"{kind} {namespace}/{ref_name} cannot be read "
                                   f"({type(exc).__name__})") from None
            data = body.get("data") or {}
            where = f"{kind} {namespace}/{ref_name}"
            pairs = [(str(k), decode_secret_value(str(v), f"{where}: data.{k}") if kind == "Secret" else str(v))
                     for k, v in data.items()]
            out = variables(pairs, where, secret=kind == "Secret").over(out)
        inline = post.get("substitute") or {}
        out = variables(((str(k), str(v)) for k, v in inline.items()), f"{origin}: spec.postBuild.substitute"
                        ).over(out)
    except SubstitutionError as exc:
        raise PackageError(origin, "", str(exc), "rename the variable") from None
    return out
