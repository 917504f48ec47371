"""Chart source documents and a Package's chart fields, with Flux's names and defaults.

Documents of the packages folder besides ``Package`` (apiVersion ``wire.API_VERSION``, or Flux's own
``source.toolkit.fluxcd.io/v1`` and ``v1beta2``; ``metadata: {name, namespace}``, labels and annotations
ignored), with the ``spec`` of Flux's source.toolkit.fluxcd.io/v1::

    kind: HelmRepository
    spec: {url: https://charts.example.com, type: default|oci, interval: 1m, timeout: 60s,
           secretRef: {name}, certSecretRef: {name}, passCredentials: false, insecure: false}

    kind: OCIRepository
    spec: {url: oci://registry.example.com/charts/web,
           ref: {digest: sha256:... | semver: ">=1.0.0" (semverFilter: regex) | tag: latest},
           interval: 1m, timeout: 60s, secretRef: {name}, certSecretRef: {name}, insecure: false,
           verify: {provider: cosign, secretRef: {name}}}

A Package names its chart in one of Flux's two forms (:func:`parse_chart_template`,
:func:`parse_chart_ref`)::

    spec.chart.spec: {chart: web, version: "^1.0", sourceRef: {kind: HelmRepository, name, namespace},
                      interval, reconcileStrategy: ChartVersion|Revision, valuesFiles: [...],
                      ignoreMissingValuesFiles: false}
    spec.chartRef: {kind: OCIRepository | HelmChart, name, namespace}

and Flux's ``HelmChart`` object holds ``spec.chart.spec``'s fields on its own (:func:`parse_helm_chart`;
its ``sourceRef`` names a HelmRepository of its own namespace).

Every problem raises :class:`engine.base.fields.PackageError` naming file, line, field and fix.
The parsers take the document's data and a map of dotted field paths to line numbers
(``lines``), so the package loader can call them on documents it composed itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from engine.base.fields import UNSUPPORTED_VALUE, parse_duration
from engine.base.fields import Fields as BaseFields
from engine.base.schema import allowed
from engine.base.wire import API_VERSION
from engine.sources.schema import (
    CHART_LAYER,
    CHART_REF,
    CHART_TEMPLATE,
    HELM_CHART_DOCUMENT,
    HELM_CHART_SPEC,
    LAYER_OPERATIONS,
    SOURCE_DOCUMENTS,
    SOURCE_SPECS,
    VERIFY_PROVIDERS,
)
from engine.sources.schema import HELM_CHART as HELM_CHART
from engine.sources.schema import HELM_REPOSITORY as HELM_REPOSITORY  # re-exported: the sources' names
from engine.sources.schema import OCI_REPOSITORY as OCI_REPOSITORY
from engine.sources.schema import RECONCILE_STRATEGIES as RECONCILE_STRATEGIES
from engine.sources.schema import REPO_TYPES as REPO_TYPES
from engine.sources.schema import SOURCE_KINDS as SOURCE_KINDS
from engine.sources.semver import Range, SemverError
from engine.sources.verify import VerifySpec

# helmdeck's own apiVersion, and Flux's source-controller's (its documents are read as they are)
SOURCE_API_VERSIONS = (API_VERSION, "source.toolkit.fluxcd.io/v1", "source.toolkit.fluxcd.io/v1beta2")
DEFAULT_INTERVAL = 60.0  # Flux's examples and the issue: 1m
DEFAULT_TIMEOUT = 60.0  # Flux's spec.timeout default for both kinds

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
OCI_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")  # the distribution spec's tag grammar
_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_HOST = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)\Z")  # name, IPv4, IPv6
_OCI_PART = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
_OCI_NAME = re.compile(rf"^{_OCI_PART}(/{_OCI_PART})*\Z")  # the distribution spec's repository name
MAX_URL = 2048


@dataclass(frozen=True)
class SourceRef:
    """A reference to a source document: ``kind``, ``name`` and ``namespace`` (the Package's by default)."""

    kind: str
    name: str
    namespace: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class HelmRepositorySpec:
    """Flux's HelmRepository. Durations in seconds; ``secret_ref`` / ``cert_secret_ref`` are Secret names
    in ``namespace`` (``username``/``password``, or ``.dockerconfigjson`` for OCI; ``ca.crt``, ``tls.crt``,
    ``tls.key``). ``insecure`` means plain HTTP for an OCI registry, as Flux."""

    file: Path
    name: str
    namespace: str
    url: str
    type: str = "default"
    interval: float = DEFAULT_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    secret_ref: str = ""
    cert_secret_ref: str = ""
    pass_credentials: bool = False
    insecure: bool = False

    @property
    def ref(self) -> SourceRef:
        return SourceRef(HELM_REPOSITORY, self.name, self.namespace)

    @property
    def is_oci(self) -> bool:
        return self.type == "oci"

    def describe(self) -> str:
        return f"{HELM_REPOSITORY} {self.namespace}/{self.name} ({self.url})"


@dataclass(frozen=True)
class OCIReference:
    """Flux's OCIRepository ``spec.ref``; precedence digest > semver > tag, default tag ``latest``."""

    digest: str = ""
    semver: str = ""
    semver_filter: str = ""
    tag: str = ""

    def admits(self, tag: str) -> bool:
        """Whether ``tag`` (as the registry lists it, ``_`` for ``+``) is a candidate at all: with
        ``semver_filter`` only tags it matches (searched anywhere in the tag, as Go's ``MatchString``), as
        Flux's OCIRepository reconciler drops the others before semver selection. The one rule for the
        resolution, the newer-version marker and the version picker."""
        return not self.semver_filter or _compiled(self.semver_filter).search(tag) is not None

    def admits_version(self, version: str) -> bool:
        """:meth:`admits` for a chart version (``+`` as helm pushes it: ``1.0.0+b`` is the tag ``1.0.0_b``)."""
        return self.admits(version.replace("+", "_"))

    def describe(self) -> str:
        if self.digest:
            return f"digest {self.digest}"
        if self.semver:
            only = f" (tags matching {self.semver_filter!r})" if self.semver_filter else ""
            return f"semver {self.semver!r}{only}"
        return f"tag {self.tag or 'latest'}"


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)  # checked at load (_oci_reference)


