"""Flux's HelmChart object (source.toolkit.fluxcd.io/v1), read as far as a HelmRelease's ``spec.chartRef`` needs
it: a chartRef to a HelmChart means ``spec.chart.spec`` with the HelmChart's fields; its unsupported fields are
named as the HelmRelease's are. And helmdeck's own fields are refused inside a HelmRelease (Flux has none of them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.package.load import load_folder
from engine.runtime.assemble import offline_engine
from engine.sources.repository import ChartTemplate, SourceRef
from engine.storage.observer import Observer
from tests.engine.package.test_flux_documents import REPO, WEB, line_of, write

HELM_CHART = """apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec:
  interval: 5m
  chart: web
  version: "1.x"  # the range
  reconcileStrategy: Revision
  valuesFiles: [values-prod.yaml]
  sourceRef: {kind: HelmRepository, name: charts}
"""
BY_REF = WEB.replace("""  chart:
    spec:
      chart: web
      version: "1.x"
      sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}
""", "  chartRef: {kind: HelmChart, name: web, namespace: flux-system}\n")
INLINE = WEB.replace('      version: "1.x"\n', '      version: "1.x"\n      interval: 5m\n'
                     '      reconcileStrategy: Revision\n      valuesFiles: [values-prod.yaml]\n')


def test_a_chartref_to_a_helmchart_means_spec_chart_spec_with_its_fields(tmp_path: Path) -> None:
    # Flux's HelmRelease API: "ChartRef holds a reference to a source controller resource containing the Helm
    # chart artifact" (kinds OCIRepository and HelmChart); spec.chart makes helm-controller create that same
    # HelmChart from spec.chart.spec, so either form releases the same chart.
    inline, by_ref = tmp_path / "inline", tmp_path / "by-ref"
    inline.mkdir()
    by_ref.mkdir()
    write(inline, REPO, INLINE)
    write(by_ref, REPO, HELM_CHART, name="chart.yaml")
    write(by_ref, BY_REF)
    [a], [b] = load_folder(inline).specs, load_folder(by_ref).specs
    assert load_folder(by_ref).errors == []
    assert isinstance(b.chart_source, ChartTemplate) and b.chart_source == a.chart_source
    assert b.chart_source.values_files == ("values-prod.yaml",) and b.chart_source.interval == 300.0
    assert a.chart_request is not None and b.chart_request is not None
    assert b.chart_request == dataclasses.replace(  # the same repository, read from the other folder
        a.chart_request, source=dataclasses.replace(a.chart_request.source, file=b.chart_request.source.file))
    assert b.chart_object is not None and b.chart_object.ref == SourceRef("HelmChart", "web", "flux-system")
    assert b.chart_object.file == by_ref / "chart.yaml" and a.chart_object is None
    assert dataclasses.replace(b, file=a.file, document=a.document, chart_path=a.chart_path, chart_object=None,
                               chart_request=a.chart_request) == a


def test_unsupported_helmchart_fields_are_named_by_file_line_and_field(tmp_path: Path) -> None:
    chart = HELM_CHART.replace("  interval: 5m\n", "  interval: 5m\n  verify: {provider: cosign}\n  suspend: true\n")
    path = write(tmp_path, REPO, chart, BY_REF)
    # the HelmChart's own (each of them), then its HelmRelease's (as for a source)
    err, suspend, then = load_folder(tmp_path).errors
    assert (err.file, err.field, err.line) == (path, "spec.verify", line_of(path, "  verify: {provider: cosign}"))
    assert (suspend.field, suspend.line) == ("spec.suspend", line_of(path, "  suspend: true"))
    assert then.field == "spec.chartRef" and "does not exist" in then.problem
    assert "does not implement" in err.problem and "--allow-unsupported" in str(err)
    # Allowed, the suspend is left out; the verification is not: the chart would install unverified.
    err, then = load_folder(tmp_path, allow_unsupported=True).errors
    assert (err.field, then.field) == ("spec.verify", "spec.chartRef") and "install unverified" in str(err)
    assert "--allow-unsupported to go on" not in str(err)
    path = write(tmp_path, REPO, chart.replace("  verify: {provider: cosign}\n", ""), BY_REF)
    loaded = load_folder(tmp_path, allow_unsupported=True)
    assert loaded.errors == [] and [s.name for s in loaded.specs] == ["web"]
    assert [(w.field, w.line) for w in loaded.left_out] == [("spec.suspend", line_of(path, "  suspend: true"))]
    typo = write(tmp_path, REPO, HELM_CHART.replace("  chart: web", "  chrat: web"), BY_REF)
    errors = load_folder(typo.parent, allow_unsupported=True).errors
    assert (errors[0].field, errors[0].problem) == ("spec.chrat", "unknown field")


def test_a_helmchart_from_a_git_repository_is_named_and_its_release_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HELM_CHART.replace("kind: HelmRepository", "kind: GitRepository"), BY_REF)
    err, _ = load_folder(tmp_path).errors  # then its HelmRelease's: that HelmChart was not read
    assert (err.field, err.line) == ("spec.sourceRef.kind", line_of(path, "  sourceRef: {kind: GitRepository, "
                                                                          "name: charts}"))
    assert "Git repository" in err.problem and "--allow-unsupported" in str(err)
    loaded = load_folder(tmp_path, allow_unsupported=True)
    [warning] = loaded.left_out
    assert warning.field == "spec.sourceRef.kind" and "HelmChart unusable" in warning.problem
    [refused] = loaded.errors  # its release cannot be reconciled: said at the HelmRelease's chartRef
    assert refused.field == "spec.chartRef" and "HelmChart flux-system/web names a chart helmdeck cannot fetch" \
        in refused.problem and loaded.specs == []


def test_a_missing_helmchart_or_repository_is_named(tmp_path: Path) -> None:
    other = BY_REF.replace("name: web, namespace: flux-system", "name: api, namespace: flux-system")
    path = write(tmp_path, REPO, other, HELM_CHART)
    [err] = load_folder(tmp_path).errors
    assert err.file == path and err.field == "spec.chartRef" and "HelmChart flux-system/api does not exist" in str(err)
    assert "known HelmCharts: flux-system/web" in str(err)
    path = write(tmp_path, HELM_CHART, BY_REF)
    [err] = load_folder(tmp_path).errors  # named where the HelmChart names it
    assert (err.field, err.line) == ("spec.sourceRef",
                                     line_of(path, "  sourceRef: {kind: HelmRepository, name: charts}"))
    assert "HelmRepository flux-system/charts does not exist" in str(err)
    write(tmp_path, REPO, HELM_CHART.replace("name: charts}", "name: charts, namespace: other}"), BY_REF)
    err, _ = load_folder(tmp_path).errors  # Flux's HelmChart names a source of its own namespace only
    assert err.field == "spec.sourceRef.namespace" and err.problem == "unknown field"


async def test_pin_of_a_chart_through_a_helmchart_edits_the_helmchart(tmp_path: Path) -> None:
    write(tmp_path, REPO, HELM_CHART, name="chart.yaml")
    write(tmp_path, BY_REF)
    engine = offline_engine(tmp_path, observer=Observer(None))
    engine.gate.online = True
    planned = engine.plan_pin(("prod", "prod-web"), "1.2.0")
    assert (planned.file, planned.kind, planned.field) == (tmp_path / "chart.yaml", "HelmChart", "spec.version")
    assert (planned.before, planned.after) == ("1.x", "1.2.0")
    assert planned.text == (REPO + "---\n" + HELM_CHART).replace('"1.x"  # the range', '"1.2.0"  # the range')


@pytest.mark.parametrize(("field", "text"), [
    ("spec.valuesFiles", "  valuesFiles: [/etc/hostname]\n"),
    ("spec.maintenance", "  maintenance: NoResourceReconciliation\n"),
])
def test_helmdeck_fields_are_refused_in_a_helmrelease(tmp_path: Path, field: str, text: str) -> None:
    # Flux's HelmRelease has no such field: its API server would refuse the object. helmdeck refuses it too
    # (also with --allow-unsupported: that flag leaves out Flux fields helmdeck lacks, not the reverse).
    path = write(tmp_path, REPO, WEB.replace("  values:", text + "  values:"))
    for allow in (False, True):
        [err] = load_folder(tmp_path, allow_unsupported=allow).errors
        assert (err.file, err.field, err.line) == (path, field, line_of(path, text.rstrip("\n")))
        assert "a helmdeck field Flux's HelmRelease does not have" in err.problem
        assert "kind: Package" in err.fix


@pytest.mark.parametrize(("change", "field", "words"), [
    (("  chart: web\n", ""), "spec.chart", "is required"),
    (("  sourceRef: {kind: HelmRepository, name: charts}\n", ""), "spec.sourceRef", "is required"),
    (('"1.x"', '">>1"'), "spec.version", ""),
    (("name: web, namespace", "name: wéb, namespace"), "metadata.name", "not a valid Kubernetes name"),
    (("  chart: web\n", "  chart: ../../etc\n"), "spec.chart", "not a chart name"),
    (("[values-prod.yaml]", "[../../secret.yaml]"), "spec.valuesFiles[0]", "not inside the chart"),
    (("source.toolkit.fluxcd.io/v1", "helmdeck.dev/v1alpha1"), "apiVersion", "Flux's source-controller object"),
])
def test_a_bad_helmchart_is_named_and_its_release_not_read(tmp_path: Path, change: tuple[str, str], field: str,
                                                           words: str) -> None:
    write(tmp_path, REPO, HELM_CHART.replace(*change), BY_REF)
    errors = load_folder(tmp_path).errors
    assert errors[0].field == field and words in str(errors[0]), str(errors[0])
    assert errors[1].field == "spec.chartRef" and "does not exist" in errors[1].problem


def test_helmrelease_chart_verify_helm_is_read_and_cosign_is_refused_even_when_allowed(tmp_path: Path) -> None:
    signed = WEB.replace("      version: \"1.x\"\n", "      version: \"1.x\"\n"
                         "      verify: {provider: helm, secretRef: {name: chart-keys}}\n")
    signed = signed.replace("  interval: 10m\n", "  interval: 10m\n  serviceAccountName: deployer\n", 1)
    write(tmp_path, REPO, signed)
    loaded = load_folder(tmp_path)
    assert loaded.errors == [], loaded.errors
    request = loaded.specs[0].chart_request
    assert request is not None and request.verify is not None
    # The keyring Secret is the HelmRepository's namespace's, read as the HelmRelease's ServiceAccount.
    assert (request.verify.provider, request.verify.namespace, request.verify.secret_ref, request.verify.user) == (
        "helm", "flux-system", "chart-keys", "system:serviceaccount:apps:deployer")
    path = write(tmp_path, REPO, signed.replace("provider: helm", "provider: cosign"))
    err, = load_folder(tmp_path).errors
    assert (err.field, err.line) == ("spec.chart.spec.verify", line_of(
        path, "      verify: {provider: cosign, secretRef: {name: chart-keys}}"))
    assert "does not implement" in err.problem and "--allow-unsupported" in str(err)
    # Never left out: the chart asked to be verified would install unverified.
    err, = load_folder(tmp_path, allow_unsupported=True).errors
    assert (err.field, err.line) == ("spec.chart.spec.verify", line_of(
        path, "      verify: {provider: cosign, secretRef: {name: chart-keys}}"))
    assert "install unverified" in err.problem and "provider helm" in str(err)
