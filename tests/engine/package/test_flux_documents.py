"""Flux's own documents read as they are: HelmRelease (helm.toolkit.fluxcd.io/v2, v2beta2) as the Package of the
same spec, Flux's HelmRepository / OCIRepository (source.toolkit.fluxcd.io/v1, v1beta2) as sources; Flux's
release-name rule; fields helmdeck does not implement named (file, line, field), or left out with a warning."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from engine.base import wire
from engine.base.fields import PackageError
from engine.package.load import load_folder, load_package
from engine.resolve.release import post_render_settings
from engine.resolve.values import ValuesLayer, compose_values
from engine.sources.repository import HelmRepositorySpec, OCIRepositorySpec

REPO = """apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: charts
  namespace: flux-system
  labels: {team: web}
spec:
  interval: 5m
  url: https://charts.example.com
"""
OCI = """apiVersion: source.toolkit.fluxcd.io/v1beta2
kind: OCIRepository
metadata: {name: api-chart, namespace: apps}
spec:
  interval: 10m
  url: oci://registry.example.com/charts/api
  ref: {semver: ">=1.0.0"}
"""
WEB = """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: apps
  annotations: {note: kept out of the release}
spec:
  interval: 10m
  targetNamespace: prod
  chart:
    spec:
      chart: web
      version: "1.x"
      sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}
  values: {replicas: 2}
"""
API = """apiVersion: helm.toolkit.fluxcd.io/v2beta2
kind: HelmRelease
metadata: {name: api, namespace: apps}
spec:
  interval: 10m
  chartRef: {kind: OCIRepository, name: api-chart}