@dataclass(frozen=True)
class OCIRepositorySpec:
    """Flux's OCIRepository (``url`` is ``oci://host/path/chart``); durations in seconds; ``verify`` its
    ``spec.verify`` (cosign with public keys), None for none."""

    file: Path
    name: str
    namespace: str
    url: str
    reference: OCIReference = OCIReference()
    interval: float = DEFAULT_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    secret_ref: str = ""
    cert_secret_ref: str = ""
    insecure: bool = False
    verify: VerifySpec | None = None

    @property
    def ref(self) -> SourceRef:
        return SourceRef(OCI_REPOSITORY, self.name, self.namespace)

    def describe(self) -> str:
        return f"{OCI_REPOSITORY} {self.namespace}/{self.name} ({self.url})"


SourceSpec = HelmRepositorySpec | OCIRepositorySpec
_Found = TypeVar("_Found")


@dataclass(frozen=True)
class ChartTemplate:
    """Flux's ``spec.chart.spec``: a chart by name and version range from a HelmRepository.

    ``values_files`` are paths inside the chart; ``interval`` (seconds) None = the repository's.
    """

    chart: str
    source_ref: SourceRef
    version: str = "*"
    interval: float | None = None
    reconcile_strategy: str = "ChartVersion"
    values_files: tuple[str, ...] = ()
    ignore_missing_values_files: bool = False
    verify: VerifySpec | None = None


class Fields(BaseFields):
    """Field checks for one source document (see :class:`engine.base.fields.Fields`); booleans default to false."""

    def boolean(self, value: Any, path: str) -> bool:
        return bool(super().boolean(value, path))

    def duration(self, value: Any, path: str, default: float | None) -> float | None:
        if value is None:
            return default
        raw = self.string(value, path, fix="write a duration such as 1m or 90s")
        try:
            seconds = parse_duration(raw)
        except ValueError:
            raise self.error(path, f"{raw!r} is not a duration", "write e.g. 1m, 90s or 1m30s") from None
        if seconds <= 0:
            raise self.error(path, "must be longer than zero", "write e.g. 1m")
        return seconds

    def name(self, value: Any, path: str, *, what: str) -> str:
        text = self.string(value, path, required=True, fix=f"name the {what}")
        if not _DNS_SUBDOMAIN.match(text) or len(text) > 253:
            raise self.error(path, f"{text!r} is not a valid Kubernetes name",
                             "use lower-case letters, digits, '-' and '.'")
        return text

    def namespace(self, value: Any, path: str, default: str) -> str:
        text = self.string(value, path) or default
        if not _DNS_LABEL.match(text) or len(text) > 63:
            raise self.error(path, f"{text!r} is not a valid namespace name",
                             "use at most 63 lower-case letters, digits and '-'")
        return text

    def secret_ref(self, value: Any, path: str) -> str:
        section = self.mapping(value, path, allowed(SOURCE_SPECS[HELM_REPOSITORY], "secretRef"))
        return self.name(section.get("name"), f"{path}.name", what="Secret") if section else ""

    def version_range(self, value: Any, path: str, default: str) -> str:
        text = self.string(value, path).strip() or default
        try:
            Range.parse(text)
        except SemverError as exc:
            raise self.error(path, str(exc), "write a semver range such as ^1.2.0, 1.x or >=1.0.0 <2.0.0") from None
        return text


