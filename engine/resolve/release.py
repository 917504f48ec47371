"""The resolution stage: from a package spec to what a pass acts on (DESIGN, "Resolution").

:func:`resolve` is the only place a chart is located and values are composed.
It returns a :class:`ResolvedRelease`: the chart artifact and its digest, the
composed values and their digest, the paths of values that came from Secrets
(for masking), the post-render settings, and the spec digest over all of them.
The spec digest is what the decision compares with the release (Flux's
"desired state digest"): equal digests mean nothing to render.

Results are cached: values files through the bounded YAML cache (parsed once
per change), charts by their files' stat signatures, and the whole
resolution by spec and input versions. :meth:`ResolveCache.last` answers
without any I/O, for callers on the event loop.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.base import wire
from engine.base.fields import PackageError
from engine.base.helm_values import read_values
from engine.base.loader import YamlLimitError, load_yaml, values_limits
from engine.base.paths import cache_root
from engine.base.strvals import Path as ValuesPath
from engine.package.flux import HELM_RELEASE
from engine.package.model import PackageSpec
from engine.package.postrender import Rendering
from engine.resolve.values import ValuesError, ValuesFrom, chart_defaults, compose_values
from engine.sources.cache import ChartCache, set_chart_values
from engine.sources.chart import Chart, ChartError, load_chart
from engine.sources.errors import SourceError
from engine.sources.repository import ChartTemplate
from engine.storage.observation import canonical_json


@dataclass(frozen=True)
class PostRenderSettings:
    """What the post-render does to every rendered resource: the package's own ``rendering``
    (kustomize steps, commonMetadata), then the labels helmdeck stamps (``stamp``: package
    origin, and in maintenance the maintenance label), which win on a collision."""

    stamp: tuple[tuple[str, str], ...] = ()
    rendering: Rendering = field(default_factory=Rendering)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.stamp)

    @property
    def config(self) -> dict[str, Any]:
        """The post-renderer's config for the package's own rendering (``{}``: none)."""
        return self.rendering.document()


@dataclass(frozen=True)
class ResolvedRelease:
    """A package resolved: everything a render or an install/upgrade needs, and its digests.

    ``values`` is shared with the cache: read it, never mutate it.
    ``values_digest`` is ``sha256:<hex>`` of the values' canonical JSON;
    ``spec_digest`` (32 hex, a label value) covers the chart digest, the values
    digest and the post-render settings. ``secret_paths`` are the paths (keys and
    list indices) of values that came from Secrets: masked wherever shown.
    """

    spec: PackageSpec
    chart: Chart
    values: Mapping[str, Any] = field(compare=False, repr=False)
    values_digest: str
    post_render: PostRenderSettings
    spec_digest: str
    secret_paths: tuple[ValuesPath, ...] = ()


def origin_labels(spec: PackageSpec) -> dict[str, str]:
    """The origin labels of ``spec``'s resources: helmdeck's for a Package, Flux's ``helm.toolkit.fluxcd.io/name``
    and ``/namespace`` for a HelmRelease (rendered as Flux's helm-controller renders it)."""
    if spec.kind == HELM_RELEASE:
        return {wire.FLUX_ORIGIN_NAME: spec.name, wire.FLUX_ORIGIN_NAMESPACE: spec.namespace}
    return {wire.ORIGIN_NAME: spec.name, wire.ORIGIN_NAMESPACE: spec.namespace}


def crd_labels(spec: PackageSpec) -> dict[str, str]:
    """The labels put on the chart's CRDs (``crds/``): for a HelmRelease its origin labels, helmdeck then applying
    every CRD itself as Flux's helm-controller does (internal/action/crds.go ``applyCRDs`` with
    ``setOriginVisitor``, from install.go and upgrade.go); none for a Package (helm creates them on install)."""
    return origin_labels(spec) if spec.kind == HELM_RELEASE else {}


def post_render_settings(spec: PackageSpec) -> PostRenderSettings:
    """The post-rendering of ``spec``'s release: its own, then the origin labels stamped on every resource
    (:func:`origin_labels`)."""
    stamp = origin_labels(spec)
    if spec.maintenance:
        stamp[wire.RESOURCE_MAINTENANCE] = "true"
    return PostRenderSettings(tuple(sorted(stamp.items())), spec.rendering)


def values_digest(values: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the values in canonical JSON (the values themselves are never kept in it)."""
    return "sha256:" + hashlib.sha256(canonical_json(dict(values))).hexdigest()


def spec_digest(chart_digest: str, digest_of_values: str, post_render: PostRenderSettings) -> str:
    """32 hex characters over chart content, values and post-render settings (fits a label value).

    A package without post-renderers or commonMetadata digests as before they existed, so adding
    the fields to helmdeck changed no release's digest."""
    stamp = ",".join(f"{k}={v}" for k, v in post_render.stamp)
    text = f"{chart_digest}\0{digest_of_values}\0{stamp}"
    if post_render.rendering.canonical:
        text += "\0" + post_render.rendering.canonical
    return wire.label_digest(text.encode())


class ResolveCache:
    """Resolutions by spec and the versions of their inputs. Thread-safe, bounded LRU."""

    def __init__(self, size: int = 1024):
        self._size = size
        self._lock = threading.Lock()
        self._by_input: OrderedDict[tuple[Any, ...], ResolvedRelease] = OrderedDict()
        self._last: dict[PackageSpec, ResolvedRelease] = {}

    def last(self, spec: PackageSpec) -> ResolvedRelease | None:
        """The newest resolution of ``spec`` (no I/O: inputs may have changed since)."""
        with self._lock:
            return self._last.get(spec)

    def resolve(self, spec: PackageSpec, values_from: ValuesFrom | None = None) -> ResolvedRelease:
        """Resolve ``spec`` (see :func:`resolve`)."""
        chart = _chart(spec)
        files = []
        for i, path in enumerate(spec.values_files):
            try:
                files.append(load_yaml(path, values_limits(), read_values))  # as helm -f reads it
            except YamlLimitError as exc:
                raise PackageError(spec.file, f"spec.valuesFiles[{i}]", exc.located, exc.fix) from None
        if spec.values_from and values_from is None:
            raise ValuesError(spec.file, "spec.valuesFrom", "its ConfigMaps and Secrets were not read",
                              "resolve it through an engine with a cluster")
        layers = tuple(values_from(spec)) if values_from is not None else ()
        cacheable = all(layer.digest for layer in layers)
        key = (spec, chart.digest, tuple(p.serial for p in files),
               tuple((layer.origin, layer.digest or id(layer)) for layer in layers))
        with self._lock:
            hit = self._by_input.get(key) if cacheable else None
            if hit is not None:
                self._by_input.move_to_end(key)
                self._last[spec] = hit
                return hit
        merged, secret = compose_values(spec, files, layers)
        try:
            vdigest = values_digest(merged)
        except (TypeError, ValueError) as exc:
            raise PackageError(spec.file, "spec.valuesFiles", f"values cannot be represented as JSON ({exc})",
                               "use plain YAML values (no dates or binary)") from None
        post = post_render_settings(spec)
        resolved = ResolvedRelease(spec, chart, merged, vdigest, post, spec_digest(chart.digest, vdigest, post),
                                   tuple(dict.fromkeys(secret)))
        with self._lock:
            if cacheable:
                self._by_input[key] = resolved
                while len(self._by_input) > self._size:
                    self._by_input.popitem(last=False)
            self._last[spec] = resolved
            while len(self._last) > self._size:
                self._last.pop(next(iter(self._last)))
        return resolved


_DEFAULTS_LOCK = threading.Lock()
# (chart digest, valuesFiles, ignoreMissingValuesFiles) -> the chart with those defaults: its archive says them all
_WITH_DEFAULTS: OrderedDict[tuple[str, tuple[str, ...], bool], Chart] = OrderedDict()


def chart_with_defaults(spec: PackageSpec, chart: Chart) -> Chart:
    """``chart``, or with ``spec.chart.spec.valuesFiles`` the same chart whose ``values.yaml`` holds those files
    merged (:func:`engine.resolve.values.chart_defaults`): source-controller packages a HelmChart with
    ``valuesFiles`` so (internal/helm/chart/builder_remote.go ``mergeChartValues``, then
    internal/helm/chart/metadata.go ``OverwriteChartDefaultValues``), so they are the chart's defaults, not user
    values (``helm get values`` leaves them out, ``--all`` shows them). The archive is written once into the
    content-addressed chart store (its bytes depend on the chart and the values only). Blocking; raises
    PackageError naming ``spec.chart.spec.valuesFiles`` (a file missing, malformed, or the archive unwritable)."""
    form = spec.chart_source
    if not isinstance(form, ChartTemplate) or not form.values_files:
        return chart
    memo = (chart.digest, form.values_files, form.ignore_missing_values_files)
    with _DEFAULTS_LOCK:
        hit = _WITH_DEFAULTS.get(memo)
    if hit is not None and hit.path.is_file():
        return hit
    defaults = chart_defaults(spec) or {}
    try:
        text = (json.dumps(defaults, sort_keys=True, indent=2) + "\n").encode() if defaults else b""
    except (TypeError, ValueError) as exc:
        raise PackageError(spec.file, "spec.chart.spec.valuesFiles", f"values cannot be represented as JSON ({exc})",
                           "use plain YAML values (no dates or binary)") from None
    store = ChartCache(cache_root() / "charts")
    key = f"{chart.digest}\0values\0{hashlib.sha256(text).hexdigest()}"
    hex_digest = store.ref(key)
    if not hex_digest:
        try:
            staged = store.staging()
            set_chart_values(chart.path, text, staged, f"chart {chart.name!r}")
            hex_digest = store.put(staged)
        except (SourceError, OSError) as exc:
            raise PackageError(spec.file, "spec.chart.spec.valuesFiles", str(exc)) from None
        store.remember(key, hex_digest)
    made = Chart(store.path(hex_digest), chart.name, chart.version, chart.app_version, f"sha256:{hex_digest}")
    with _DEFAULTS_LOCK:
        _WITH_DEFAULTS[memo] = made
        while len(_WITH_DEFAULTS) > 256:
            _WITH_DEFAULTS.popitem(last=False)
    return made


def _chart(spec: PackageSpec) -> Chart:
    try:
        return chart_with_defaults(spec, load_chart(spec.chart_path))
    except ChartError as exc:
        raise PackageError(spec.file, "spec.chart", f"{exc.file}: {exc.problem}", exc.fix) from None
    except OSError as exc:
        raise PackageError(spec.file, "spec.chart", f"cannot read {spec.chart_path} ({exc.strerror})") from None


# One per process: charts and values files are the same whoever asks.
CACHE = ResolveCache()


def resolve(spec: PackageSpec, *, values_from: ValuesFrom | None = None,
            cache: ResolveCache | None = None) -> ResolvedRelease:
    """Resolve ``spec``: locate the chart (directory or ``.tgz``; a remote chart's ``spec.chart.spec.valuesFiles``
    made its default values, :func:`chart_with_defaults`) and compose its values — ``valuesFiles``
    in order, then the ``valuesFrom`` layers ``values_from`` gives (read beforehand: no I/O here),
    then inline ``values`` (as Flux's HelmRelease) — and digest them. Blocking (file I/O): call it
    off the event loop.

    Raises PackageError naming the package file, the field and the fix (chart missing or
    unreadable, values file over its size limit, malformed, or expanding past the alias limit);
    ValuesError (a PackageError) when ``spec`` has ``valuesFrom`` and ``values_from`` is None, or
    when ``values_from`` raises it.
    """
    return (cache or CACHE).resolve(spec, values_from)