"""
KUSTOMIZATION = """apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
"""


def write(tmp_path: Path, *docs: str, name: str = "release.yaml") -> Path:
    path = tmp_path / name
    path.write_text("---\n".join(docs))
    return path


def line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_a_flux_repository_file_reads_as_packages_and_sources(tmp_path: Path) -> None:
    write(tmp_path, "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n", REPO, WEB, OCI, API, KUSTOMIZATION)
    loaded = load_folder(tmp_path)
    assert loaded.errors == [] and loaded.left_out == ()
    specs = {s.name: s for s in loaded.specs}
    web, api = specs["web"], specs["api"]
    assert web.kind == api.kind == "HelmRelease"
    assert web.values == {"replicas": 2} and web.interval == 600.0
    assert web.chart_request is not None and isinstance(web.chart_request.source, HelmRepositorySpec)
    assert (web.chart_request.chart, web.chart_request.version) == ("web", "1.x")
    assert web.chart_request.source.url == "https://charts.example.com"
    assert api.chart_request is not None and isinstance(api.chart_request.source, OCIRepositorySpec)
    assert api.chart_request.source.reference.semver == ">=1.0.0"
    assert loaded.skipped_line() == "skipped 2 objects helmdeck does not read: Kustomization (1), Namespace (1)"


def test_release_names_follow_flux(tmp_path: Path) -> None:
    # Flux's HelmRelease API (GetReleaseName): spec.releaseName, else "<targetNamespace>-<name>" with a
    # targetNamespace, else metadata.name; a name over 53 characters (helm's limit) becomes its first 40
    # characters, "-" and the first 12 hex digits of its SHA-256 (helm-controller's release.ShortenName).
    write(tmp_path, REPO, WEB, OCI, API)
    specs = {s.name: s for s in load_folder(tmp_path).specs}
    assert specs["web"].key == ("prod", "prod-web")
    assert specs["api"].key == ("apps", "api")
    long_ns = "a-very-long-target-namespace-for-the-web-team-in-production"
    (tmp_path / "release.yaml").write_text("---\n".join([REPO, WEB.replace("targetNamespace: prod",
                                                                             f"targetNamespace: {long_ns}")]))
    [web] = load_folder(tmp_path).specs
    full = f"{long_ns}-web"
    assert len(full) > 53
    assert web.release_name == full[:40] + "-" + hashlib.sha256(full.encode()).hexdigest()[:12]
    assert len(web.release_name) == 53
    (tmp_path / "release.yaml").write_text("---\n".join([REPO, WEB.replace("  interval: 10m\n",
                                                                             "  interval: 10m\n  releaseName: www\n")]))
    assert load_folder(tmp_path).specs[0].key == ("prod", "www")


def test_an_unsupported_field_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    text = WEB.replace("  interval: 10m\n", "  interval: 10m\n  kubeConfig:\n    secretRef: {name: remote}\n")
    path = write(tmp_path, REPO, text)
    loaded = load_folder(tmp_path)
    [err] = loaded.errors
    assert loaded.specs == []
    assert err.file == path and err.field == "spec.kubeConfig" and err.line == line_of(path, "  kubeConfig:")
    assert "does not implement" in str(err) and "--allow-unsupported" in str(err)
    loaded = load_folder(tmp_path, allow_unsupported=True)
    assert loaded.errors == [] and [s.name for s in loaded.specs] == ["web"]
    [warning] = loaded.left_out
    assert warning.field == "spec.kubeConfig" and warning.line == line_of(path, "  kubeConfig:")
    assert str(warning).startswith(f"{path}:{warning.line}: spec.kubeConfig: left out")


def test_unsupported_fields_of_actions_and_sources(tmp_path: Path) -> None:
    text = WEB.replace("  values:", "  install:\n    skipCRDs: true\n    disableOpenAPIValidation: true\n  values:")
    oci = OCI.replace("  ref:", "  provider: aws\n  ref:")
    path = write(tmp_path, REPO, text, oci)
    fields = sorted(e.field for e in load_folder(tmp_path).errors)
    # every one of the HelmRelease's (its field table is checked whole), the source's
    assert fields == ["spec.install.disableOpenAPIValidation", "spec.install.skipCRDs", "spec.provider"]
    loaded = load_folder(tmp_path, allow_unsupported=True)
    assert loaded.errors == [] and [s.name for s in loaded.specs] == ["web"]
    assert sorted((w.field, w.line) for w in loaded.left_out) == sorted([
        ("spec.install.skipCRDs", line_of(path, "    skipCRDs: true")),
        ("spec.install.disableOpenAPIValidation", line_of(path, "    disableOpenAPIValidation: true")),
        ("spec.provider", line_of(path, "  provider: aws"))])


def test_an_oci_repositorys_cosign_verify_is_read_and_keyless_is_refused_even_when_allowed(tmp_path: Path) -> None:
    """Flux's OCIRepository ``spec.verify`` with keys is implemented; keyless verification is not, and
    ``--allow-unsupported`` does not leave it out: a chart asked to be verified is never installed unverified."""
    keys = OCI.replace("  ref:", "  verify: {provider: cosign, secretRef: {name: cosign-keys}}\n  ref:")
    write(tmp_path, API, keys)
    loaded = load_folder(tmp_path)
    assert loaded.errors == [] and not loaded.left_out
    request = loaded.specs[0].chart_request
    assert request is not None and request.verify is not None
    assert (request.verify.provider, request.verify.namespace, request.verify.secret_ref) == (
        "cosign", "apps", "cosign-keys")
    path = write(tmp_path, API, OCI.replace("  ref:", "  verify: {provider: cosign}\n  ref:"))
    for allowed in (False, True):
        err, missing = load_folder(tmp_path, allow_unsupported=allowed).errors  # and the HelmRelease's source
        assert missing.field == "spec.chartRef" and "OCIRepository apps/api-chart does not exist" in missing.problem
        assert (err.file, err.field, err.line) == (path, "spec.verify.secretRef",
                                                   line_of(path, "  verify: {provider: cosign}"))
        assert "keyless verification is not possible here" in err.problem


@pytest.mark.parametrize(("change", "field"), [
    (("chartRef: {kind: OCIRepository", "chartRef: {kind: ExternalArtifact"), "spec.chartRef.kind"),
])
def test_a_chart_helmdeck_cannot_fetch_leaves_the_release_out(tmp_path: Path, change: tuple[str, str],
                                                              field: str) -> None:
    path = write(tmp_path, OCI, API.replace(*change))
    [err] = load_folder(tmp_path).errors
    assert err.field == field and err.line == line_of(path, "  " + API.replace(*change).splitlines()[5].strip())
    loaded = load_folder(tmp_path, allow_unsupported=True)
    assert loaded.specs == [] and loaded.errors == []
    [warning] = loaded.left_out
    assert warning.field == field and "HelmRelease left out" in warning.problem


def test_a_git_repository_source_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, WEB.replace("kind: HelmRepository, name: charts", "kind: GitRepository, name: charts"))
    [err] = load_folder(tmp_path).errors
    assert err.field == "spec.chart.spec.sourceRef.kind" and "Git repository" in err.problem
    assert err.line == line_of(path, "      sourceRef: {kind: GitRepository, name: charts, namespace: flux-system}")


def test_flux_versions_and_shapes_helmdeck_refuses(tmp_path: Path) -> None:
    write(tmp_path, REPO, WEB.replace("helm.toolkit.fluxcd.io/v2", "helm.toolkit.fluxcd.io/v2beta1"))
    [err] = load_folder(tmp_path).errors
    assert err.field == "apiVersion" and "helm.toolkit.fluxcd.io/v2, helm.toolkit.fluxcd.io/v2beta2" in str(err)
    write(tmp_path, WEB.replace("  chart:\n    spec:\n      chart: web\n      version: \"1.x\"\n"
                                "      sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}\n",
                                "  chart: ./charts/web\n"))
    [err] = load_folder(tmp_path).errors
    assert err.field == "spec.chart" and "spec.chart.spec or spec.chartRef" in str(err)
    write(tmp_path, REPO, WEB.replace("  values:", "  valuse:"))  # a typo is no Flux field: unknown
    [err] = load_folder(tmp_path, allow_unsupported=True).errors
    assert err.field == "spec.valuse" and err.problem == "unknown field"


def test_every_unknown_field_of_a_helm_release_is_named(tmp_path: Path) -> None:
    # As for a Package (one field table decides): every typo of the document named with its line and the closest
    # Flux field; a Flux field helmdeck does not implement said so beside them, an ignored one (metadata's
    # annotations) not at all.
    path = write(tmp_path, WEB.replace("      version:", "      versoin:").replace("  values:", "  valuse:")
                 + "  kubeConfig: {secretRef: {name: remote}}\n  upgrade: {remediation: {retrys: 1}}\n")
    errors = load_folder(tmp_path).errors
    assert [(e.line, e.field) for e in errors] == [
        (line_of(path, '      versoin: "1.x"'), "spec.chart.spec.versoin"),
        (line_of(path, "  valuse: {replicas: 2}"), "spec.valuse"),
        (line_of(path, "  kubeConfig: {secretRef: {name: remote}}"), "spec.kubeConfig"),
        (line_of(path, "  upgrade: {remediation: {retrys: 1}}"), "spec.upgrade.remediation.retrys")]
    assert [e.fix.split("?")[0] for e in errors if e.problem == "unknown field"] == [
        "did you mean version", "did you mean values", "did you mean retries"]
    assert "does not implement" in errors[2].problem
    # Its HelmRepository alike: every typo of the document, the nested one too.
    path = write(tmp_path, REPO.replace("  interval:", "  intervall:") + "  secretRef: {nmae: creds}\n", WEB)
    assert [(e.line, e.field, e.fix.split("?")[0]) for e in load_folder(tmp_path).errors
            if e.problem == "unknown field"] == [
        (line_of(path, "  intervall: 5m"), "spec.intervall", "did you mean interval"),
        (line_of(path, "  secretRef: {nmae: creds}"), "spec.secretRef.nmae", "did you mean name")]


def test_a_helm_release_is_stamped_with_fluxs_origin_labels(tmp_path: Path) -> None:
    # helm-controller's post-renderer labels every object helm.toolkit.fluxcd.io/name and /namespace (the
    # HelmRelease's): rendered the same, a plan against a release Flux deployed shows no false change.
    write(tmp_path, REPO, WEB)
    [web] = load_folder(tmp_path).specs
    assert post_render_settings(web).labels == {wire.FLUX_ORIGIN_NAME: "web", wire.FLUX_ORIGIN_NAMESPACE: "apps"}
    chart = Path(__file__).resolve().parents[3] / "examples" / "charts" / "settings"
    package = tmp_path / "own" / "p.yaml"
    package.parent.mkdir()
    package.write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: p, namespace: apps}\n"
                       f"spec:\n  chart: {chart}\n")
    assert post_render_settings(load_package(package)).labels == {wire.ORIGIN_NAME: "p",
                                                                  wire.ORIGIN_NAMESPACE: "apps"}


def test_commonmetadata_may_not_set_fluxs_origin_labels(tmp_path: Path) -> None:
    write(tmp_path, REPO, WEB.replace("  values:", "  commonMetadata:\n    labels: {helm.toolkit.fluxcd.io/name: x}\n"
                                                   "  values:"))
    [err] = load_folder(tmp_path).errors
    assert err.field.startswith("spec.commonMetadata.labels")
    with pytest.raises(PackageError):
        load_package(tmp_path / "release.yaml")


def test_a_helm_releases_values_compose_in_fluxs_order(tmp_path: Path) -> None:
    # Flux's HelmRelease docs, "Values references": "The values are merged in the order given, with the later
    # values overwriting earlier, and then spec.values overwriting those"; maps merge, anything else replaces.
    text = WEB.replace("  values: {replicas: 2}\n", "  valuesFrom:\n    - {kind: ConfigMap, name: base}\n"
                       "    - {kind: Secret, name: prod}\n  values: {replicas: 2, image: {tag: inline}}\n")
    write(tmp_path, REPO, text)
    [web] = load_folder(tmp_path).specs
    assert [(r.kind, r.name) for r in web.values_from] == [("ConfigMap", "base"), ("Secret", "prod")]
    layers = [ValuesLayer(({"replicas": 1, "image": {"repo": "nginx", "tag": "base"}, "port": 80},), "ConfigMap/base"),
              ValuesLayer(({"image": {"tag": "prod"}, "port": 8080, "token": "s3cret"},), "Secret/prod",
                          secret=True)]
    values, secret_paths = compose_values(web, [], layers)
    assert values == {"replicas": 2, "image": {"repo": "nginx", "tag": "inline"}, "port": 8080, "token": "s3cret"}
    assert ("token",) in secret_paths