def _url(fields: Fields, value: Any, path: str, schemes: tuple[str, ...], *, repository: bool = False) -> str:
    """A repository URL of one of ``schemes``; for ``oci`` its path must be a repository name of the
    distribution spec (required when ``repository``). Raises PackageError."""
    url = fields.string(value, path, required=True, fix=f"give the repository URL ({' or '.join(schemes)})")
    if len(url) > MAX_URL:
        raise fields.error(path, f"is over {MAX_URL} characters", "shorten the URL")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise fields.error(path, "holds a space, a control or a non-ASCII character",
                           "percent-encode it (an internationalised host name in its xn-- form)")
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.netloc:
        raise fields.error(path, f"{url!r} is not a {' or '.join(s + '://' for s in schemes)} URL",
                           f"write e.g. {schemes[0]}://host/path")
    if parts.username is not None or parts.password is not None:
        # A credential in the URL would end up in logs and on helm's command line.
        raise fields.error(path, "holds a user name or password", "remove it from the URL and use spec.secretRef")
    if parts.query or parts.fragment:
        raise fields.error(path, "must not have a query or fragment", "remove the part after '?' or '#'")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if not _HOST.match(parts.hostname or "") or port == 0 or parts.netloc.endswith(":"):
        raise fields.error(path, f"{parts.netloc!r} is not a host name with an optional port (1-65535)",
                           f"write e.g. {schemes[0]}://registry.example.com:5000/path")
    name = parts.path.strip("/")
    example = "write e.g. oci://registry.example.com/charts/web"
    if parts.scheme == "oci" and repository and not name:
        raise fields.error(path, "names no repository", example)
    if parts.scheme == "oci" and name and not _OCI_NAME.match(name):
        raise fields.error(path, f"{name!r} is not a repository name (lower-case letters, digits and . _ - "
                           "between them, parts joined by /)", f"{example} (a tag or digest goes in spec.ref)")
    return url.rstrip("/")


