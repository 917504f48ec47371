"""Values files inside a remote chart: Flux's ``spec.chart.spec.valuesFiles``.

Each entry is a path inside the chart archive (relative to the chart's folder), read with
:func:`engine.sources.cache.chart_file` and parsed by the bounded loader (values limits). A missing
file is an error unless ``ignoreMissingValuesFiles`` is set, as Flux's HelmChart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.package import PackageError, PackageSpec
from engine.resolve.loader import YamlLimitError, parse_text, values_limits
from engine.sources.cache import chart_file
from engine.sources.errors import SourceError
from engine.sources.spec import ChartTemplate


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
            parsed = parse_text(raw.decode("utf-8"), Path(f"{form.chart}/{rel}"), limits)
        except UnicodeDecodeError:
            raise PackageError(spec.file, field, f"{rel} in the chart is not UTF-8 text") from None
        except YamlLimitError as exc:
            raise PackageError(spec.file, field, str(exc), exc.fix) from None
        data = parsed.data if parsed.data is not None else {}
        if not isinstance(data, dict):
            raise PackageError(spec.file, field, f"{rel} in the chart must hold a mapping, not {type(data).__name__}")
        out.append(data)
    return out
