"""``helmdeck versions PACKAGE``: the chart versions a package's repository offers.

Newest first, with app version and creation date, marking the deployed version, whether each
version is inside the package's range (``spec.chart.spec.version``, or an OCIRepository's
``ref.semver`` / ``ref.tag``) and, for a package whose chart is verified, what verification kept for it
(as the app's version picker: :class:`engine.runtime.chart_versions.ChartVersions`). The list comes from the
repository's index, or the registry's tags; nothing is pulled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helmdeck import builder
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_FAILED, EXIT_USAGE, Subcommands

if TYPE_CHECKING:
    from engine.runtime.chart_versions import VersionList


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    versions = sub.add_parser(
        "versions", parents=[common], help="list the chart versions PACKAGE's repository offers",
        description="List the chart versions the repository of PACKAGE offers (spec.chart.spec or "
                    "spec.chartRef), newest first, with app version and date, marking the deployed version "
                    f"and whether each is inside the package's range. Exit {EXIT_FAILED} for a package with a "
                    "local chart or a repository that fails.")
    versions.add_argument("package", help="a package file, or a package name in --packages")
    versions.add_argument("-o", "--output", choices=["table", "json"], default="table")
    versions.set_defaults(run=run)


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


def rows(listed: VersionList) -> list[dict[str, Any]]:
    """One JSON-ready row per available version: version, appVersion, created, inRange, deployed and
    verification (``Verified``, ``Failed``, or None: the package asks none, or it is not known yet)."""
    return [{"version": r.version, "appVersion": r.app_version, "created": r.created, "inRange": r.in_range,
             "deployed": r.deployed, "verification": r.verification or None} for r in listed.rows]


def table(items: list[dict[str, Any]], *, verified: bool = False) -> str:
    """The ``-o table`` form: aligned columns; ``*`` marks the deployed version; ``verified``: a VERIFIED
    column (``yes``, ``fails``, ``?`` not known yet) for a package whose chart is verified."""
    mark = {True: "yes", False: "no", None: "?"}
    found = {"Verified": "yes", "Failed": "fails", None: "?"}
    lines = [["VERSION", "APP VERSION", "CREATED", "IN RANGE", "DEPLOYED"] + (["VERIFIED"] if verified else [])]
    lines += [[r["version"], r["appVersion"] or "-", r["created"] or "-", mark[r["inRange"]],
               "*" if r["deployed"] else ""] + ([found[r["verification"]]] if verified else []) for r in items]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    """The command: exit 0 with the list, 1 for a local-chart package or a repository that fails
    (the message names the repository), 2 for usage errors. A read-only engine gives the deployed version,
    the cluster's Secrets and the verifications kept in the cache. The list is the version picker's
    (:meth:`Engine.chart_versions`)."""
    from engine.runtime.engine import ActionRefused
    from engine.sources import SourceError

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
    engine = builder.engine(args, readonly=True, watch=False, monitors=False)

    async def collect() -> VersionList:
        await engine.start(reconcile=False)
        try:
            return await engine.chart_versions(spec.key)
        finally:
            await engine.stop()

    try:
        listed = asyncio.run(collect())
    except (SourceError, ActionRefused) as exc:
        print(f"error: cannot list the versions of {spec.namespace}/{spec.name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    items = rows(listed)
    if args.output == "json":
        print(json.dumps({"package": f"{spec.namespace}/{spec.name}", "source": listed.source,
                          "range": listed.range, "deployed": listed.deployed or None, "versions": items}, indent=2))
        return 0
    print(f"{spec.namespace}/{spec.name}: {listed.source}; range {listed.range}; deployed {listed.deployed or 'none'}")
    print(table(items, verified=request.verify is not None) if items else "no versions")
    return 0