def parse_source(data: Mapping[str, Any], *, file: Path, lines: Mapping[str, int]) -> SourceSpec:
    """Validate one ``HelmRepository`` or ``OCIRepository`` document. Raises PackageError."""
    fields = Fields(file, lines)
    if data.get("kind") in SOURCE_DOCUMENTS:  # every unknown field named at once; a bad kind is said below
        fields.known(data, SOURCE_DOCUMENTS[str(data.get("kind"))])
    top = fields.mapping(data, "", allowed(SOURCE_DOCUMENTS[HELM_REPOSITORY]))
    if top.get("apiVersion") not in SOURCE_API_VERSIONS:
        raise fields.error("apiVersion", f"must be one of {', '.join(SOURCE_API_VERSIONS)}, "
                           f"not {top.get('apiVersion')!r}")
    kind = top.get("kind")
    if kind not in SOURCE_KINDS:
        raise fields.error("kind", f"{kind!r} is not a chart source", f"use one of: {', '.join(SOURCE_KINDS)}")
    meta = fields.mapping(top.get("metadata"), "metadata", allowed(SOURCE_DOCUMENTS[HELM_REPOSITORY], "metadata"),
                          required=True, fix="give metadata.name")
    name = fields.name(meta.get("name"), "metadata.name", what=str(kind))
    namespace = fields.namespace(meta.get("namespace"), "metadata.namespace", "default")
    if kind == HELM_REPOSITORY:
        spec = fields.mapping(top.get("spec"), "spec", allowed(SOURCE_SPECS[kind]), required=True,
                              fix="give spec.url")
        repo_type = fields.string(spec.get("type"), "spec.type") or "default"
        if repo_type not in REPO_TYPES:
            raise fields.error("spec.type", f"unknown type {repo_type!r}", "use default (HTTP/S) or oci")
        url = _url(fields, spec.get("url"), "spec.url", ("oci",) if repo_type == "oci" else ("https", "http"))
        return HelmRepositorySpec(
            file=file, name=name, namespace=namespace, url=url, type=repo_type,
            interval=fields.duration(spec.get("interval"), "spec.interval", DEFAULT_INTERVAL) or DEFAULT_INTERVAL,
            timeout=fields.duration(spec.get("timeout"), "spec.timeout", DEFAULT_TIMEOUT) or DEFAULT_TIMEOUT,
            secret_ref=fields.secret_ref(spec.get("secretRef"), "spec.secretRef"),
            cert_secret_ref=fields.secret_ref(spec.get("certSecretRef"), "spec.certSecretRef"),
            pass_credentials=fields.boolean(spec.get("passCredentials"), "spec.passCredentials"),
            insecure=fields.boolean(spec.get("insecure"), "spec.insecure"),
        )
    spec = fields.mapping(top.get("spec"), "spec", allowed(SOURCE_SPECS[kind]), required=True,
                          fix="give spec.url")
    url = _url(fields, spec.get("url"), "spec.url", ("oci",), repository=True)
    _check_layer_selector(fields, spec.get("layerSelector"))
    return OCIRepositorySpec(
        file=file, name=name, namespace=namespace, url=url,
        reference=_oci_reference(fields, spec.get("ref")),
        interval=fields.duration(spec.get("interval"), "spec.interval", DEFAULT_INTERVAL) or DEFAULT_INTERVAL,
        timeout=fields.duration(spec.get("timeout"), "spec.timeout", DEFAULT_TIMEOUT) or DEFAULT_TIMEOUT,
        secret_ref=fields.secret_ref(spec.get("secretRef"), "spec.secretRef"),
        cert_secret_ref=fields.secret_ref(spec.get("certSecretRef"), "spec.certSecretRef"),
        insecure=fields.boolean(spec.get("insecure"), "spec.insecure"),
        verify=_oci_verify(fields, spec.get("verify"), namespace),
    )


def _check_layer_selector(fields: Fields, value: Any) -> None:
    """Check Flux's OCIRepository ``spec.layerSelector`` (absent, or helm's chart layer copied as it is).
    helmdeck pulls the chart layer as helm pulls it, which is what Flux's source-controller gives for the
    selection ``{mediaType: <helm's chart layer>, operation: copy}``; another media type or extracting the
    layer's files cannot be honoured. Raises PackageError naming the field."""
    if value is None:
        return
    path = "spec.layerSelector"
    section = fields.mapping(value, path, allowed(SOURCE_SPECS[OCI_REPOSITORY], "layerSelector"))
    media = fields.string(section.get("mediaType"), f"{path}.mediaType")
    operation = fields.choice(section.get("operation"), f"{path}.operation", LAYER_OPERATIONS, "extract")
    fix = f"select mediaType: {CHART_LAYER} with operation: copy, or remove spec.layerSelector"
    if media != CHART_LAYER:
        raise fields.error(f"{path}.mediaType", f"{media or 'no media type'!r} is not helm's chart layer: helmdeck "
                           "pulls the chart layer helm pulls, no other", fix)
    if operation != "copy":
        raise fields.error(f"{path}.operation", f"{operation!r} unpacks the chart's files, which helmdeck does not "
                           "do: helm takes the chart layer as it is (operation: copy)", fix)


