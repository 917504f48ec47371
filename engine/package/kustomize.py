"""``--kustomize DIR``: a repository path built with the real kustomize, as Flux's kustomize-controller
builds a Kustomization's ``spec.path``, and its objects made package files.

- ``kustomize build --load-restrictor LoadRestrictionsNone DIR`` (Flux builds with no load restriction,
  so an overlay may name ``../../apps/base``), with the pinned kustomize (:func:`engine.helm.kustomize.
  find_kustomize`); a path without a ``kustomization.yaml`` gets one generated, as Flux's controller
  generates it: every YAML file holding Kubernetes objects in the directory tree, a subfolder with its
  own kustomization taken whole (:func:`generated_resources`). That is how nested repository paths
  are read: ``--packages DIR`` reads only the files of DIR itself.
- Bounded: the output is read up to :func:`engine.base.loader.kustomize_limits` (16 MiB) and at most
  ``max_documents`` objects; each object is parsed within the package limits (size, nesting, aliases)
  before and after substitution; the build is killed after :data:`BUILD_TIMEOUT` seconds.
- Post-build substitution (:mod:`engine.package.substitute`) on each object when variables are given
  (a Kustomization with ``spec.postBuild``); without any, objects are left as built, and how many hold a
  ``${`` is counted for a note.
- Each object becomes one file named after it (:func:`object_file`), so that the package loader reads
  them as it reads any folder, and its errors name the object; :func:`write_objects` rewrites only the
  files whose text changed, so a change re-reads only the objects it touched.

Errors are :class:`PackageError` naming DIR, the object and the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.base.fields import PackageError
from engine.base.loader import (
    YamlLimitError,
    check_events,
    documents_error,
    kustomize_limits,
    package_limits,
    parse_text,
)
from engine.helm.kustomize import KustomizeMissing, find_kustomize
from engine.package.model import PACKAGE_SUFFIXES
from engine.package.substitute import (
    DISABLE_KEY,
    SubstitutionError,
    Variables,
    disabled,
    references,
    substitutable,
    substitute,
)

BUILD_TIMEOUT = 120.0  # seconds one kustomize build may take
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,120}")
_SEPARATOR = re.compile(r"^---[ \t]*\n", re.MULTILINE)
_STDERR_TAIL = 4000


ORIGIN_ANNOTATION = "config.kubernetes.io/origin"


@dataclass(frozen=True)
class BuiltObject:
    """One object of the build: its file name (:func:`object_file`), ``ref`` (``Kind namespace/name``), YAML
    text (substituted, without kustomize's origin annotation) and ``origin``: the repository file that
    declared it (absolute; None for an object kustomize generated, e.g. from a Helm chart or a generator)."""

    file: str
    ref: str
    text: str
    origin: Path | None = None


@dataclass(frozen=True)
class Built:
    """A repository path built: its objects; the problems of single objects (those objects' files keep their
    last text: ``kept``); ``unsubstituted``: objects holding a ``${`` left as written (no variables given)."""

    objects: tuple[BuiltObject, ...]
    errors: tuple[PackageError, ...] = ()
    kept: frozenset[str] = frozenset()
    unsubstituted: int = 0

    def note(self) -> str:
        """One line when objects hold ``${`` references and no variables were given ("" otherwise)."""
        if not self.unsubstituted:
            return ""
        return (f"{self.unsubstituted} object{'s' if self.unsubstituted != 1 else ''} hold ${{...}} references left "
                "as written: no --var or --vars-from was given (as a Flux Kustomization without spec.postBuild)")


@dataclass(frozen=True)
class Output:
    """What ``kustomize build`` printed (``text``) and the folder its origin annotations' paths are relative to
    (``base``; gone after the build: the paths are joined to it as text)."""

    text: str
    base: Path


def build(directory: Path, *, binary: Path | None = None, timeout: float = BUILD_TIMEOUT,
          reads_under: Path | None = None) -> Output:
    """The output of ``kustomize build`` of ``directory`` (a generated kustomization where it has none), each
    object annotated with the file that declared it (:data:`ORIGIN_ANNOTATION`, read by :func:`objects`).
    ``reads_under``: the folder whose YAML files kustomize may read (the git checkout; default
    ``directory``), checked first for alias bombs (:func:`check_aliases`). Raises PackageError naming
    ``directory`` or the file: no kustomize, an alias bomb, the build failed (kustomize's own words, which
    name the file), timed out, or printed more than the limit."""
    try:
        kustomize = binary or find_kustomize(needed_by="--kustomize")
    except KustomizeMissing as exc:
        raise PackageError(directory, "", str(exc)) from None
    if not directory.is_dir():
        raise PackageError(directory, "", "is not a directory", "give --kustomize a repository path")
    check_aliases(reads_under or directory)
    with tempfile.TemporaryDirectory(prefix="helmdeck-kustomization-") as gen:
        # The path's own kustomization (or the one Flux generates) as the one resource of a kustomization
        # asking kustomize to annotate each object with the file that declared it (buildMetadata:
        # [originAnnotations], config.kubernetes.io/origin, a path relative to this folder), which adds
        # nothing else. Relative paths: kustomize refuses an absolute one to a folder.
        if any((directory / name).is_file() for name in KUSTOMIZATION_FILES):
            listed = [directory]
        else:
            listed = generated_resources(directory)
        resources = "".join(f"- {_quoted(Path(os.path.relpath(p, gen)))}\n" for p in listed)
        (Path(gen) / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nbuildMetadata: [originAnnotations]\n"
            + (f"resources:\n{resources}" if resources else "resources: []\n"))
        try:
            text = _run([str(kustomize), "build", "--load-restrictor", "LoadRestrictionsNone", gen], directory,
                        timeout)
        except PackageError as exc:  # kustomize names files from this folder: name them as they are
            top = reads_under or directory
            said = exc.problem.replace(os.path.relpath(top, gen) + os.sep, f"{top}{os.sep}")
            raise PackageError(exc.file, exc.field, said, exc.fix, exc.line) from None
    return Output(text, Path(gen))


def _quoted(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def generated_resources(directory: Path) -> list[Path]:
    """What Flux's generated kustomization lists for a path without one: each subfolder holding a
    kustomization (whole, not looked into), else every ``.yaml``/``.yml`` file of the tree holding a
    Kubernetes object (``apiVersion`` and ``kind``), in name order; hidden entries skipped. A file too big
    or malformed to tell is listed, for kustomize to name its problem."""
    out: list[Path] = []
    stack = [directory]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(path)
            elif path.suffix in PACKAGE_SUFFIXES and entry.is_file() and _holds_objects(path):
                out.append(path)
        for sub in reversed(subfolders):
            if any((sub / name).is_file() for name in KUSTOMIZATION_FILES):
                out.append(sub)
            else:
                stack.append(sub)
    return sorted(out)


_ALIAS_CHECKED: dict[Path, tuple[int, ...]] = {}  # files found free of alias bombs, by stat signature
MAX_CHECKED_FILES = 20_000


def check_aliases(root: Path) -> None:
    """Refuse a YAML file under ``root`` whose aliases expand past the package limits, before kustomize
    reads it: kustomize expands aliases itself (a "billion laughs" file of 1 kB kept it busy for minutes).
    Only files holding both ``&`` and ``*`` are counted (on the parser's events, constant memory), each
    once per change; hidden folders are skipped, and at most :data:`MAX_CHECKED_FILES` files are looked at.
    Raises PackageError naming the file and line."""
    limits = package_limits()
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = Path(folder) / name
            if path.suffix not in (*PACKAGE_SUFFIXES, ".json") or seen >= MAX_CHECKED_FILES:
                continue
            seen += 1
            try:
                st = path.stat()
                signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                if _ALIAS_CHECKED.get(path) == signature or st.st_size > kustomize_limits().max_bytes:
                    continue
                raw = path.read_bytes()
            except OSError:
                continue
            if b"&" in raw and b"*" in raw:
                try:
                    check_events(raw.decode("utf-8", errors="replace"), path, limits)
                except YamlLimitError as exc:
                    if "alias" in exc.problem or "nodes" in exc.problem:
                        raise PackageError(path, "", exc.problem, exc.fix, exc.line) from None
            _ALIAS_CHECKED[path] = signature


def _holds_objects(path: Path) -> bool:
    from engine.base.loader import load_documents

    try:
        docs = load_documents(path, package_limits())
    except YamlLimitError:
        return True
    return any(isinstance(d.data, dict) and "apiVersion" in d.data and "kind" in d.data for d in docs)


def _run(command: list[str], directory: Path, timeout: float) -> str:
    """Run kustomize; its stdout read up to the limit (the process killed past it or past ``timeout``)."""
    limits = kustomize_limits()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            out = proc.stdout.read(limits.max_bytes + 1)
            if len(out) > limits.max_bytes:
                proc.kill()
                raise PackageError(directory, "", f"kustomize build printed more than {limits.max_bytes} bytes",
                                   f"set {limits.env} to raise the limit")
            code = proc.wait()
        finally:
            timer.cancel()
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if code != 0:
            if timed_out.is_set():
                raise PackageError(directory, "", f"kustomize build took longer than {timeout:.0f} s")
            err.seek(0)
            said = err.read()[-_STDERR_TAIL:].decode("utf-8", errors="replace").strip()
            raise PackageError(directory, "", f"kustomize build failed: {said or f'exit code {code}'}",
                               "fix the file kustomize names")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageError(directory, "", f"kustomize build printed no UTF-8 text (byte {exc.start})") from None


def object_file(kind: str, namespace: str, name: str) -> str:
    """The file an object is written to: ``<namespace>.<Kind>.<name>.yaml`` (``_cluster`` for cluster-scoped
    objects), stable across builds; a digest of them when a part is not a plain name."""
    parts = (namespace or "_cluster", kind, name)
    if all(_SAFE.fullmatch(p) or p == "_cluster" for p in parts):
        return ".".join(parts) + ".yaml"
    return "object-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16] + ".yaml"


def objects(output: str, directory: Path, variables: Variables | None,
            memo: dict[str, BuiltObject] | None = None, base: Path | None = None) -> Built:
    """The objects of a build's ``output``, each substituted with ``variables`` (None: no post-build
    substitution), kustomize's origin annotation taken out of each and its path (relative to ``base``,
    :class:`Output`) made the object's ``origin``. An object whose substitution fails is reported (naming it
    and the variables) and listed in ``kept``; the others count. ``memo``: the objects of the previous call
    with the same variables by their built text, reused (an unchanged object is not parsed again), and
    replaced by this call's. Raises PackageError when the output holds more objects than the package limits allow, or an
    object is unreadable or over a limit."""
    limits = package_limits()
    chunks = [c for c in _SEPARATOR.split(output) if c.strip()]
    if len(chunks) > limits.max_documents:
        exc = documents_error(directory, limits, None)
        raise PackageError(directory, "", f"kustomize build: {exc.problem}", exc.fix)
    built: list[BuiltObject] = []
    errors: list[PackageError] = []
    kept: set[str] = set()
    unsubstituted = 0
    previous = dict(memo or {})
    if memo is not None:
        memo.clear()
    for index, annotated in enumerate(chunks):
        number = index + 1
        chunk, declared = without_origin(annotated)
        origin = Path(os.path.normpath(base / declared)) if base is not None and declared else None
        known = previous.get(annotated)
        if known is not None:
            built.append(known)
            unsubstituted += variables is None and references(chunk)
            if memo is not None:
                memo[annotated] = known
            continue
        # One parse per object: before substitution only when it may opt out, or its substitution fails.
        substituting = variables is not None and substitutable(chunk) and not (
            DISABLE_KEY in chunk and disabled(_object(chunk, number, directory)))
        if variables is not None and substituting:
            try:
                text = substitute(chunk, variables.values)
            except SubstitutionError as exc:
                kind, namespace, name = _identity(_object(chunk, number, directory), variables.values)
                ref = _ref(kind, namespace, name)
                errors.append(PackageError(origin or directory, "", f"{ref}: {exc}", _fix(exc, variables)))
                kept.add(object_file(kind, namespace, name))
                continue
            try:
                data = _object(text, number, directory)  # a value may have broken the YAML, as in Flux
            except PackageError as exc:
                kind, namespace, name = _identity(_object(chunk, number, directory), variables.values)
                errors.append(PackageError(origin or directory, "", f"{_ref(kind, namespace, name)}: after "
                                           f"substitution: {exc.problem}", "check the variables' values: each is "
                                           "put into the YAML text as it is"))
                kept.add(object_file(kind, namespace, name))
                continue
        else:
            text, data = chunk, _object(chunk, number, directory)
            unsubstituted += variables is None and references(chunk)
        kind, namespace, name = _identity(data, None)
        ref = _ref(kind, namespace, name)
        header = f"# {ref}, from `kustomize build {directory}` (helmdeck --kustomize)\n"
        built.append(BuiltObject(object_file(kind, namespace, name), ref, header + text, origin))
        if memo is not None:
            memo[annotated] = built[-1]
    return Built(tuple(built), tuple(errors), frozenset(kept), unsubstituted)


_ORIGIN_LINE = re.compile(r"^    config\.kubernetes\.io/origin: \|\n((?:      .*\n)+)", re.MULTILINE)


def without_origin(chunk: str) -> tuple[str, str]:
    """An object as kustomize printed it, without its :data:`ORIGIN_ANNOTATION` (and the ``annotations``
    mapping it leaves empty), and the annotation's ``path`` ("" when none: kustomize generated the object).
    kustomize prints the annotation as a block (``path: ...``, for a remote base also ``repo:``/``ref:``) at
    ``metadata.annotations`` of the top-level object."""
    found = _ORIGIN_LINE.search(chunk)
    if found is None:
        return chunk, ""
    before, after = chunk[:found.start()], chunk[found.end():]
    if before.endswith("  annotations:\n") and not after.startswith("    "):  # it was the only one
        before = before[:-len("  annotations:\n")]
    text = before + after
    path = next((line.strip()[len("path:"):].strip() for line in found[1].splitlines()
                 if line.strip().startswith("path:")), "")
    remote = any(line.strip().startswith("repo:") for line in found[1].splitlines())
    return text, "" if remote else path


def _ref(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def _object(text: str, number: int, directory: Path) -> dict[str, object]:
    """Object ``number`` of the build, parsed (:func:`_parse`). Raises PackageError when it is no object."""
    data = _parse(text, number, directory)
    if not isinstance(data, dict):
        raise PackageError(directory, "", f"object {number} of the build is not a mapping")
    return data


def _identity(data: dict[str, object], values: Mapping[str, str] | None) -> tuple[str, str, str]:
    """``(kind, namespace, name)`` of an object, substituted with ``values`` (None: as written) where that
    succeeds: an object's file is named after what it becomes, and one that fails keeps that file."""
    meta = data.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    out = []
    for raw in (data.get("kind"), meta.get("namespace"), meta.get("name")):
        text = str(raw or "")
        if values is not None:
            with contextlib.suppress(SubstitutionError):
                text = substitute(text, values)
        out.append(text)
    return out[0], out[1], out[2]


def _fix(exc: SubstitutionError, variables: Variables) -> str:
    if "not set" in str(exc):
        names = ", ".join(exc.names)
        return (f"pass --var {exc.names[0]}=VALUE or --vars-from FILE, or give the reference a default: "
                f"${{{exc.names[0]}:=default}}" + (f" (set: {', '.join(sorted(variables.values))})"
                                                   if variables.values and len(names) < 200 else ""))
    return "rewrite the reference"


def _parse(text: str, number: int, directory: Path) -> object:
    """Object ``number`` of the build parsed within the package limits. Raises PackageError."""
    limits = package_limits()
    where = f"object {number} of the build"
    size = len(text.encode())
    if size > limits.max_bytes:
        raise PackageError(directory, "", f"{where}: {size} bytes, over the limit of {limits.max_bytes} bytes",
                           f"set {limits.env} to raise it")
    try:
        return parse_text(text, Path(where), limits).data
    except YamlLimitError as exc:
        line = f", line {exc.line}" if exc.line else ""
        raise PackageError(directory, "", f"{where}{line}: {exc.problem}", exc.fix) from None


def write_objects(folder: Path, built: Iterable[BuiltObject], kept: Iterable[str] = ()) -> set[Path]:
    """Make ``folder`` hold exactly the files of ``built`` (and ``kept``, left as they are); returns the
    paths written or removed. Files are written owner-only (a Secret's substituted value may be in one)."""
    wanted = {b.file: b for b in built}
    keep = set(kept)
    touched: set[Path] = set()
    for path in folder.iterdir():
        if path.name not in wanted and path.name not in keep:
            path.unlink(missing_ok=True)
            touched.add(path)
    for name, obj in wanted.items():
        path = folder / name
        data = obj.text.encode()
        with contextlib.suppress(OSError):
            if path.read_bytes() == data:
                continue
        tmp = folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.replace(path)
        touched.add(path)
    return touched
