"""Values composition, the one place it happens (DESIGN, "Resolution"), in this order:

1. ``spec.valuesFiles`` in order (parsed by the bounded loader, values limits);
2. the ``valuesFrom`` layers (ConfigMaps and Secrets, read beforehand by the runtime: :class:`ValuesLayer`);
3. inline ``spec.values``;
4. last, every ``targetPath`` value, as Flux's "target path precedence over all".

A remote chart's ``spec.chart.spec.valuesFiles`` (files inside the chart archive, Flux's HelmChart field) are
not user values: merged in order (:func:`chart_defaults`), they become the chart's default values, as
source-controller packages them (engine.resolve.release ``chart_with_defaults``).

Maps merge recursively, anything else replaces (:func:`deep_merge`, as helm's ``-f``).
:func:`compose_values` applies the order; the runtime builds the ``valuesFrom`` layers with
:func:`compose`.

``spec.valuesFrom`` (as Flux's ``ChartValuesFromReferences``): the runtime reads the ConfigMaps and
Secrets (:mod:`engine.runtime.drive.values_objects`) and hands them over as :class:`ObjectData`;
:func:`compose` makes the one layer merged after ``valuesFiles`` and before inline ``values``.
Flux's semantics:

- every object is in the package's namespace;
- without ``targetPath`` the key's content is YAML, merged over the entries
  before it; with it, ``<targetPath>=<content>`` is read as helm's ``--set``
  reads its argument (:mod:`engine.base.strvals`, as Flux's
  ``ReplacePathValue``: commas split, ``{a,b}`` lists, typing, quotes) and set
  after everything else (:class:`TargetValue`, :func:`apply_targets`); with
  ``literal``, the content is set verbatim as one string (Flux's ``ReplacePathLiteralValue``);
- a missing object, or a missing key in an object that exists, is an error
  (:class:`ValuesError`, Flux's Ready reason ``ValuesError``) unless the
  entry is ``optional``; ``optional`` never hides another read error
  (Forbidden, say): the runtime keeps those apart from NotFound.

Bounded as values files: a key's content over the values size limit is
refused, and YAML goes through the bounded loader (parsed once per content).
A key's content and the values files (``spec.valuesFiles``, read by the resolve
cache, and a chart's) are read as helm's ``ReadValues`` reads them
(:mod:`engine.base.helm_values`: ``y`` is true, ``0o17`` is 15).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError, type_name
from engine.base.helm_values import read_values
from engine.base.loader import Parsed, YamlLimitError, values_limits
from engine.base.strvals import Assignment, PathError, apply, target_assignments
from engine.base.strvals import Path as ValuesPath
from engine.base.wire import VALUES_ERROR
from engine.package.model import PackageSpec
from engine.package.values_from import ValuesReference
from engine.sources.cache import chart_file
from engine.sources.errors import SourceError
from engine.sources.repository import ChartTemplate

ObjectKey = tuple[str, str, str]
"""``(kind, namespace, name)`` of a referenced ConfigMap or Secret."""



class ValuesError(PackageError):
    """A ``valuesFrom`` entry cannot be resolved now (object or key missing, unreadable, bad content).

    ``reason`` is Flux's Ready reason; the message names the object (``Secret ns/name``), never its content.
    """

    reason = VALUES_ERROR


@dataclass(frozen=True)
class ObjectData:
    """One referenced object as read: ``data`` maps its keys to their bytes (a Secret's decoded), None
    when the object does not exist; ``error`` is any other read failure (then ``data`` is None);
    ``reader`` the user it was read as (a package's ServiceAccount, impersonated), "" for helmdeck."""

    kind: str
    namespace: str
    name: str
    data: Mapping[str, bytes] | None = field(default=None, repr=False)
    error: str = ""
    version: str = ""
    reader: str = ""

    @property
    def key(self) -> ObjectKey:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class TargetValue:
    """The value of one ``targetPath`` entry: helm ``--set`` assignments set after all other values.
    ``field``/``line`` name the entry, ``what`` the object and key (never the content)."""

    field: str
    line: int
    what: str
    assignments: tuple[Assignment, ...] = dataclass_field(repr=False)
    secret: bool = False


@dataclass(frozen=True)
class Composed:
    """What ``valuesFrom`` gives: ``values`` (the entries without targetPath, to merge after valuesFiles),
    ``targets`` (to set last, in order: :func:`apply_targets`), the ``secret_paths`` of values that came
    from Secrets, and ``digest`` over every input (equal digests, equal values)."""

    values: Mapping[str, Any] = dataclass_field(repr=False)
    secret_paths: tuple[ValuesPath, ...]
    digest: str
    targets: tuple[TargetValue, ...] = ()


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``over`` onto ``base``: maps merge recursively, anything else replaces (as helm's -f)."""
    out = dict(base)
    for key, value in over.items():
        cur = out.get(key)
        if isinstance(cur, Mapping) and isinstance(value, Mapping):
            out[key] = deep_merge(cur, value)
        else:
            out[key] = value
    return out
@dataclass(frozen=True)
class ValuesLayer:
    """Values from a source other than files and inline values (``valuesFrom``: ConfigMaps and Secrets).

    ``origin`` names it for errors; ``secret`` marks all its leaves for masking, ``secret_paths`` some
    of them. ``digest`` (when given) stands for its content: resolutions are cached by it. ``targets``
    (targetPath values) are set after every other value, inline ``values`` included, as Flux.
    """

    values: Mapping[str, Any]
    origin: str
    secret: bool = False
    secret_paths: tuple[ValuesPath, ...] = ()
    digest: str = ""
    targets: tuple[TargetValue, ...] = ()


# valuesFrom plugs in here: given the spec, the layers merged after valuesFiles and before inline values.
ValuesFrom = Callable[[PackageSpec], Sequence[ValuesLayer]]


def compose_values(spec: PackageSpec, files: Sequence[Parsed],
                   layers: Sequence[ValuesLayer]) -> tuple[dict[str, Any], list[ValuesPath]]:
    """``spec``'s values in the module docstring's order from its parsed ``valuesFiles`` (``files``, in
    order) and its ``valuesFrom`` ``layers``; with the paths of values that came from Secrets. Raises
    PackageError (a file not holding a mapping) and ValuesError (a targetPath)."""
    merged: dict[str, Any] = {}
    for i, parsed in enumerate(files):
        data = parsed.data if parsed.data is not None else {}
        if not isinstance(data, dict):
            raise PackageError(spec.file, f"spec.valuesFiles[{i}]",
                               f"{spec.values_files[i]} must hold a mapping, not {type(data).__name__}")
        merged = deep_merge(merged, data)
    secret: list[ValuesPath] = []
    for layer in layers:
        merged = deep_merge(merged, layer.values)
        secret += leaf_paths(layer.values) if layer.secret else layer.secret_paths
    merged = deep_merge(merged, spec.values)
    for layer in layers:
        merged = apply_targets(spec, merged, layer.targets)
    return merged, secret


def chart_defaults(spec: PackageSpec) -> dict[str, Any] | None:
    """The chart's default values ``spec.chart.spec.valuesFiles`` make: those files merged in order (maps
    merge, as source-controller's internal/helm/chart/builder_remote.go ``mergeChartValues``: the chart's own
    ``values.yaml`` only where listed, a missing file skipped under ``ignoreMissingValuesFiles``); None when the
    chart form has none (its ``values.yaml`` stays). Blocking; raises as :func:`chart_values`."""
    form = spec.chart_source
    if not isinstance(form, ChartTemplate) or not form.values_files:
        return None
    merged: dict[str, Any] = {}
    for data in chart_values(spec):
        merged = deep_merge(merged, data)
    return merged


def chart_values(spec: PackageSpec) -> list[dict[str, Any]]:
    """The values of the chart files ``spec.chart.spec.valuesFiles`` names, in order (empty for any other
    chart form). Blocking (reads the archive at ``spec.chart_path``). Raises PackageError naming the
    entry: missing (without ``ignoreMissingValuesFiles``), over the values size limit, malformed, or not
    a mapping."""
    form = spec.chart_source
    if not isinstance(form, ChartTemplate) or not form.values_files:
        return []
    limits = values_limits()
    out: list[dict[str, Any]] = []
    for i, rel in enumerate(form.values_files):
        field = f"spec.chart.spec.valuesFiles[{i}]"
        try:
            raw = chart_file(spec.chart_path, rel, limits.max_bytes, what=f"chart {form.chart!r}")
        except SourceError as exc:
            raise PackageError(spec.file, field, str(exc), f"set {limits.env} to raise the limit") from None
        if raw is None:
            if form.ignore_missing_values_files:
                continue
            raise PackageError(spec.file, field, f"{rel} is not in chart {form.chart!r}",
                               "give a path relative to the chart's folder, or set ignoreMissingValuesFiles: true")
        try:
            parsed = read_values(raw.decode("utf-8"), Path(f"{form.chart}/{rel}"), limits)
        except UnicodeDecodeError:
            raise PackageError(spec.file, field, f"{rel} in the chart is not UTF-8 text") from None
        except YamlLimitError as exc:
            raise PackageError(spec.file, field, exc.located, exc.fix) from None
        data = parsed.data if parsed.data is not None else {}
        if not isinstance(data, dict):
            raise PackageError(spec.file, field, f"{rel} in the chart must hold a mapping, not {type(data).__name__}")
        out.append(data)
    return out


def object_keys(spec: PackageSpec) -> list[ObjectKey]:
    """The objects ``spec`` refers to, in order, each once."""
    return list(dict.fromkeys((ref.kind, spec.namespace, ref.name) for ref in spec.values_from))


def compose(spec: PackageSpec, objects: Mapping[ObjectKey, ObjectData]) -> Composed:
    """Compose ``spec.valuesFrom`` from ``objects`` (see the module docstring). Raises ValuesError."""
    result: dict[str, Any] = {}
    secret: list[ValuesPath] = []
    targets: list[TargetValue] = []
    digest = hashlib.sha256()
    limit = values_limits()
    for ref in spec.values_from:
        what = ref.describe(spec.namespace)
        obj = objects.get((ref.kind, spec.namespace, ref.name))
        if obj is None:
            raise _error(spec, ref, f"{what} has not been read", "run with a cluster (valuesFrom reads it)")
        if obj.error and obj.reader:
            account = f"ServiceAccount {spec.namespace}/{spec.service_account_name}"
            raise _error(spec, ref, f"cannot read {what} as {obj.reader} (spec.serviceAccountName): {obj.error}",
                         f"let {account} get, list and watch {ref.kind.lower()}s in {spec.namespace} (a Role "
                         "and RoleBinding)")
        if obj.error:
            raise _error(spec, ref, f"cannot read {what}: {obj.error}",
                         f"let helmdeck get, list and watch {ref.kind.lower()}s in {spec.namespace}")
        if obj.data is None or ref.values_key not in obj.data:
            if ref.optional:
                digest.update(f"{ref}\0absent\0".encode())
                continue
            if obj.data is None:
                raise _error(spec, ref, f"{what} not found", f"create the {ref.kind}, or set optional: true")
            raise _error(spec, ref, f"{what} has no key {ref.values_key!r}",
                         "add the key, fix valuesKey, or set optional: true")
        raw = obj.data[ref.values_key]
        if len(raw) > limit.max_bytes:
            raise _error(spec, ref, f"{what} key {ref.values_key!r} is {len(raw)} bytes, over the limit of "
                         f"{limit.max_bytes} bytes", f"set {limit.env} to raise it")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _error(spec, ref, f"{what} key {ref.values_key!r} is not UTF-8 text",
                         "store the values as UTF-8 YAML") from None
        digest.update(f"{ref}\0{len(raw)}\0".encode() + raw)
        if ref.target_path:
            try:
                assignments = tuple(target_assignments(ref.target_path, text, literal=ref.literal))
            except PathError as exc:
                detail = str(exc) if ref.kind == "ConfigMap" else "its text is not shown"  # a Secret's stays hidden
                raise _error(spec, ref, f"{what} key {ref.values_key!r} is not a value helm's --set syntax can set "
                             f"at {ref.target_path}, as Flux reads it ({detail})",
                             "escape each ',' in the value as '\\,' (a ',' starts another key=value), or set "
                             "literal: true to set the content verbatim") from None
            targets.append(TargetValue(ref.field, ref.line, f"{what} key {ref.values_key!r}", assignments,
                                       ref.kind == "Secret"))
            if ref.kind == "Secret":
                secret += [path for path, _ in assignments]
            continue
        data = _parse(text, spec, ref)
        result = deep_merge(result, data)
        if ref.kind == "Secret":
            secret += leaf_paths(data)
    return Composed(result, tuple(dict.fromkeys(secret)), digest.hexdigest(), tuple(targets))


def apply_targets(spec: PackageSpec, values: Mapping[str, Any], targets: tuple[TargetValue, ...]) -> dict[str, Any]:
    """``values`` (everything else composed, inline values included) with each targetPath value set, in order.
    Raises ValuesError naming the entry when a path goes through a value of another type."""
    out = dict(values)
    for target in targets:
        try:
            out = apply(out, list(target.assignments))
        except PathError as exc:
            raise ValuesError(spec.file, target.field, f"cannot set {target.what}: {exc}",
                              "fix targetPath, or the values it goes through", target.line or None) from None
    return out


def leaf_paths(values: Mapping[str, Any], prefix: ValuesPath = ()) -> list[ValuesPath]:
    """The path of every leaf of ``values`` (a list counts as one leaf)."""
    out: list[ValuesPath] = []
    for key, value in values.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            out += leaf_paths(value, path)
        else:
            out.append(path)
    return out


def _error(spec: PackageSpec, ref: ValuesReference, problem: str, fix: str) -> ValuesError:
    return ValuesError(spec.file, ref.field, problem, fix, ref.line or None)


_PARSED: OrderedDict[str, dict[str, Any]] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_PARSED_SIZE = 256


def _parse(text: str, spec: PackageSpec, ref: ValuesReference) -> dict[str, Any]:
    """The YAML mapping in ``text`` (bounded loader), parsed once per content; shared: never mutate it."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    with _PARSED_LOCK:
        hit = _PARSED.get(digest)
        if hit is not None:
            _PARSED.move_to_end(digest)
            return hit
    what = ref.describe(spec.namespace)
    try:
        parsed = read_values(text, Path(f"{what}[{ref.values_key}]"), values_limits())
    except YamlLimitError as exc:
        where = f" line {exc.line}" if exc.line else ""
        raise _error(spec, ref, f"{what} key {ref.values_key!r}{where}: {exc.problem}",
                     exc.fix or "fix the values") from None
    data = parsed.data if parsed.data is not None else {}
    if not isinstance(data, dict):
        raise _error(spec, ref, f"{what} key {ref.values_key!r} must hold a mapping, not {type_name(data)}",
                     "write YAML values (key: value), or set targetPath to use the content as one value")
    with _PARSED_LOCK:
        _PARSED[digest] = data
        while len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)
    return data
