"""helmdeck's post-renderer: the user's kustomize steps, then commonMetadata, then helmdeck's labels.

helm pipes the rendered manifests (a multi-document YAML stream) through a
post-renderer and applies what comes out. This one runs, in order (as Flux's
``BuildPostRenderers``):

1. each ``spec.postRenderers[].kustomize`` step with the real kustomize
   (``kustomize build`` of a temporary directory, mode 0700, removed after:
   the input as ``helm-output.yaml`` and a kustomization with the step's
   ``patches`` and ``images``);
2. ``spec.commonMetadata``: its labels and annotations on every object's metadata;
3. helmdeck's labels (``KEY=VALUE`` arguments), which win over commonMetadata's.

Steps 2 and 3 set ``metadata.labels`` / ``metadata.annotations`` on every
object, including each item of a ``*List`` kind, and leave every other byte as
the input had it: the stream is parsed only to find *where* the entries go
(PyYAML node marks), then the text is edited at those offsets. Comments,
``# Source:`` lines, document separators, empty documents, quoting and key
order stay as they were, so without kustomize steps the checksum of the output
changes only with the labels. The user's settings come as ``--config=PATH``,
a JSON file ``{"kustomize": binary, "postRenderers": [...], "commonMetadata":
{...}}`` (:mod:`engine.package.postrender`'s document).

The stream is parsed by the bounded loader (:mod:`engine.base.loader`, within
``RENDER_LIMITS``): a chart's templates can emit an alias bomb or a 10,000-level
nesting, which is refused with a StampError (helm shows it as the action's error).

It runs in the helmdeck process that runs helm (:func:`run`, served to the
executable helm starts, :mod:`engine.helm.postrender_client`), or in that
executable alone, copied into a helmdeck-owned directory by
:mod:`engine.helm.postrender_plugin` with copies of the loader and the client
beside it; it must import nothing but the standard library, PyYAML, that
loader and that client.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from engine.base.loader import Limits, Parsed, YamlLimitError, parse_documents

_MIB = 1024 * 1024
# The whole rendered stream: 2 million nodes and 256 MiB of scalars once aliases are expanded (a chart with
# large CRDs renders a few hundred thousand), 200 levels of nesting (a CRD's openAPIV3Schema nests deep).
RENDER_LIMITS = Limits(256 * _MIB, max_nodes=2_000_000, max_chars=256 * _MIB, max_depth=200)
# Kubernetes label syntax (apimachinery validation): optional DNS-subdomain prefix, 63-character name/value.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_NULL_TAG = "tag:yaml.org,2002:null"
CONFIG_FLAG = "--config="
KUSTOMIZE_TIMEOUT = 120.0


class StampError(ValueError):
    """The manifests cannot be stamped (not YAML, or labels that are not a mapping)."""


@dataclass(frozen=True)
class _Edit:
    """Replace ``text[start:end]`` with ``new`` (an insertion when start == end)."""

    start: int
    end: int
    new: str


def parse_labels(args: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a label map; raises StampError on a bad key or value."""
    out: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not _LABEL_KEY.match(key):
            raise StampError(f"bad label argument {arg!r}: want KEY=VALUE with a Kubernetes label key")
        if not _LABEL_VALUE.match(value):
            raise StampError(f"bad label value for {key}: {value!r} is not a Kubernetes label value")
        out[key] = value
    return out


def stamp(text: str, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> str:
    """Return ``text`` with ``labels`` (and ``annotations``) set on every object of the YAML stream.

    Documents that are empty, comments only or not a mapping pass through
    unchanged; ``*List`` kinds get them on each item (not on the list).
    An existing entry with one of the keys is overwritten. Raises StampError
    when ``text`` is not YAML or an object's ``metadata.labels`` (or
    ``annotations``) is not a mapping.
    """
    fields = {name: {k: _quote(v) for k, v in values.items()}
              for name, values in (("labels", labels), ("annotations", annotations or {})) if values}
    if not fields:
        return text
    edits: list[_Edit] = []
    seen: set[int] = set()
    for parsed in _parse(text):
        if isinstance(parsed.node, MappingNode):
            edits += _object_edits(parsed.node, text, fields, seen)
    out = text
    # An aliased labels mapping yields the same edit twice; apply it once.
    for edit in sorted(set(edits), key=lambda e: e.start, reverse=True):
        out = out[: edit.start] + edit.new + out[edit.end :]
    return out


def _parse(text: str) -> tuple[Parsed, ...]:
    """Every document of a rendered stream within ``RENDER_LIMITS``. Raises StampError."""
    try:
        return parse_documents(text, Path("rendered manifests"), RENDER_LIMITS)
    except YamlLimitError as exc:
        if exc.problem.startswith("YAML error"):
            raise StampError(f"rendered manifests are not valid YAML: {exc}") from None
        raise StampError(str(exc)) from None  # "rendered manifests:LINE: <limit> (fix)"


def _get(mapping: MappingNode, key: str) -> tuple[ScalarNode, Node] | None:
    for k, v in mapping.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def _quote(value: str) -> str:
    # A JSON string is a YAML double-quoted scalar: never re-typed (no "true" or "1.0" surprises).
    return json.dumps(value, ensure_ascii=False)


def _flow(items: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_quote(k)}: {v}" for k, v in items.items()) + "}"


