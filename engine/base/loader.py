"""Bounded YAML: package, values and Chart.yaml files parsed so that no file can hurt.

Every file helmdeck reads as YAML goes through :func:`load_yaml`:

- a size limit is checked before reading (the error names the file and the limit);
- one streaming pass over libyaml's events (C speed, constant memory) bounds the
  nesting depth and counts what aliases would expand to, so a "billion laughs"
  file is refused in milliseconds ("aliases expand past N nodes", with its line)
  before anything is built;
- a text over 1 MiB (``EVENT_CHECK_CHARS``) is counted on the same events even without
  aliases: composing holds every node with its marks (a 48 MB, 8-million-node file took
  3.7 GB and minutes), so a file with too many nodes is refused before any is built;
- only then is the document composed and constructed, with libyaml
  (``yaml.CSafeLoader``; the pure-Python ``SafeLoader`` only if libyaml is missing).

Package files may hold several documents (a Package with its HelmRepository, say):
:func:`load_documents` reads them all, with the limits applied to the whole file
(size, node count and alias expansion summed over its documents).

This module imports only the standard library and PyYAML: the post-renderer plugin
(:mod:`engine.helm.postrender_plugin`) runs a copy of it outside helmdeck's tree.

A parsed file is cached by path and its stat signature (device, inode, size,
mtime), so each file is parsed once per change, however often it is asked for.
Cached documents are shared: callers must not mutate them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# libyaml's emitter too: the pure-Python one takes about 5 s for 1 MB of values (a Values tab, a helm values file).
Dumper: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_MIB = 1024 * 1024
# Texts longer than this are counted on the parser's events before composing (composed nodes cost
# hundreds of bytes each); shorter ones are composed and their tree checked: one parse instead of two.
EVENT_CHECK_CHARS = _MIB
_SERIALS = itertools.count(1)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


@dataclass(frozen=True)
class Limits:
    """Bounds on one YAML file: ``max_bytes`` on disk, ``max_nodes`` nodes and ``max_chars`` scalar
    characters once aliases are expanded, ``max_depth`` levels of nesting, ``max_documents`` documents.

    ``env`` names the environment variable that raises ``max_bytes``, ``nodes_env`` the one that raises
    ``max_nodes``, ``depth_env`` ``max_depth`` and ``documents_env`` ``max_documents`` (each said in its error).
    """

    max_bytes: int
    env: str = ""
    max_nodes: int = 1_000_000
    max_chars: int = 64 * _MIB
    max_depth: int = 64
    nodes_env: str = ""
    depth_env: str = ""
    max_documents: int = 10_000
    documents_env: str = ""

    def depth_error(self, file: Path, line: int | None) -> YamlLimitError:
        """The one wording of too deep nesting: the limit, and the variable that raises it when there is one."""
        fix = (f"flatten the structure, or set {self.depth_env} to raise the limit" if self.depth_env
               else "flatten the structure")
        return YamlLimitError(file, f"nesting deeper than {self.max_depth} levels", line, fix)


def _depth() -> dict[str, Any]:
    return {"max_depth": _env_int("HELMDECK_MAX_YAML_DEPTH", 64), "depth_env": "HELMDECK_MAX_YAML_DEPTH"}


def package_limits() -> Limits:
    """Package files: 1 MiB unless ``HELMDECK_MAX_PACKAGE_BYTES`` says otherwise; 64 levels of nesting
    (``HELMDECK_MAX_YAML_DEPTH``); 10,000 documents (objects) per file (``HELMDECK_MAX_DOCUMENTS``)."""
    return Limits(_env_int("HELMDECK_MAX_PACKAGE_BYTES", _MIB), "HELMDECK_MAX_PACKAGE_BYTES", **_depth(),
                  max_documents=_env_int("HELMDECK_MAX_DOCUMENTS", 10_000), documents_env="HELMDECK_MAX_DOCUMENTS")


def kustomize_limits() -> Limits:
    """The output of one ``kustomize build`` (``--kustomize DIR``): 16 MiB unless
    ``HELMDECK_MAX_KUSTOMIZE_BYTES`` says otherwise; each object in it is then held to the package limits
    (:func:`package_limits`: its size, nesting, aliases; the number of objects, ``HELMDECK_MAX_DOCUMENTS``)."""
    return dataclasses.replace(package_limits(), max_bytes=_env_int("HELMDECK_MAX_KUSTOMIZE_BYTES", 16 * _MIB),
                               env="HELMDECK_MAX_KUSTOMIZE_BYTES")


def values_limits() -> Limits:
    """Values files: 8 MiB unless ``HELMDECK_MAX_VALUES_BYTES`` says otherwise (helm keeps the
    values in a release record, which Kubernetes caps at about 1 MiB compressed); 64 levels of nesting
    (``HELMDECK_MAX_YAML_DEPTH``)."""
    return Limits(_env_int("HELMDECK_MAX_VALUES_BYTES", 8 * _MIB), "HELMDECK_MAX_VALUES_BYTES", **_depth())


def chart_limits() -> Limits:
    """Chart.yaml: 1 MiB."""
    return Limits(_MIB)


def manifest_limits() -> Limits:
    """Bounds on one rendered manifest document: 1 million nodes and 64 MiB of scalars once aliases are
    expanded, 200 levels of nesting (a CRD's openAPIV3Schema nests deep; Kubernetes objects need no more)."""
    return Limits(64 * _MIB, max_nodes=1_000_000, max_chars=64 * _MIB, max_depth=200)


class YamlLimitError(ValueError):
    """A YAML file is over a limit or malformed. ``problem`` and ``line`` (1-based, or None) say where."""

    def __init__(self, file: Path, problem: str, line: int | None = None, fix: str = ""):
        self.file = file
        self.problem = problem
        self.line = line
        self.fix = fix
        super().__init__(f"{self.located}" + (f" ({fix})" if fix else ""))

    @property
    def located(self) -> str:
        """``file:line: problem`` without the fix (to quote inside another error that carries the fix once)."""
        return f"{self.file}:{self.line}: {self.problem}" if self.line else f"{self.file}: {self.problem}"


@dataclass(frozen=True)
class Parsed:
    """One parsed YAML document: the data and its composed node (for line numbers); None when empty.

    ``serial`` is unique per parse: equal serials mean the same parse of an unchanged file.
    """

    data: Any
    node: yaml.Node | None
    serial: int = field(default_factory=lambda: next(_SERIALS))


def check_events(text: str, file: Path, limits: Limits) -> None:
    """One pass over the parser's events: refuse too deep nesting and alias expansion past the limits.

    Raises YamlLimitError naming the line. Constant memory besides one entry per anchor.
    """
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, expanded scalar characters)
    stack: list[tuple[str | None, int, int]] = []  # open collections: (anchor, nodes, chars) at their start
    nodes = chars = documents = 0
    aliased = False
    try:
        for event in yaml.parse(text, Loader=Loader):
            if isinstance(event, yaml.ScalarEvent):
                nodes += 1
                chars += len(event.value)
                if event.anchor:
                    sizes[event.anchor] = (1, len(event.value))
            elif isinstance(event, yaml.CollectionStartEvent):
                nodes += 1
                stack.append((event.anchor, nodes, chars))
                if len(stack) > limits.max_depth:
                    raise limits.depth_error(file, _line(event))
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, start_nodes, start_chars = stack.pop()
                if anchor:
                    sizes[anchor] = (nodes - start_nodes + 1, chars - start_chars)
            elif isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > limits.max_documents:
                    raise documents_error(file, limits, _line(event))
                continue
            elif isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "")
                if size is None:
                    raise YamlLimitError(file, f"alias *{event.anchor} refers to no finished anchor",
                                         _line(event), "define the anchor (&name) before its aliases")
                nodes += size[0]
                chars += size[1]
                aliased = True
            else:
                continue
            if nodes > limits.max_nodes and not aliased:
                raise YamlLimitError(file, f"more than {limits.max_nodes} nodes", _line(event),
                                     f"set {limits.nodes_env} to raise the limit" if limits.nodes_env
                                     else "split the file")
            if nodes > limits.max_nodes:
                raise YamlLimitError(file, f"aliases expand past {limits.max_nodes} nodes", _line(event),
                                     "write the values out or use fewer nested aliases")
            if chars > limits.max_chars:
                raise YamlLimitError(file, f"aliases expand past {limits.max_chars} characters", _line(event),
                                     "write the values out or use fewer nested aliases")
    except yaml.YAMLError as exc:
        raise syntax_error(file, exc) from None