def _oci_verify(fields: Fields, value: Any, namespace: str) -> VerifySpec | None:
    """Flux's OCIRepository ``spec.verify``: ``{provider: cosign, secretRef: {name}}``, the Secret (in the
    repository's namespace) holding cosign public keys (``*.pub``); None when absent. Keyless verification
    (``matchOIDCIdentity``, or no ``secretRef``) is read and refused: it checks a Fulcio certificate and a Rekor
    transparency log entry, and no Sigstore instance is reachable from here; ``notation`` is not implemented.
    Raises PackageError."""
    if value is None:
        return None
    p = "spec.verify"
    table = SOURCE_SPECS[OCI_REPOSITORY]
    section = fields.mapping(value, p, allowed(table, "verify"), required=True,
                             fix="write verify: {provider: cosign, secretRef: {name: <Secret with cosign.pub>}}")
    provider = fields.string(section.get("provider"), f"{p}.provider", required=True, fix="write provider: cosign")
    if provider == "notation":
        raise fields.error(f"{p}.provider", "notation is not implemented by helmdeck",
                           "sign the chart with cosign and write provider: cosign")
    if provider != "cosign":
        raise fields.error(f"{p}.provider", f"unknown provider {provider!r}", "write provider: cosign")
    identities = []
    for i, item in enumerate(fields.sequence(section.get("matchOIDCIdentity"), f"{p}.matchOIDCIdentity",
                                             "write a list of {issuer, subject}")):
        at = f"{p}.matchOIDCIdentity[{i}]"
        pair = fields.mapping(item, at, allowed(table, "verify.matchOIDCIdentity"), required=True)
        identities.append((fields.string(pair.get("issuer"), f"{at}.issuer", required=True, fix="give the issuer"),
                           fields.string(pair.get("subject"), f"{at}.subject", required=True,
                                         fix="give the subject")))
    if identities or section.get("secretRef") is None:
        where = f"{p}.matchOIDCIdentity" if identities else f"{p}.secretRef"
        raise fields.error(where, "keyless verification is not possible here: it needs a Sigstore instance (Fulcio's "
                           "certificates, Rekor's transparency log) that helmdeck cannot reach",
                           f"verify with public keys: name a Secret holding cosign public keys (*.pub) in "
                           f"{p}.secretRef{' and remove matchOIDCIdentity' if identities else ''}")
    name = fields.secret_ref(section.get("secretRef"), f"{p}.secretRef")
    return VerifySpec("cosign", name, namespace, field=p)


def _oci_reference(fields: Fields, raw: Any) -> OCIReference:
    ref = fields.mapping(raw, "spec.ref", allowed(SOURCE_SPECS[OCI_REPOSITORY], "ref"))
    digest = fields.string(ref.get("digest"), "spec.ref.digest")
    if digest and not _DIGEST.match(digest):
        raise fields.error("spec.ref.digest", f"{digest!r} is not a sha256 digest", "write sha256:<64 hex digits>")
    semver = fields.version_range(ref.get("semver"), "spec.ref.semver", "") if ref.get("semver") else ""
    semver_filter = fields.string(ref.get("semverFilter"), "spec.ref.semverFilter")
    if semver_filter:
        if not semver:
            raise fields.error("spec.ref.semverFilter", "applies only with spec.ref.semver", "add spec.ref.semver")
        try:
            re.compile(semver_filter)
        except re.error as exc:
            raise fields.error("spec.ref.semverFilter", f"not a regular expression ({exc})",
                               "write e.g. '.*-rc.*'") from None
    tag = fields.string(ref.get("tag"), "spec.ref.tag")
    if tag and not OCI_TAG.match(tag):
        raise fields.error("spec.ref.tag", f"{tag!r} is not an OCI tag",
                           "use letters, digits, '_', '.' and '-' (at most 128)")
    if not (digest or semver or tag):
        tag = "latest"  # Flux's default
    return OCIReference(digest=digest, semver=semver, semver_filter=semver_filter, tag=tag)


def parse_chart_template(
    value: Any, *, file: Path, lines: Mapping[str, int], namespace: str, path: str = "spec.chart",
) -> ChartTemplate:
    """Validate ``spec.chart`` in Flux's template form (``{spec: {...}}``). Raises PackageError.

    ``namespace`` is the Package's (the default of ``sourceRef.namespace``).
    """
    fields = Fields(file, lines)
    outer = fields.mapping(value, path, allowed(CHART_TEMPLATE), required=True)
    return _chart_spec(fields, outer.get("spec"), f"{path}.spec", namespace, allowed(CHART_TEMPLATE, "spec.sourceRef"))


