"""The field tables of the chart source kinds (HelmRepository, OCIRepository) and of a Package's chart fields
(``spec.chart.spec``, ``spec.chartRef``), with Flux's names (source.toolkit.fluxcd.io/v1).

:mod:`engine.sources.repository` takes the fields it allows from these tables and the CRD generator
(:mod:`engine.package.crd`) turns them into the CRDs' schemas (:mod:`engine.base.schema`).
"""

from __future__ import annotations

from engine.base.schema import Field

HELM_REPOSITORY = "HelmRepository"
OCI_REPOSITORY = "OCIRepository"
HELM_CHART = "HelmChart"  # Flux's chart object: the fields of a HelmRelease's spec.chart.spec, on their own
SOURCE_KINDS = (HELM_REPOSITORY, OCI_REPOSITORY)
REPO_TYPES = ("default", "oci")
RECONCILE_STRATEGIES = ("ChartVersion", "Revision")
OCI_VERIFY_PROVIDERS = ("cosign", "notation")  # Flux's; notation is refused by the loader
CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"  # the media type of helm's chart layer
LAYER_OPERATIONS = ("extract", "copy")  # Flux's OCIRepository spec.layerSelector.operation (default extract)

_SECRET_REF = (Field("name", "string", "the Secret's name, in the repository's namespace", required=True),)
_COMMON = (
    Field("url", "string", "the repository's URL", required=True),
    Field("interval", "duration", "how often the repository is asked for new versions (default 1m)"),
    Field("timeout", "duration", "bound of each answer of the repository (default 60s)"),
    Field("secretRef", "object", "a Secret with username/password (or .dockerconfigjson for OCI)",
          fields=_SECRET_REF),
    Field("certSecretRef", "object", "a Secret with ca.crt, tls.crt and tls.key", fields=_SECRET_REF),
    Field("insecure", "boolean", "plain HTTP to an OCI registry"),
)
HELM_REPOSITORY_SPEC = (
    *_COMMON,
    Field("type", "string", "default (HTTP/S) or oci", enum=REPO_TYPES),
    Field("passCredentials", "boolean", "send the credentials to charts hosted on another host"),
)
OCI_REPOSITORY_SPEC = (
    *_COMMON,
    Field("ref", "object", "which artifact: digest, else semver (with semverFilter), else tag (default latest)",
          fields=(
              Field("digest", "string", "sha256:<64 hex digits>"),
              Field("semver", "string", "a semver range"),
              Field("semverFilter", "string", "a regular expression the versions must match"),
              Field("tag", "string", "an OCI tag"),
          )),
    Field("layerSelector", "object", "the layer taken: only helm's chart layer, copied (what helm pulls)", fields=(
        Field("mediaType", "string", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
        Field("operation", "string", "copy (extract is not implemented)", enum=LAYER_OPERATIONS),
    )),
    Field("verify", "object", "verify the artifact's signature before it is used (Flux's): provider cosign with "
          "public keys", fields=(
              Field("provider", "string", "cosign (notation is not implemented)", required=True,
                    enum=OCI_VERIFY_PROVIDERS),
              Field("secretRef", "object", "a Secret with cosign public keys (*.pub), in the repository's namespace",
                    fields=_SECRET_REF),
              Field("matchOIDCIdentity", "list", "keyless verification's OIDC issuer and subject (read and refused: "
                    "it needs a Sigstore instance helmdeck cannot reach)", items="object", fields=(
                        Field("issuer", "string", "a regular expression of the OIDC issuer", required=True),
                        Field("subject", "string", "a regular expression of the signer's identity", required=True),
                    )),
          )),
)
SOURCE_SPECS = {HELM_REPOSITORY: HELM_REPOSITORY_SPEC, OCI_REPOSITORY: OCI_REPOSITORY_SPEC}

VERIFY_PROVIDERS = ("helm",)  # spec.chart.spec.verify (cosign verifies an OCIRepository's spec.verify)
CHART_VERIFY = (
    Field("provider", "string", "helm: Helm provenance (.prov), a helmdeck extension", required=True,
          enum=VERIFY_PROVIDERS),
    Field("secretRef", "object", "a Secret with the public keyring under pubring.gpg, in the "
          "HelmRepository's namespace", required=True, fields=_SECRET_REF),
)

_REF = (
    Field("kind", "string", "the source's kind"),
    Field("name", "string", "the source's name", required=True),
    Field("namespace", "string", "the source's namespace (default: the Package's)"),
)


def _chart_spec(ref: tuple[Field, ...], verify: bool = True) -> tuple[Field, ...]:
    return (
        Field("chart", "string", "the chart's name in the repository", required=True),
        Field("version", "string", "a semver range (default *)"),
        Field("sourceRef", "object", "the HelmRepository", required=True, fields=ref),
        Field("interval", "duration", "how often the chart is checked"),
        Field("reconcileStrategy", "string", "ChartVersion or Revision", enum=RECONCILE_STRATEGIES),
        Field("valuesFiles", "list", "values files inside the chart, merged in order", items="string"),
        Field("ignoreMissingValuesFiles", "boolean", "skip a missing chart values file"),
        *([Field("verify", "object", "verify the chart before it is used: provider helm (a helmdeck extension: "
                 "the chart's .prov, checked by helm pull --verify against the Secret's pubring.gpg)",
                 fields=CHART_VERIFY)] if verify else []),
    )


CHART_TEMPLATE = (
    Field("spec", "object", "a chart from a HelmRepository", required=True, fields=_chart_spec(_REF)),
)
CHART_REF = _REF
# Flux's HelmChart (source.toolkit.fluxcd.io/v1): the same fields; its sourceRef is in its own namespace.
# (its spec.verify is Flux's cosign/notation for OCI HelmRepository charts: not implemented)
HELM_CHART_SPEC = _chart_spec(_REF[:2], verify=False)


def document(spec: tuple[Field, ...]) -> tuple[Field, ...]:
    """A whole source document (HelmRepository, OCIRepository, HelmChart) whose ``spec`` has the fields ``spec``:
    what its loader checks every field of at once (:meth:`engine.base.fields.Fields.known`), so one run names every
    unknown field, as for a Package."""
    return (Field("apiVersion", "string"), Field("kind", "string"),
            Field("metadata", "object", fields=(Field("name", "string"), Field("namespace", "string"),
                                                Field("labels", "map"), Field("annotations", "map"))),
            Field("spec", "object", fields=spec))


SOURCE_DOCUMENTS = {kind: document(spec) for kind, spec in SOURCE_SPECS.items()}
HELM_CHART_DOCUMENT = document(HELM_CHART_SPEC)
