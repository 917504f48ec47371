"""``helmdeck versions PACKAGE``: the chart versions a package's repository offers.

Newest first, with app version and creation date, marking the deployed version and whether each
version is inside the package's range (``spec.chart.spec.version``, or an OCIRepository's
``ref.semver`` / ``ref.tag``). The list comes from :meth:`engine.sources.ChartSource.versions`
(the repository's index, or the registry's tags); nothing is pulled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from engine.runtime.engine import Engine


def _load(args: argparse.Namespace) -> Any:
    """The PackageSpec PACKAGE names, linked to its repository (its whole folder is read: the repository may
    be declared in another file). Exits with a message when there is none or its file has errors."""
    from engine.base.fields import PackageError
    from engine.package.load import load_packages

    candidate = Path(args.package)
    folder = candidate.resolve().parent if candidate.is_file() else args.packages
    if folder is None:
        print(f"error: no package file {args.package!r} (pass --packages DIR to look packages up by name)",
              file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    specs, errors = load_packages(folder)

    def wanted(file: Path, name: str = "", release: str = "") -> bool:
        if candidate.is_file():
            return file.resolve() == candidate.resolve()
        return args.package in (name, release)

    for spec in specs:
        if wanted(spec.file, spec.name, spec.release_name):
            return spec
    problems: list[PackageError] = [e for e in errors if candidate.is_file() and wanted(e.file)]
    for err in problems:
        print(f"error: {err}", file=sys.stderr)
    if not problems:
        print(f"error: no package file or package named {args.package!r} in {folder}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def rows(request: Any, infos: list[Any], deployed: str) -> list[dict[str, Any]]:
    """One JSON-ready row per available version: version, appVersion, created, inRange, deployed."""
    from engine.sources.updates import in_range, published

    mark = published(request, deployed)  # an OCI chart is deployed as <version>+<digest[:12]>
    return [{"version": i.version, "appVersion": i.app_version, "created": i.created,
             "inRange": in_range(request, i.version), "deployed": bool(deployed) and i.version == mark}
            for i in infos]


def table(items: list[dict[str, Any]]) -> str:
    """The ``-o table`` form: aligned columns; ``*`` marks the deployed version."""
    mark = {True: "yes", False: "no", None: "?"}
    lines = [["VERSION", "APP VERSION", "CREATED", "IN RANGE", "DEPLOYED"]]
    lines += [[r["version"], r["appVersion"] or "-", r["created"] or "-", mark[r["inRange"]],
               "*" if r["deployed"] else ""] for r in items]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def run(args: argparse.Namespace, make_engine: Callable[..., Engine]) -> int:
    """The command: exit 0 with the list, 1 for a local-chart package or a repository that fails
    (the message names the repository), 2 for usage errors. ``make_engine`` builds the read-only engine
    (for the deployed version and the cluster's Secrets)."""
    from engine.sources import SourceError
    from engine.sources.updates import range_text

    setup_logging(args.log_level, args.log_file)
    spec = _load(args)
    request = spec.chart_request
    if request is None:
        print(f"error: {spec.namespace}/{spec.name} uses the local chart {spec.chart_path}; `versions` lists "
              "the versions of a chart from a repository (spec.chart.spec with a HelmRepository, or "
              "spec.chartRef to an OCIRepository)", file=sys.stderr)
        return EXIT_FAILED
    args.packages = spec.file.parent
    args.namespaces, args.all_namespaces, args.no_lease = sorted({spec.namespace, spec.release_namespace}), False, True
    engine = make_engine(args, readonly=True, watch=False, monitors=False)

    async def collect() -> tuple[list[Any], str]:
        await engine.start(reconcile=False)
        try:
            stored = engine.history(spec.key)  # newest first: the latest stored revision's chart
            infos = await engine.offered_versions(request)
            return infos, stored[0].chart_version if stored else ""
        finally:
            await engine.stop()

    try:
        infos, deployed = asyncio.run(collect())
    except SourceError as exc:
        print(f"error: cannot list the versions of {spec.namespace}/{spec.name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    items = rows(request, infos, deployed)
    if args.output == "json":
        print(json.dumps({"package": f"{spec.namespace}/{spec.name}", "source": request.origin(),
                          "range": range_text(request), "deployed": deployed or None, "versions": items},
                         indent=2))
        return 0
    print(f"{spec.namespace}/{spec.name}: {request.origin()}; range {range_text(request)}; "
          f"deployed {deployed or 'none'}")
    print(table(items) if items else "no versions")
    return 0