def _chart_spec(fields: Fields, value: Any, p: str, namespace: str, ref_fields: tuple[str, ...],
                spec_fields: tuple[str, ...] = allowed(CHART_TEMPLATE, "spec")) -> ChartTemplate:
    """The chart fields at ``p`` (a HelmRelease's ``spec.chart.spec``, a HelmChart's ``spec``). Raises PackageError."""
    spec = fields.mapping(value, p, spec_fields, required=True,
                          fix="give chart, version and sourceRef")
    chart = fields.string(spec.get("chart"), f"{p}.chart", required=True, fix="name the chart in the repository")
    if not _CHART_NAME.match(chart) or ".." in chart:
        raise fields.error(f"{p}.chart", f"{chart!r} is not a chart name",
                           "use the chart's name in the repository (letters, digits, '-', '_', '.')")
    src = fields.mapping(spec.get("sourceRef"), f"{p}.sourceRef", ref_fields, required=True,
                         fix="point at a HelmRepository: {kind: HelmRepository, name: ...}")
    kind = fields.string(src.get("kind"), f"{p}.sourceRef.kind") or HELM_REPOSITORY
    if kind != HELM_REPOSITORY:
        raise fields.error(f"{p}.sourceRef.kind", f"{kind!r} is not supported here",
                           f"use {HELM_REPOSITORY}, or spec.chartRef for an {OCI_REPOSITORY}")
    ref = SourceRef(kind, fields.name(src.get("name"), f"{p}.sourceRef.name", what=HELM_REPOSITORY),
                    fields.namespace(src.get("namespace"), f"{p}.sourceRef.namespace", namespace))
    strategy = fields.string(spec.get("reconcileStrategy"), f"{p}.reconcileStrategy") or "ChartVersion"
    if strategy not in RECONCILE_STRATEGIES:
        raise fields.error(f"{p}.reconcileStrategy", f"unknown strategy {strategy!r}",
                           f"use one of: {', '.join(RECONCILE_STRATEGIES)}")
    files_raw = fields.sequence(spec.get("valuesFiles"), f"{p}.valuesFiles")
    values_files = []
    for i, item in enumerate(files_raw):
        rel = fields.string(item, f"{p}.valuesFiles[{i}]", required=True, fix="give a path inside the chart")
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise fields.error(f"{p}.valuesFiles[{i}]", f"{rel!r} is not inside the chart",
                               "give a path relative to the chart's root, e.g. values-prod.yaml")
        values_files.append(rel)
    return ChartTemplate(
        chart=chart, source_ref=ref, verify=_chart_verify(fields, spec.get("verify"), f"{p}.verify", ref.namespace),
        version=fields.version_range(spec.get("version"), f"{p}.version", "*"),
        interval=fields.duration(spec.get("interval"), f"{p}.interval", None),
        reconcile_strategy=strategy, values_files=tuple(values_files),
        ignore_missing_values_files=fields.boolean(spec.get("ignoreMissingValuesFiles"),
                                                   f"{p}.ignoreMissingValuesFiles"),
    )


def _chart_verify(fields: Fields, value: Any, p: str, namespace: str) -> VerifySpec | None:
    """``spec.chart.spec.verify``: ``{provider: helm, secretRef: {name}}`` (the Secret in the HelmRepository's
    namespace, as Flux's HelmChart holds it), None when absent. Raises PackageError."""
    if value is None:
        return None
    section = fields.mapping(value, p, allowed(CHART_TEMPLATE, "spec.verify"), required=True,
                             fix="write verify: {provider: helm, secretRef: {name: <Secret with pubring.gpg>}}")
    provider = fields.string(section.get("provider"), f"{p}.provider", required=True, fix="write provider: helm")
    if provider in ("cosign", "notation"):  # Flux's providers for OCI HelmRepository charts
        raise fields.error(p, UNSUPPORTED_VALUE, f"provider {provider!r}: verify signatures on an "
                           f"{OCI_REPOSITORY}'s spec.verify, named by spec.chartRef; or sign with helm package "
                           "--sign and use provider helm")
    if provider not in VERIFY_PROVIDERS:
        raise fields.error(f"{p}.provider", f"unknown provider {provider!r}", "write provider: helm")
    ref = fields.mapping(section.get("secretRef"), f"{p}.secretRef", allowed(CHART_TEMPLATE, "spec.verify.secretRef"),
                         required=True, fix="name the Secret holding pubring.gpg")
    name = fields.name(ref.get("name"), f"{p}.secretRef.name", what="Secret")
    return VerifySpec(provider, name, namespace, field=p)


