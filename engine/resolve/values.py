"""Values composition, the one place it happens (DESIGN, "Resolution"), in this order:

1. ``spec.valuesFiles`` in order (parsed by the bounded loader, values limits);
2. the ``valuesFrom`` entries in order (ConfigMaps and Secrets, read beforehand by the runtime:
   :class:`ValuesLayer`), each merged over what came before, or set at its ``targetPath``;
3. inline ``spec.values``, merged last.

A remote chart's ``spec.chart.spec.valuesFiles`` (files inside the chart archive, Flux's HelmChart field) are
not user values: merged in order (:func:`chart_defaults`), they become the chart's default values, as
source-controller packages them (engine.resolve.release ``chart_with_defaults``).

That is Flux's ``ChartValuesFromReferences`` as helm-controller v1.6.3 runs it (fluxcd/pkg/chartutil
v1.27.1, values.go), the files before it: an entry with ``targetPath`` first merges the inline values over
what came before, then sets its value, and the inline values are merged once more at the end. So an inline
value wins over a ``targetPath`` value set at its own top-level key, while one set inside a map or list of the
inline values' own may stay: Go's merge (``MergeMaps``) hands the result the inline values' maps where it has
none yet (and their lists always), helm's ``--set`` parser changes them in place, and the last merge then brings
the ``targetPath`` value back (:func:`compose_values` keeps the same sharing; chartutil v1.36.0 applies every
``targetPath`` last instead).

Maps merge recursively, anything else replaces (:func:`deep_merge`, as helm's ``-f`` and chartutil's
``MergeMaps``). :func:`compose_values` applies the order; the runtime builds the ``valuesFrom`` layers with
:func:`compose`.

``spec.valuesFrom`` (as Flux's ``ChartValuesFromReferences``): the runtime reads the ConfigMaps and
Secrets (:mod:`engine.runtime.drive.values_objects`) and hands them over as :class:`ObjectData`;
:func:`compose` makes the one layer of entries composed after ``valuesFiles``.
Flux's semantics:

- every object is in the package's namespace;
- without ``targetPath`` the key's content is YAML, merged over the entries
  before it; with it, ``<targetPath>=<content>`` is read as helm's ``--set``
  reads its argument (:mod:`engine.base.strvals`, as Flux's
  ``ReplacePathValue``: commas split, ``{a,b}`` lists, typing, quotes) and set
  as above (:class:`TargetValue`); with ``literal``, the content is set verbatim as one string (Flux's
  ``ReplacePathLiteralValue``);
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
from engine.base.strvals import Assignment, PathError, set_in_place, target_assignments
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
    """The value of one ``targetPath`` entry: helm ``--set`` assignments (set as the module docstring says).
    ``field``/``line`` name the entry, ``what`` the object and key (never the content)."""

    field: str
    line: int
    what: str
    assignments: tuple[Assignment, ...] = dataclass_field(repr=False)
    secret: bool = False


Entry = Mapping[str, Any] | TargetValue
"""One ``valuesFrom`` entry as composed: the values of an entry without ``targetPath`` (shared: never change
them), or the :class:`TargetValue` of one with it."""


@dataclass(frozen=True)
class Composed:
    """What ``valuesFrom`` gives: its ``entries`` in order (those read; an optional one absent is left out),
    the ``secret_paths`` of values that came from Secrets, and ``digest`` over every input (equal digests,
    equal values)."""

    entries: tuple[Entry, ...] = dataclass_field(repr=False)
    secret_paths: tuple[ValuesPath, ...]
    digest: str

    @property
    def values(self) -> dict[str, Any]:
        """The entries without ``targetPath`` merged in order (what ``secret_paths`` of theirs point into)."""
        merged: dict[str, Any] = {}
        for entry in self.entries:
            if not isinstance(entry, TargetValue):
                merged = deep_merge(merged, entry)
        return merged

    @property
    def targets(self) -> tuple[TargetValue, ...]:
        """The entries with ``targetPath``, in order."""
        return tuple(entry for entry in self.entries if isinstance(entry, TargetValue))


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
    """Values from a source other than files and inline values (``valuesFrom``: ConfigMaps and Secrets): its
    ``entries`` in order (:data:`Entry`, composed as the module docstring says).

    ``origin`` names it for errors; ``secret`` marks all its leaves for masking, ``secret_paths`` some
    of them. ``digest`` (when given) stands for its content: resolutions are cached by it.
    """

    entries: tuple[Entry, ...]
    origin: str
    secret: bool = False
    secret_paths: tuple[ValuesPath, ...] = ()
    digest: str = ""


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
        if layer.secret:
            for entry in layer.entries:
                secret += leaf_paths(entry) if not isinstance(entry, TargetValue) else \
                    [path for path, _ in entry.assignments]
        else:
            secret += layer.secret_paths
    entries = [entry for layer in layers for entry in layer.entries]
    plain = [entry for entry in entries if not isinstance(entry, TargetValue)]
    if len(plain) < len(entries):
        return _with_targets(spec, merged, entries), secret
    for entry_values in plain:  # nothing is set in place: the merges may share what they merge
        merged = deep_merge(merged, entry_values)
    return deep_merge(merged, spec.values), secret


def _with_targets(spec: PackageSpec, base: Mapping[str, Any], entries: Sequence[Entry]) -> dict[str, Any]:
    """``base`` (the values files) with ``entries`` and ``spec.values`` composed as fluxcd/pkg/chartutil v1.27.1
    values.go ``ChartValuesFromReferences`` composes them (the version helm-controller v1.6.3 runs): an entry
    without targetPath merged over the result; one with it merges the inline values over the result, then sets
    its value there in place; the inline values merged over all at the end. The maps and lists each merge shares
    are shared here too, and set in place as helm's parser sets them (:func:`engine.base.strvals.set_in_place`),
    so a value set inside a map the inline values hold changes them, as in Go. Everything is a fresh copy first,
    as Go's values are (each entry read anew, ``spec.values`` decoded anew as api/v2 ``GetValues`` does), so
    nothing cached is changed. Raises ValuesError naming the entry when a path goes through another type."""
    inline = spec.values  # decoded anew on each access
    result: dict[str, Any] = _fresh(base)
    for entry in entries:
        if not isinstance(entry, TargetValue):
            result = deep_merge(result, _fresh(entry))
            continue
        result = deep_merge(result, inline)
        try:
            set_in_place(result, entry.assignments)
        except PathError as exc:
            raise ValuesError(spec.file, entry.field, f"cannot set {entry.what}: {exc}",
                              "fix targetPath, or the values it goes through", entry.line or None) from None
    return deep_merge(result, inline)


def _fresh(value: Any) -> Any:
    """A copy of ``value`` sharing nothing, not even between its own parts (a YAML alias is copied twice): as Go
    decodes values."""
    if isinstance(value, Mapping):
        return {key: _fresh(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    return value


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
    entries: list[Entry] = []
    secret: list[ValuesPath] = []
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
            entries.append(TargetValue(ref.field, ref.line, f"{what} key {ref.values_key!r}", assignments,
                                       ref.kind == "Secret"))
            if ref.kind == "Secret":
                secret += [path for path, _ in assignments]
            continue
        data = _parse(text, spec, ref)
        entries.append(data)
        if ref.kind == "Secret":
            secret += leaf_paths(data)
    return Composed(tuple(entries), tuple(dict.fromkeys(secret)), digest.hexdigest())


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
