"""``spec.chart.spec.valuesFiles``: files inside a remote chart, merged in order into the chart's default values
(as source-controller packages a HelmChart: internal/helm/chart/builder_remote.go ``mergeChartValues``), under the
package's own values files and inline values; a missing one is an error naming the entry unless
``ignoreMissingValuesFiles``."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from engine.base.fields import PackageError
from engine.package.load import load_package
from engine.package.model import PackageSpec
from engine.resolve.release import ResolveCache
from engine.sources.cache import chart_file
from engine.sources.chart import load_chart
from engine.sources.repository import ChartTemplate, SourceRef

FILES = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
    "values.yaml": "replicas: 1\n",
    "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
    "values-prod.yaml": "replicas: 3\nimage: {tag: prod, pull: Always}\n",
    "values-eu.yaml": "region: eu\nimage: {tag: eu}\n",
}


def archive(folder: Path) -> Path:
    path = folder / "web-1.0.0.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in FILES.items():
            data = text.encode()
            info = tarfile.TarInfo(f"web/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def spec_with(tmp_path: Path, files: tuple[str, ...], ignore: bool = False) -> PackageSpec:
    chart = archive(tmp_path)
    (tmp_path / "own.yaml").write_text("image: {tag: own}\n")
    pkg = tmp_path / "web.yaml"
    pkg.write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web, namespace: ns}\n"
                   f"spec:\n  chart: {chart}\n  valuesFiles: [own.yaml]\n  values: {{extra: true}}\n")
    template = ChartTemplate("web", SourceRef("HelmRepository", "charts", "ns"), values_files=files,
                             ignore_missing_values_files=ignore)
    return dataclasses.replace(load_package(pkg), chart_source=template)


def defaults(chart: Path) -> object:
    """The chart's default values (its ``values.yaml``), as helm reads them."""
    return yaml.safe_load(chart_file(chart, "values.yaml") or b"")


def test_chart_values_files_become_the_charts_defaults(tmp_path: Path) -> None:
    resolved = ResolveCache().resolve(spec_with(tmp_path, ("values-prod.yaml", "values-eu.yaml")))
    assert resolved.values == {"image": {"tag": "own"}, "extra": True}  # the user's values only
    # The listed files, merged in order; the chart's own values.yaml only where listed.
    assert defaults(resolved.chart.path) == {"replicas": 3, "region": "eu", "image": {"tag": "eu", "pull": "Always"}}
    listed = ResolveCache().resolve(spec_with(tmp_path, ("values.yaml", "values-eu.yaml")))
    assert defaults(listed.chart.path) == {"replicas": 1, "region": "eu", "image": {"tag": "eu"}}
    assert listed.chart.digest != resolved.chart.digest != load_chart(resolved.spec.chart_path).digest


def test_a_missing_chart_values_file_names_the_entry_unless_ignored(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match=r"absent\.yaml is not in chart 'web'") as caught:
        ResolveCache().resolve(spec_with(tmp_path, ("values-eu.yaml", "absent.yaml")))
    assert caught.value.field == "spec.chart.spec.valuesFiles[1]" and "ignoreMissingValuesFiles" in str(caught.value)
    resolved = ResolveCache().resolve(spec_with(tmp_path, ("absent.yaml", "values-eu.yaml"), ignore=True))
    assert defaults(resolved.chart.path) == {"region": "eu", "image": {"tag": "eu"}}
    # Every file missing and ignored: the defaults are empty, as source-controller's empty merge overwrites them.
    empty = ResolveCache().resolve(spec_with(tmp_path, ("absent.yaml",), ignore=True))
    assert defaults(empty.chart.path) is None