def _object_edits(obj: MappingNode, text: str, fields: Mapping[str, Mapping[str, str]],
                  seen: set[int]) -> list[_Edit]:
    """The edits that set ``fields`` (``labels``/``annotations`` -> key -> quoted value) on ``obj`` (or on
    each item of a ``*List``); ``seen`` skips aliased nodes met before."""
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    kind = _get(obj, "kind")
    items = _get(obj, "items")
    if kind is not None and str(kind[1].value).endswith("List") and items is not None:
        edits: list[_Edit] = []
        if isinstance(items[1], SequenceNode):
            for item in items[1].value:
                if isinstance(item, MappingNode):
                    edits += _object_edits(item, text, fields, seen)
        return edits
    whole = {name: _flow(values) for name, values in fields.items()}
    meta = _get(obj, "metadata")
    if meta is None:
        return [_insert_entries(obj, {"metadata": _flow(whole)}, text)]
    if _is_null(meta[1]):
        return [_replace(meta[1], _flow(whole), text)]
    if not isinstance(meta[1], MappingNode):
        raise StampError(f"metadata is not a mapping at line {meta[1].start_mark.line + 1}")
    out: list[_Edit] = []
    absent: dict[str, str] = {}
    for name, values in fields.items():
        current = _get(meta[1], name)
        if current is None:
            absent[name] = whole[name]
        elif _is_null(current[1]):
            out.append(_replace(current[1], whole[name], text))
        elif not isinstance(current[1], MappingNode):
            raise StampError(f"metadata.{name} is not a mapping at line {current[1].start_mark.line + 1}")
        else:
            out += _mapping_edits(current[1], values, text)
    if absent:
        out.append(_insert_entries(meta[1], absent, text))
    return out


def _mapping_edits(mapping: MappingNode, values: Mapping[str, str], text: str) -> list[_Edit]:
    """Overwrite the keys ``mapping`` has, add the others."""
    out: list[_Edit] = []
    missing: dict[str, str] = {}
    for key, value in values.items():
        found = _get(mapping, key)
        if found is None:
            missing[key] = value
        else:
            out.append(_replace(found[1], value, text))
    if missing:
        out.append(_insert_entries(mapping, missing, text))
    return out


def _insert_entries(mapping: MappingNode, entries: Mapping[str, str], text: str) -> _Edit:
    """Add ``entries`` (key -> YAML text) before the first entry of ``mapping``, in its own style."""
    pairs = [f"{_quote(k)}: {v}" for k, v in entries.items()]
    if mapping.flow_style or not mapping.value:
        brace = text.index("{", mapping.start_mark.index)  # skips an anchor or tag before the brace
        return _Edit(brace + 1, brace + 1, ", ".join(pairs) + (", " if mapping.value else ""))
    first = mapping.value[0][0].start_mark
    # At the first key's column: the old first key moves down a line, same indentation.
    indent = " " * first.column
    return _Edit(first.index, first.index, "".join(f"{p}\n{indent}" for p in pairs))


def _replace(node: Node, new: str, text: str) -> _Edit:
    start, end = node.start_mark.index, node.end_mark.index
    old = text[start:end]
    if start == end and (start == 0 or not text[start - 1].isspace()):
        new = " " + new  # an empty value sits right after the colon
    # A block scalar's span includes its line break(s); keep them.
    trailing = old[len(old.rstrip("\n")) :]
    return _Edit(start, end, new + trailing)