def check_tree(node: yaml.Node, file: Path, limits: Limits, depth: int = 1) -> None:
    """Bound the nesting depth and node count of a composed document without aliases (iterative);
    ``depth`` is the root's level (0 for a list holding the documents of a stream)."""
    stack: list[tuple[yaml.Node, int]] = [(node, depth)]
    count = 0
    while stack:
        current, depth = stack.pop()
        count += 1
        if depth > limits.max_depth:
            raise limits.depth_error(file, current.start_mark.line + 1)
        if count > limits.max_nodes:
            raise YamlLimitError(file, f"more than {limits.max_nodes} nodes", current.start_mark.line + 1,
                                 f"set {limits.nodes_env} to raise the limit" if limits.nodes_env
                                 else "split the values")
        if isinstance(current, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def parse_text(text: str, file: Path, limits: Limits, loader: type[Any] | None = None) -> Parsed:
    """Check, compose and construct one YAML document (with ``loader``, a subclass of :data:`Loader` with
    other scalar rules, default :data:`Loader`). Raises YamlLimitError.

    A text with anchors, or over ``EVENT_CHECK_CHARS``, is first checked on the parser's events
    (:func:`check_events`), so that nothing is composed before its node count and expanded aliases are
    known to stay within the limits; a short one without is composed and its tree checked
    (:func:`check_tree`): one parse instead of two.
    """
    counted = _count_events(text)
    if counted:
        check_events(text, file, limits)  # before composing: aliases and node count within the limits
    with _loading(text, file, loader or Loader) as reader:
        node = reader.get_single_node()
        if node is not None and not counted:
            check_tree(node, file, limits)  # no aliases: the composed tree is as big as the file
        data = reader.construct_document(node) if node is not None else None
    return Parsed(data, node)


def parse_documents(text: str, file: Path, limits: Limits) -> tuple[Parsed, ...]:
    """Check, compose and construct every document of a YAML stream (empty ones dropped; one empty
    ``Parsed`` for an empty file). The limits apply to the whole stream. Raises YamlLimitError."""
    counted = _count_events(text)
    if counted:
        check_events(text, file, limits)  # the whole stream: anchors in one document, aliases summed
    with _loading(text, file) as loader:
        nodes: list[yaml.Node] = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                nodes.append(node)
                if len(nodes) > limits.max_documents:
                    raise documents_error(file, limits, node.start_mark.line + 1)
        if not counted and nodes:
            # counted together; the list around them is no level of theirs
            check_tree(yaml.SequenceNode("tag:yaml.org,2002:seq", nodes), file, limits, depth=0)
        out = [Parsed(loader.construct_document(node), node) for node in nodes]
    return tuple(out) or (Parsed(None, None),)


def documents_error(file: Path, limits: Limits, line: int | None) -> YamlLimitError:
    """More documents in one file than ``limits.max_documents``: the limit and its variable."""
    fix = f"split the file, or set {limits.documents_env} to raise the limit" if limits.documents_env \
        else "split the file"
    return YamlLimitError(file, f"more than {limits.max_documents} documents", line, fix)


def _count_events(text: str) -> bool:
    """Whether ``text`` is checked on its events before composing: it may hold aliases, or is long."""
    return "&" in text or len(text) > EVENT_CHECK_CHARS


@contextlib.contextmanager
def _loading(text: str, file: Path, kind: type[Any] | None = None) -> Iterator[Any]:
    """A loader (``kind``, default :data:`Loader`) over ``text``, disposed after; YAML errors and too deep
    nesting raised as YamlLimitError."""
    loader = (kind or Loader)(text)
    try:
        yield loader
    except yaml.YAMLError as exc:
        raise syntax_error(file, exc) from None
    except RecursionError:
        raise YamlLimitError(file, "structure too deeply nested", None, "flatten the structure") from None
    finally:
        loader.dispose()


def _line(event: yaml.Event) -> int | None:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else None


def syntax_error(file: Path, exc: yaml.YAMLError) -> YamlLimitError:
    """A YAML syntax error as YamlLimitError naming its line and a fix; when the construct it is in (libyaml's
    context: a quoted string, a flow sequence) starts on another line, that line too: an unclosed quote is
    found only where the file ends."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context, opened = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and opened is not None and (mark is None or opened.line != mark.line):
        problem = f"{problem}, {context} that starts at line {opened.line + 1}"
    fix = "fix the YAML syntax"
    if "nesting depth" in problem:  # libyaml's own bound (1,000 levels) met before ours is checked
        fix = "flatten the structure"
    if "another document" in problem or "expected a single document" in problem:
        fix = "write one document per file (no '---' between documents)"
    return YamlLimitError(file, f"YAML error: {problem}", mark.line + 1 if mark is not None else None, fix)


def racy(mtime_ns: int) -> bool:
    """True when a file changed so recently that a same-size rewrite in the same clock tick would
    keep its stat signature (git's "racy" entries): such a file is read again rather than trusted."""
    return time.time_ns() - mtime_ns < 2_000_000_000


Reader = Callable[[str, Path, Limits], Parsed]
"""A reader of one YAML document: :func:`parse_text`, or one with other scalar rules."""


class YamlCache:
    """Parsed files by path, reused while the file's stat signature is unchanged. Thread-safe, bounded LRU."""

    def __init__(self, size: int = 4096):
        self._size = size
        self._lock = threading.Lock()
        # (path, every document?, reader) -> (stat signature, one document or all of them)
        self._entries: OrderedDict[tuple[Path, bool, Reader | None], tuple[tuple[int, ...], Any]] = OrderedDict()
        self.parses = 0  # files actually parsed (tests and benchmarks read it)

    def load(self, file: Path, limits: Limits, read: Reader | None = None) -> Parsed:
        """The parsed document of ``file`` (read by ``read``, default :func:`parse_text`); parses only when the
        file changed. Raises YamlLimitError."""
        parsed: Parsed = self._load(file, limits, False, read)
        return parsed

    def load_all(self, file: Path, limits: Limits) -> tuple[Parsed, ...]:
        """Every document of ``file`` (:func:`parse_documents`), cached as :meth:`load`. Raises YamlLimitError."""
        docs: tuple[Parsed, ...] = self._load(file, limits, True)
        return docs

    def _load(self, file: Path, limits: Limits, every: bool, read: Reader | None = None) -> Any:
        try:
            st = file.stat()
        except OSError as exc:
            raise YamlLimitError(file, f"cannot read file ({exc.strerror})") from None
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            hit = self._entries.get((file, every, read))
            if hit is not None and hit[0] == signature and not racy(st.st_mtime_ns):
                self._entries.move_to_end((file, every, read))
                return hit[1]
        if st.st_size > limits.max_bytes:
            fix = f"set {limits.env} to raise it" if limits.env else "make the file smaller"
            raise YamlLimitError(file, f"file is {st.st_size} bytes, over the limit of {limits.max_bytes} bytes", None,
                                 fix)
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise YamlLimitError(file, f"cannot read file ({exc.strerror})") from None
        if len(raw) > limits.max_bytes:  # grew since stat
            raise YamlLimitError(file, f"file is over the limit of {limits.max_bytes} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlLimitError(file, f"not UTF-8 text (byte {exc.start})", None, "save the file as UTF-8") from None
        parsed = parse_documents(text, file, limits) if every else (read or parse_text)(text, file, limits)
        with self._lock:
            self.parses += 1
            self._entries[(file, every, read)] = (signature, parsed)
            self._entries.move_to_end((file, every, read))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return parsed


# One cache per process: files are the same files whoever asks.
CACHE = YamlCache()


def load_yaml(file: Path, limits: Limits, read: Reader | None = None) -> Parsed:
    """Parse ``file`` within ``limits`` (cached per change of the file; read by ``read``, default
    :func:`parse_text`). Raises YamlLimitError."""
    return CACHE.load(file, limits, read)


def load_documents(file: Path, limits: Limits) -> tuple[Parsed, ...]:
    """Every document of ``file`` within ``limits``, applied to the whole file (cached per change of the
    file). Raises YamlLimitError."""
    return CACHE.load_all(file, limits)