@dataclass(frozen=True)
class HelmChartSpec:
    """Flux's HelmChart object (``source.toolkit.fluxcd.io/v1``, ``v1beta2``): a chart by name and version range
    from a HelmRepository of its own namespace, as a standalone object. A HelmRelease's ``spec.chartRef`` to it
    means what ``spec.chart.spec`` with the same ``template`` means (Flux's helm-controller reads the chart its
    HelmChart selects either way). ``unfetchable``: why helmdeck cannot fetch its chart (a GitRepository or
    Bucket source, read with ``--allow-unsupported``), "" when it can."""

    file: Path
    name: str
    namespace: str
    template: ChartTemplate
    unfetchable: str = ""

    @property
    def ref(self) -> SourceRef:
        return SourceRef(HELM_CHART, self.name, self.namespace)


def parse_helm_chart(data: Mapping[str, Any], *, file: Path, lines: Mapping[str, int],
                     unfetchable: str = "") -> HelmChartSpec:
    """Validate one Flux ``HelmChart`` document (``spec``: chart, version, sourceRef, interval,
    reconcileStrategy, valuesFiles, ignoreMissingValuesFiles). ``unfetchable`` (the caller's reason for a
    GitRepository or Bucket source) reads the source's kind as HelmRepository and keeps the reason.
    Raises PackageError."""
    fields = Fields(file, lines)
    fields.known(data, HELM_CHART_DOCUMENT)  # every unknown field named at once
    top = fields.mapping(data, "", allowed(HELM_CHART_DOCUMENT))
    if top.get("apiVersion") not in SOURCE_API_VERSIONS[1:]:
        raise fields.error("apiVersion", f"must be one of {', '.join(SOURCE_API_VERSIONS[1:])}, "
                           f"not {top.get('apiVersion')!r}", f"a {HELM_CHART} is Flux's source-controller object")
    meta = fields.mapping(top.get("metadata"), "metadata", allowed(HELM_CHART_DOCUMENT, "metadata"),
                          required=True, fix="give metadata.name")
    name = fields.name(meta.get("name"), "metadata.name", what=HELM_CHART)
    namespace = fields.namespace(meta.get("namespace"), "metadata.namespace", "default")
    spec = top.get("spec")
    if unfetchable and isinstance(spec, dict) and isinstance(spec.get("sourceRef"), dict):
        spec = {**spec, "sourceRef": {**spec["sourceRef"], "kind": HELM_REPOSITORY}}
    template = _chart_spec(fields, spec, "spec", namespace, allowed(HELM_CHART_SPEC, "sourceRef"),
                           allowed(HELM_CHART_SPEC))
    return HelmChartSpec(file, name, namespace, template, unfetchable)


def parse_chart_ref(
    value: Any, *, file: Path, lines: Mapping[str, int], namespace: str, path: str = "spec.chartRef",
) -> SourceRef:
    """Validate ``spec.chartRef`` (``{kind: OCIRepository | HelmChart, name, namespace}``). Raises PackageError."""
    fields = Fields(file, lines)
    ref = fields.mapping(value, path, allowed(CHART_REF), required=True)
    kind = fields.string(ref.get("kind"), f"{path}.kind", required=True, fix=f"write kind: {OCI_REPOSITORY}")
    if kind not in (OCI_REPOSITORY, HELM_CHART):
        raise fields.error(f"{path}.kind", f"{kind!r} is not supported here",
                           f"use {OCI_REPOSITORY} or {HELM_CHART}, or spec.chart.spec for a chart from a "
                           f"{HELM_REPOSITORY}")
    return SourceRef(kind, fields.name(ref.get("name"), f"{path}.name", what=kind),
                     fields.namespace(ref.get("namespace"), f"{path}.namespace", namespace))


def parse_package_chart(
    spec: Mapping[str, Any], *, file: Path, lines: Mapping[str, int], namespace: str,
) -> ChartTemplate | SourceRef | None:
    """A Package's remote chart form: ``spec.chart.spec`` (a ChartTemplate), ``spec.chartRef`` (a SourceRef),
    or None when ``spec.chart`` is a string (a local directory or ``.tgz``, the loader's business).

    Raises PackageError when both or neither are given (as Flux, they are mutually exclusive).
    """
    fields = Fields(file, lines)
    chart, ref = spec.get("chart"), spec.get("chartRef")
    if chart is not None and ref is not None:
        raise fields.error("spec.chartRef", "spec.chart and spec.chartRef are mutually exclusive",
                           "keep one: spec.chart for a local chart or a HelmRepository, spec.chartRef for an "
                           f"{OCI_REPOSITORY}")
    if ref is not None:
        return parse_chart_ref(ref, file=file, lines=lines, namespace=namespace)
    if chart is None:
        raise fields.error("spec.chart", "is required",
                           "give a chart directory or .tgz (relative to this file), spec.chart.spec for a chart "
                           f"from a {HELM_REPOSITORY}, or spec.chartRef for an {OCI_REPOSITORY}")
    if isinstance(chart, str):
        return None
    return parse_chart_template(chart, file=file, lines=lines, namespace=namespace)