def kustomize(text: str, step: Mapping[str, Any], binary: str) -> str:
    """``text`` through one kustomize step (``patches`` / ``images`` of a kustomization) with the real
    ``kustomize build``, in a temporary directory (mode 0700) removed afterwards. Raises StampError
    with kustomize's message when it fails.

    kustomize refuses objects without ``metadata.name`` (hooks with ``generateName``), and could not
    select them anyway: they pass by it unchanged, after its output."""
    docs = [p.data for p in _parse(text) if isinstance(p.data, dict)]
    unnamed = [d for d in docs if not _named(d)]
    if len(unnamed) == len(docs):
        return text  # nothing kustomize could take: it would refuse an input without objects
    if unnamed:
        text = yaml.safe_dump_all([d for d in docs if _named(d)], sort_keys=False)
    work = Path(tempfile.mkdtemp(prefix="helmdeck-kustomize-"))
    try:
        (work / "helm-output.yaml").write_text(text, encoding="utf-8")
        kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                         "resources": ["helm-output.yaml"], **step}
        (work / "kustomization.yaml").write_text(json.dumps(kustomization), encoding="utf-8")
        try:
            proc = subprocess.run([binary, "build", str(work)], capture_output=True, timeout=KUSTOMIZE_TIMEOUT,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StampError(f"cannot run kustomize {binary}: {exc}") from None
        if proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip().replace(str(work) + "/", "")
            raise StampError(f"kustomize build failed: {message}")
        out = proc.stdout.decode("utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out + "---\n" + yaml.safe_dump_all(unnamed, sort_keys=False) if unnamed else out


def _named(doc: Mapping[str, Any]) -> bool:
    """Can kustomize take ``doc``: an object with ``metadata.name``, or a ``*List`` (it takes the items)?"""
    meta = doc.get("metadata")
    return bool(isinstance(meta, dict) and meta.get("name")) or str(doc.get("kind", "")).endswith("List")


def render(text: str, labels: Mapping[str, str], config: Mapping[str, Any]) -> str:
    """The whole post-render: kustomize steps, then commonMetadata, then ``labels`` (which win), over the
    manifests the config's ``postRenderStrategy`` gives them, as helm 4's ``action.PostRenderStrategy`` (pkg/action
    action.go ``renderResources``): ``combined`` (absent: helm 4's default) the whole stream; ``separate`` the
    hooks and the other manifests in two runs; ``nohooks`` the other manifests only, hooks passed on untouched.
    helm 4's CLI has no flag for it and always sends one combined stream: the split is made here, by helm's rule
    for a hook (the ``helm.sh/hook`` annotation, pkg/release/util manifest_sorter.go ``SortManifests``)."""
    strategy = config.get("postRenderStrategy") or "combined"
    if strategy == "combined":
        return _pipeline(text, labels, config)
    hooks, others = _split_hooks(text)
    rendered = _pipeline(others, labels, config) if others.strip() else ""
    if hooks and strategy == "separate":
        hooks = _pipeline(hooks, labels, config)
    return "---\n".join(part for part in (rendered, hooks) if part.strip())


HOOK_ANNOTATION = "helm.sh/hook"
_SEPARATOR = re.compile(r"^---(?=[ \t]|$)", re.M)


def _split_hooks(text: str) -> tuple[str, str]:
    """``(hooks, others)``: the documents of the stream with helm's hook annotation, and the rest, each as the
    text they had (documents joined by ``---`` lines). Raises StampError when a document is not YAML."""
    hooks: list[str] = []
    others: list[str] = []
    for piece in _SEPARATOR.split(text):
        body = piece.removeprefix("\n")
        parsed = [p.data for p in _parse(body) if isinstance(p.data, dict)]
        meta = parsed[0].get("metadata") if parsed else None
        notes = meta.get("annotations") if isinstance(meta, dict) else None
        (hooks if isinstance(notes, dict) and HOOK_ANNOTATION in notes else others).append(body)
    return "---\n".join(h for h in hooks if h.strip()), "---\n".join(o for o in others if o.strip())


def _pipeline(text: str, labels: Mapping[str, str], config: Mapping[str, Any]) -> str:
    """Kustomize steps, then commonMetadata, then ``labels``, over ``text``."""
    for entry in config.get("postRenderers") or ():
        text = kustomize(text, entry.get("kustomize") or {}, str(config.get("kustomize") or "kustomize"))
    common = config.get("commonMetadata") or {}
    return stamp(text, {**(common.get("labels") or {}), **labels}, common.get("annotations") or {})


def run(args: Sequence[str], manifests: bytes) -> tuple[int, bytes, str]:
    """The post-render of ``manifests`` (UTF-8: helm speaks it whatever the locale says) with ``--config=PATH``
    and labels from ``args``: ``(0, output, "")``, ``(2, b"", message)`` on bad arguments, ``(1, b"", message)``
    when the manifests cannot be post-rendered (helm then fails the action with the message). Never raises
    for bad input; the executable (:mod:`engine.helm.postrender_client`) runs it here or in helmdeck's process."""
    try:
        labels, config = _arguments(args)
    except (StampError, OSError, ValueError) as exc:
        return 2, b"", str(exc)
    return _rendered(manifests, labels, config)


def _arguments(args: Sequence[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Labels and the ``--config`` file's settings of ``args``. Raises StampError, OSError, ValueError."""
    labels = parse_labels([a for a in args if not a.startswith(CONFIG_FLAG)])
    config: dict[str, Any] = {}
    for arg in args:
        if arg.startswith(CONFIG_FLAG):
            config = json.loads(Path(arg[len(CONFIG_FLAG):]).read_text(encoding="utf-8"))
    return labels, config


def _rendered(manifests: bytes, labels: Mapping[str, str], config: Mapping[str, Any]) -> tuple[int, bytes, str]:
    try:
        return 0, render(manifests.decode("utf-8"), labels, config).encode("utf-8"), ""
    except (StampError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return 1, b"", str(exc)
