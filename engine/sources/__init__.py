"""Chart sources as Flux's source-controller has them: HTTP Helm repositories and OCI registries.

- :mod:`engine.sources.repository`: ``HelmRepository`` / ``OCIRepository`` documents and a Package's
  ``spec.chart.spec`` / ``spec.chartRef`` (parse functions for the package loader);
- :mod:`engine.sources.source`: :class:`ChartSource` resolves a :class:`ChartRequest` to a local
  chart archive (:class:`ChartArtifact`) and lists versions; every pull is ``helm pull``;
- :mod:`engine.sources.semver`: Helm's version ranges;
- :mod:`engine.sources.verify`: verification before an artifact is used (Helm provenance, cosign), the
  results kept by artifact and key set digest, Flux's ``SourceVerified``;
- :mod:`engine.sources.cosign`: ``cosign verify`` of an OCIRepository's ``spec.verify`` (keys, no transparency log);
- :mod:`engine.sources.pin`: precise edits of one YAML scalar (the version picker's pin);
- :mod:`engine.sources.errors`: typed failures with Flux's reasons.
"""

from typing import TYPE_CHECKING, Any

from engine.sources.errors import (
    CredentialsError,
    NoMatchingVersion,
    PullFailed,
    SourceAuthFailed,
    SourceError,
    SourceInvalid,
    SourceUnreachable,
)
from engine.sources.repository import (
    SOURCE_KINDS,
    ChartRequest,
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

if TYPE_CHECKING:
    from engine.sources.source import ChartArtifact, ChartSource, ChartVersionInfo

# Pulling and listing (source.py with the index, OCI and helm pull modules) are loaded on first use: loading
# package files needs only the documents (repository.py), and a no-op command pulls nothing.
_LAZY = {"ChartArtifact", "ChartSource", "ChartVersionInfo"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from engine.sources import source

        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "SOURCE_KINDS",
    "ChartArtifact",
    "ChartRequest",
    "ChartSource",
    "ChartTemplate",
    "ChartVersionInfo",
    "CredentialsError",
    "HelmRepositorySpec",
    "NoMatchingVersion",
    "OCIReference",
    "OCIRepositorySpec",
    "PullFailed",
    "SourceAuthFailed",
    "SourceError",
    "SourceInvalid",
    "SourceRef",
    "SourceSpec",
    "SourceUnreachable",
    "find_source",
    "parse_chart_ref",
    "parse_chart_template",
    "parse_package_chart",
    "parse_source",
    "request_for",
]
