"""The CustomResourceDefinitions of a chart's ``crds/`` folders, created or applied by helmdeck per the
package's CRD policy (:mod:`engine.package.crds`), as Flux's ``internal/action/crds.go``.

helm itself only creates missing CRDs on install (``--skip-crds`` turns that off) and never touches
them on upgrade. helmdeck does the rest before helm runs: ``Create`` on an upgrade creates the
missing ones, ``CreateReplace`` applies every one server-side (field manager ``helmdeck``, conflicts
forced, as Flux replaces them). Then it waits until each is Established, within the package's
timeout. A CRD is never deleted: one that left the chart stays in the cluster.

Reading is bounded: :data:`MAX_CRD_BYTES` of chart files in all, subcharts at most
:data:`engine.helm.subcharts.MAX_DEPTH` deep (directories under ``charts/`` and packaged ``charts/*.tgz``), each file
parsed by the bounded loader (nesting and alias expansion limited, as package files). As helm's
``Chart.CRDObjects``, only ``.yaml``, ``.yml`` and ``.json`` files count, and, as helm drops
disabled dependencies first, only the subcharts the release's values enable
(:mod:`engine.helm.subcharts`: ``condition`` and ``tags`` of ``Chart.yaml``'s dependencies).
"""

from __future__ import annotations

import asyncio
import json
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.loader import Limits, YamlLimitError, parse_documents
from engine.helm.errors import HelmError
from engine.helm.subcharts import ChartTreeError, enabled_files, load_tree
from engine.kube import rest
from engine.kube.client import impersonating

# The CRD policies (Flux's names), what a package's ``spec.install.crds`` / ``spec.upgrade.crds`` choose.
SKIP = "Skip"
CREATE = "Create"
CREATE_REPLACE = "CreateReplace"
POLICIES = (SKIP, CREATE, CREATE_REPLACE)
MAX_CRD_BYTES = 16 * 1024 * 1024
FIELD_MANAGER = "helmdeck"
_API_VERSION = "apiextensions.k8s.io/v1"
_PLURAL = "customresourcedefinitions"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply (JSON is YAML)


class CrdError(HelmError):
    """The chart's CRDs could not be read, created, applied or did not become Established."""


def needs_helmdeck(policy: str, *, install: bool, labelled: bool = False) -> bool:
    """Does helmdeck act on CRDs itself for this policy? ``CreateReplace`` always; ``Create`` on an
    upgrade, and on an install when the CRDs are ``labelled`` (helm cannot label them; otherwise helm creates
    the missing ones); ``Skip`` never."""
    return policy == CREATE_REPLACE or (policy == CREATE and (labelled or not install))


def helm_skips(policy: str, *, labelled: bool = False) -> bool:
    """Does helm get ``--skip-crds``? Unless the policy is ``Create`` and the CRDs are not ``labelled`` (then
    helm creates them on install)."""
    return policy != CREATE or labelled


class _Budget:
    def __init__(self, chart: Path):
        self.chart = chart
        self.left = MAX_CRD_BYTES

    def take(self, size: int, name: str) -> None:
        self.left -= size
        if self.left < 0:
            raise CrdError(f"{self.chart}: the chart's files exceed {MAX_CRD_BYTES} bytes (at {name})",
                           action="crds")