def find_source(
    ref: SourceRef, sources: Mapping[SourceRef, _Found], *, file: Path, lines: Mapping[str, int], path: str,
) -> _Found:
    """The source document (or HelmChart) ``ref`` names; PackageError naming the missing one (and those known)."""
    found = sources.get(ref)
    if found is not None:
        return found
    known = sorted(f"{r.namespace}/{r.name}" for r in sources if r.kind == ref.kind)
    hint = f"known {ref.kind}s: {', '.join(known)}" if known else f"declare a {ref.kind} in the packages folder"
    raise Fields(file, lines).error(path, f"{ref} does not exist", hint)


@dataclass(frozen=True)
class ChartRequest:
    """What a package asks for: a chart (by name, in a HelmRepository) and a version range, or the chart an
    OCIRepository's ``ref`` selects (``chart`` and ``version`` unused). ``verify``: the verification the
    artifact must pass before it is used (:mod:`engine.sources.verify`), None for none."""

    source: SourceSpec
    chart: str = ""
    version: str = "*"
    verify: VerifySpec | None = None

    @property
    def revision_digest(self) -> bool:
        """Does the installed chart version carry the source's manifest digest (``<version>+<digest[:12]>``)?
        Only for a chart from an OCIRepository, never a HelmRepository of type oci, as helm-controller's
        internal/controller/helmrelease_controller.go ``isSourceWithRevisionDigest`` (its other case, an
        ExternalArtifact, is a source helmdeck cannot fetch)."""
        return isinstance(self.source, OCIRepositorySpec)

    def wanted(self) -> str:
        """What is asked for, in a few words: ``chart 'web' in range '^1.0'`` or the OCI reference."""
        if isinstance(self.source, OCIRepositorySpec):
            return self.source.reference.describe()
        return f"chart {self.chart!r} in range {self.version!r}"

    def origin(self) -> str:
        """Where the chart comes from, without the version asked: the OCIRepository, or ``chart 'web' from``
        the HelmRepository (the version picker's heading says the range on its own line)."""
        if isinstance(self.source, OCIRepositorySpec):
            return self.source.describe()
        return f"chart {self.chart!r} from {self.source.describe()}"

    def describe(self) -> str:
        if isinstance(self.source, OCIRepositorySpec):
            return f"{self.source.describe()}, {self.source.reference.describe()}"
        return f"chart {self.chart!r} version {self.version!r} from {self.source.describe()}"


def request_for(
    chart: ChartTemplate | SourceRef, sources: Mapping[SourceRef, SourceSpec], *, file: Path,
    lines: Mapping[str, int], path: str,
) -> ChartRequest:
    """The request a Package's ``spec.chart.spec`` (a ChartTemplate) or ``spec.chartRef`` (a SourceRef) makes,
    against the source documents loaded. Raises PackageError naming a missing repository (at ``path``)."""
    ref = chart.source_ref if isinstance(chart, ChartTemplate) else chart
    where = f"{path}.spec.sourceRef" if isinstance(chart, ChartTemplate) else path
    source = find_source(ref, sources, file=file, lines=lines, path=where)
    if isinstance(chart, ChartTemplate):
        if chart.verify is not None and chart.verify.provider == "helm" and isinstance(source, HelmRepositorySpec) \
                and source.is_oci:
            raise Fields(file, lines).error(f"{chart.verify.field}.provider", f"provider helm checks the .prov "
                                            f"file of an HTTP repository; {source.ref} is an OCI registry",
                                            f"serve the chart from an HTTP HelmRepository, or verify with cosign on "
                                            f"an {OCI_REPOSITORY}")
        return ChartRequest(source, chart.chart, chart.version, chart.verify)
    return ChartRequest(source, verify=source.verify if isinstance(source, OCIRepositorySpec) else None)
