"""Chart source documents and a Package's chart fields: Flux's defaults, errors naming file, line, field, fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.base.fields import PackageError
from engine.sources.repository import (
    ChartTemplate,
    HelmRepositorySpec,
    OCIReference,
    OCIRepositorySpec,
    SourceRef,
    SourceSpec,
    find_source,
    parse_chart_ref,
    parse_chart_template,
    parse_package_chart,
    parse_source,
    request_for,
)
from engine.sources.verify import VerifySpec

FILE = Path("/pk/sources.yaml")


def lines_of(text: str) -> dict[str, int]:
    out: dict[str, int] = {}

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                sub = f"{path}.{k.value}" if path else str(k.value)
                out[sub] = k.start_mark.line + 1
                walk(v, sub)

    node = yaml.compose(text)
    assert node is not None
    walk(node, "")
    return out


def source(text: str) -> Any:
    return parse_source(yaml.safe_load(text), file=FILE, lines=lines_of(text))


def test_helm_repository_defaults_are_fluxs() -> None:
    spec = source("apiVersion: helmdeck.dev/v1alpha1\nkind: HelmRepository\nmetadata: {name: charts}\n"
                  "spec: {url: 'https://charts.example.com/stable/'}\n")
    assert spec == HelmRepositorySpec(FILE, "charts", "default", "https://charts.example.com/stable",
                                      type="default", interval=60.0, timeout=60.0)


def test_oci_repository_ref_precedence_and_default_tag() -> None:
    head = "apiVersion: helmdeck.dev/v1alpha1\nkind: OCIRepository\nmetadata: {name: web, namespace: demo}\n"
    spec = source(head + "spec: {url: oci://127.0.0.1:5000/charts/web, interval: 5m}\n")
    assert isinstance(spec, OCIRepositorySpec)
    assert spec.reference == OCIReference(tag="latest") and spec.interval == 300.0
    both = source(head + "spec:\n  url: oci://r/c/web\n  ref: {semver: '^1.0', semverFilter: '.*', tag: '1.0.0'}\n")
    assert both.reference.describe().startswith("semver '^1.0'")  # semver wins over tag
    digest = "sha256:" + "a" * 64
    first = source(head + f"spec:\n  url: oci://r/c/web\n  ref: {{digest: '{digest}', semver: '*'}}\n")
    assert first.reference.describe() == f"digest {digest}"


@pytest.mark.parametrize(("body", "field", "line", "fix"), [
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: ftp://x\n", "spec.url", 5, "https://"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://u:p@x\n", "spec.url", 5, "secretRef"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://x\n  type: git\n", "spec.type", 6, "oci"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://x\n  interval: soon\n", "spec.interval", 6,
     "1m"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://x\n  secretRef: {nam: s}\n",
     "spec.secretRef.nam", 6, "allowed here: name"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: https://x\n", "spec.url", 5, "oci://"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://x/y\n  ref: {digest: abc}\n",
     "spec.ref.digest", 6, "sha256:"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://x/y\n  ref: {semver: 'one'}\n",
     "spec.ref.semver", 6, "semver range"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://x/y\n  ref: {tag: 'a b'}\n", "spec.ref.tag", 6,
     "letters"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://x/y\n  ref: {tag: \"1.0.0\\n\"}\n",
     "spec.ref.tag", 6, "letters"),  # Python's $ would let the newline through
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://x/y\n  ref: {tag: 'v1.0-ü'}\n", "spec.ref.tag",
     6, "letters"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://host/päth/web\n", "spec.url", 5, "percent-encode"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: 'oci://host/Web Chart'\n", "spec.url", 5, "xn--"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://host/../web\n", "spec.url", 5, "charts/web"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://host/web:1.0\n", "spec.url", 5, "spec.ref"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://host\n", "spec.url", 5, "charts/web"),
    ("kind: OCIRepository\nmetadata: {name: c}\nspec:\n  url: oci://host:99999/web\n", "spec.url", 5, ":5000"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: \"https://host/x\\n\"\n", "spec.url", 5, "encode"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://hóst/x\n", "spec.url", 5, "xn--"),
    ("kind: HelmRepository\nmetadata: {name: c}\nspec:\n  url: https://h/" + "a" * 2048 + "\n", "spec.url", 5,
     "shorten"),
    ("kind: Bucket\nmetadata: {name: c}\nspec: {}\n", "kind", 2, "HelmRepository"),
])
def test_source_errors_name_file_line_field_fix(body: str, field: str, line: int, fix: str) -> None:
    with pytest.raises(PackageError) as err:
        source("apiVersion: helmdeck.dev/v1alpha1\n" + body)
    assert err.value.file == FILE and err.value.field == field
    assert err.value.line == line, str(err.value)
    assert fix in err.value.fix, str(err.value)


def test_oci_repository_verify_with_keys_reaches_the_chart_request() -> None:
    """Flux's ``spec.verify: {provider: cosign, secretRef: {name}}``: the Secret is the repository's namespace's,
    and the request a chartRef makes carries it (the pull verifies before the chart is used)."""
    spec = source("apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {name: web, namespace: "
                  "apps}\nspec:\n  url: oci://r/c/web\n  verify: {provider: cosign, secretRef: {name: cosign-keys}}\n")
    assert spec.verify == VerifySpec("cosign", "cosign-keys", "apps", field="spec.verify")
    request = request_for(SourceRef("OCIRepository", "web", "apps"), {spec.ref: spec}, file=FILE, lines={},
                          path="spec.chartRef")
    assert request.verify == spec.verify


@pytest.mark.parametrize(("verify", "field", "line", "problem", "fix"), [
    ("{provider: cosign}", "spec.verify.secretRef", 6, "keyless verification is not possible here", "*.pub"),
    ("\n    provider: cosign\n    secretRef: {name: k}\n    matchOIDCIdentity:\n"
     "    - {issuer: '^https://token.actions.githubusercontent.com$', subject: '^https://github.com/org/.*$'}",
     "spec.verify.matchOIDCIdentity", 9, "Sigstore instance (Fulcio's certificates, Rekor's transparency log)",
     "remove matchOIDCIdentity"),
    ("{provider: cosign, matchOIDCIdentity: [{issuer: x}]}", "spec.verify.matchOIDCIdentity[0].subject", 6,
     "is required", "subject"),
    ("{provider: notation, secretRef: {name: k}}", "spec.verify.provider", 6, "notation is not implemented",
     "provider: cosign"),
    ("{provider: gpg, secretRef: {name: k}}", "spec.verify.provider", 6, "unknown provider 'gpg'", "cosign"),
    ("{secretRef: {name: k}}", "spec.verify.provider", 6, "is required", "cosign"),
    ("{provider: cosign, secretRef: {name: Keys!}}", "spec.verify.secretRef.name", 6, "not a valid", "lower-case"),
    ("{provider: cosign, secretRef: {name: k}, key: x}", "spec.verify.key", 6, "unknown field", "matchOIDCIdentity"),
    ("cosign", "spec.verify", 6, "must be a mapping", ""),
])
def test_oci_repository_verify_errors_name_file_line_field_and_why(
    verify: str, field: str, line: int, problem: str, fix: str,
) -> None:
    """Keyless fields are accepted by the field table (a Flux document reads) and refused with why: helmdeck
    cannot reach a Sigstore instance here."""
    with pytest.raises(PackageError) as err:
        source("apiVersion: helmdeck.dev/v1alpha1\nkind: OCIRepository\nmetadata: {name: c}\nspec:\n"
               f"  url: oci://x/y\n  verify: {verify}\n")
    assert (err.value.file, err.value.field) == (FILE, field), str(err.value)
    assert problem in err.value.problem and fix in err.value.fix, str(err.value)
    assert err.value.line == line, str(err.value)


def chart_spec(text: str) -> Any:
    data = yaml.safe_load(text)
    return parse_chart_template(data["spec"]["chart"], file=FILE, lines=lines_of(text), namespace="demo")


def test_chart_template_defaults() -> None:
    tpl = chart_spec("spec:\n  chart:\n    spec:\n      chart: web\n      sourceRef: {kind: HelmRepository, "
                     "name: charts}\n")
    assert tpl.version == "*" and tpl.reconcile_strategy == "ChartVersion" and tpl.interval is None
    assert tpl.source_ref == SourceRef("HelmRepository", "charts", "demo")


@pytest.mark.parametrize(("inner", "field", "fix"), [
    ("chart: web\n      version: '>= one'\n      sourceRef: {name: c}", "spec.chart.spec.version", "semver range"),
    ("chart: web\n      sourceRef: {kind: GitRepository, name: c}", "spec.chart.spec.sourceRef.kind", "chartRef"),
    ("chart: web\n      sourceRef: {name: c}\n      reconcileStrategy: Always", "spec.chart.spec.reconcileStrategy",
     "Revision"),
    ("chart: web\n      sourceRef: {name: c}\n      valuesFiles: [../x.yaml]", "spec.chart.spec.valuesFiles[0]",
     "relative to the chart"),
    ("chart: ../web\n      sourceRef: {name: c}", "spec.chart.spec.chart", "chart's name"),
    ("chart: \"web\\n\"\n      sourceRef: {name: c}", "spec.chart.spec.chart", "chart's name"),
    ("chart: wéb\n      sourceRef: {name: c}", "spec.chart.spec.chart", "chart's name"),
    ("chart: web", "spec.chart.spec.sourceRef", "HelmRepository"),
])
def test_chart_template_errors(inner: str, field: str, fix: str) -> None:
    with pytest.raises(PackageError) as err:
        chart_spec(f"spec:\n  chart:\n    spec:\n      {inner}\n")
    assert err.value.field == field and fix in err.value.fix, str(err.value)
    assert err.value.line is not None


def test_chart_ref_and_missing_repository() -> None:
    text = "spec:\n  chartRef: {kind: OCIRepository, name: web}\n"
    ref = parse_chart_ref(yaml.safe_load(text)["spec"]["chartRef"], file=FILE, lines=lines_of(text),
                          namespace="demo")
    assert ref == SourceRef("OCIRepository", "web", "demo")
    other = OCIRepositorySpec(FILE, "api", "demo", "oci://r/c/api")
    with pytest.raises(PackageError) as err:
        find_source(ref, {other.ref: other}, file=FILE, lines=lines_of(text), path="spec.chartRef")
    assert "OCIRepository demo/web does not exist" in str(err.value) and "demo/api" in str(err.value)
    assert err.value.line == 2
    with pytest.raises(PackageError, match="HelmRepository"):
        parse_chart_ref({"kind": "HelmRepository", "name": "x"}, file=FILE, lines={}, namespace="demo")


def test_request_for_both_chart_forms() -> None:
    text = "spec:\n  chart:\n    spec:\n      chart: web\n      version: ~1.2\n      sourceRef: {name: charts}\n"
    tpl = chart_spec(text)
    charts = HelmRepositorySpec(FILE, "charts", "demo", "https://c.example")
    web = OCIRepositorySpec(FILE, "web", "demo", "oci://r.example/c/web")
    sources: dict[SourceRef, SourceSpec] = {charts.ref: charts, web.ref: web}
    req = request_for(tpl, sources, file=FILE, lines=lines_of(text), path="spec.chart")
    assert (req.source, req.chart, req.version) == (charts, "web", "~1.2")
    assert request_for(SourceRef("OCIRepository", "web", "demo"), sources, file=FILE, lines={},
                       path="spec.chartRef").source == web
    with pytest.raises(PackageError) as err:
        request_for(tpl, {web.ref: web}, file=FILE, lines=lines_of(text), path="spec.chart")
    assert err.value.field == "spec.chart.spec.sourceRef" and err.value.line == 6
    assert "HelmRepository demo/charts does not exist" in str(err.value)


def test_package_chart_forms_are_exclusive() -> None:
    def form(text: str) -> object:
        return parse_package_chart(yaml.safe_load(text)["spec"], file=FILE, lines=lines_of(text), namespace="demo")

    assert form("spec:\n  chart: ../charts/web\n") is None
    assert isinstance(form("spec:\n  chartRef: {kind: OCIRepository, name: web}\n"), SourceRef)
    tpl = form("spec:\n  chart:\n    spec: {chart: web, sourceRef: {name: c}}\n")
    assert isinstance(tpl, ChartTemplate) and tpl.chart == "web"
    with pytest.raises(PackageError, match="mutually exclusive") as err:
        form("spec:\n  chart: ../web\n  chartRef: {kind: OCIRepository, name: web}\n")
    assert err.value.line == 3
    with pytest.raises(PackageError, match="is required"):
        form("spec:\n  values: {}\n")


VERIFIED = ("spec:\n  chart:\n    spec:\n      chart: web\n      sourceRef: {name: charts}\n"
            "      verify: {provider: helm, secretRef: {name: keys}}\n")


def test_chart_verify_helm_provider() -> None:
    tpl = chart_spec(VERIFIED)
    assert tpl.verify == VerifySpec("helm", "keys", "demo", field="spec.chart.spec.verify")
    charts = HelmRepositorySpec(FILE, "charts", "demo", "https://c.example")
    req = request_for(tpl, {charts.ref: charts}, file=FILE, lines=lines_of(VERIFIED), path="spec.chart")
    assert req.verify == tpl.verify
    oci = HelmRepositorySpec(FILE, "charts", "demo", "oci://r.example/c", type="oci")
    with pytest.raises(PackageError) as err:  # a .prov is an HTTP repository's
        request_for(tpl, {oci.ref: oci}, file=FILE, lines=lines_of(VERIFIED), path="spec.chart")
    assert err.value.field == "spec.chart.spec.verify.provider" and "cosign" in err.value.fix


@pytest.mark.parametrize(("verify", "field", "words"), [
    ("{provider: helm}", "spec.chart.spec.verify.secretRef", "pubring.gpg"),
    ("{provider: helm, secretRef: {name: Keys!}}", "spec.chart.spec.verify.secretRef.name", "lower-case"),
    ("{provider: pgp, secretRef: {name: k}}", "spec.chart.spec.verify.provider", "provider: helm"),
    ("{provider: cosign, secretRef: {name: k}}", "spec.chart.spec.verify", "OCIRepository"),
    ("{provider: helm, secretRef: {name: k}, matchOIDCIdentity: []}", "spec.chart.spec.verify.matchOIDCIdentity",
     ""),
    ("helm", "spec.chart.spec.verify", ""),
])
def test_chart_verify_errors(verify: str, field: str, words: str) -> None:
    with pytest.raises(PackageError) as err:
        chart_spec(VERIFIED.replace("{provider: helm, secretRef: {name: keys}}", verify))
    assert err.value.field == field and words in str(err.value), str(err.value)