def chart_crds(chart: Path, values: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in ``crds/`` of ``chart`` (a directory or ``.tgz``) and of the subcharts
    ``values`` (the release's; None: the chart's defaults) enable, in file order (chart first), each name
    once. Raises CrdError (unreadable, over the bound, bad YAML)."""
    limits = Limits(MAX_CRD_BYTES)
    try:
        tree = load_tree(chart, _Budget(chart).take, limits)
    except (OSError, tarfile.TarError, ChartTreeError) as exc:
        raise CrdError(f"cannot read the CRDs of {chart}: {exc}", action="crds") from None
    out: dict[str, dict[str, Any]] = {}
    for name, text in enabled_files(tree, values or {}):
        try:
            docs = [p.data for p in parse_documents(text, Path(name), limits)]
        except YamlLimitError as exc:
            raise CrdError(f"{chart}: {exc}", action="crds") from None
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out.setdefault(str((doc.get("metadata") or {}).get("name") or len(out)), doc)
    return list(out.values())


async def prepare_crds(api: client.ApiClient | None, chart: Path, policy: str, *, install: bool,
                       timeout: float, values: Mapping[str, Any] | None = None, as_user: str = "",
                       labels: Mapping[str, str] | None = None) -> None:
    """What helmdeck does with ``chart``'s CRDs before helm installs (``install``) or upgrades it with
    ``values`` under ``policy`` (nothing when :func:`needs_helmdeck` says so, or without a cluster client),
    as ``as_user`` when given (the package's ServiceAccount, impersonated, as helm), each CRD with ``labels``
    added. Raises CrdError."""
    if api is None or not needs_helmdeck(policy, install=install, labelled=bool(labels)):
        return
    crds = await asyncio.to_thread(chart_crds, chart, values)
    if labels:
        crds = [{**c, "metadata": {**(c.get("metadata") or {}),
                                   "labels": {**((c.get("metadata") or {}).get("labels") or {}), **labels}}}
                for c in crds]
    if crds:
        await asyncio.to_thread(apply_crds, impersonating(api, as_user) if as_user else api, crds, policy, timeout)


def apply_crds(api: client.ApiClient, crds: list[dict[str, Any]], policy: str, timeout: float) -> list[str]:
    """Create (``Create``: the missing ones) or server-side apply (``CreateReplace``) ``crds``, then wait
    until each is Established, ``timeout`` seconds at most. Returns the CRD names acted on (created or
    applied). Never deletes one. Synchronous (run it in a thread). Raises CrdError, naming the CRD."""
    if policy == SKIP or not crds:
        return []
    deadline = time.monotonic() + timeout
    acted: list[str] = []
    for crd in crds:
        name = str((crd.get("metadata") or {}).get("name") or "")
        if not name:
            raise CrdError("a CustomResourceDefinition in crds/ has no metadata.name", action="crds")
        try:
            if policy == CREATE_REPLACE:
                rest.send(api, "PATCH", rest.path(_API_VERSION, _PLURAL, name=name), crd,
                          [("fieldManager", FIELD_MANAGER), ("force", "true")], content_type=APPLY_PATCH)
            else:
                rest.send(api, "POST", rest.path(_API_VERSION, _PLURAL), crd, [("fieldManager", FIELD_MANAGER)])
        except ApiException as exc:
            if policy == CREATE and exc.status == 409:
                continue  # present already: Create leaves it as it is
            raise CrdError(f"CustomResourceDefinition {name}: {_reason(exc)}", action="crds") from None
        acted.append(name)
    for name in (str(c["metadata"]["name"]) for c in crds):
        _wait_established(api, name, deadline)
    return acted


def _wait_established(api: client.ApiClient, name: str, deadline: float) -> None:
    while True:
        try:
            crd = rest.get_json(api, rest.path(_API_VERSION, _PLURAL, name=name))
        except ApiException as exc:
            raise CrdError(f"CustomResourceDefinition {name}: {_reason(exc)}", action="crds") from None
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions):
            return
        if time.monotonic() >= deadline:
            raise CrdError(f"CustomResourceDefinition {name} is not Established after the package timeout",
                           action="crds")
        time.sleep(0.2)


def _reason(exc: ApiException) -> str:
    """The API server's message (a Status object's ``message``), else the status code and reason."""
    for text in (exc.body, exc.reason):
        try:
            message = json.loads(text or "").get("message")
        except (ValueError, AttributeError, TypeError):
            continue
        if message:
            return str(message)
    return f"{exc.status} {exc.reason}"
