"""A package's chart from its repository, pulled and verified before a pass uses it, and Flux's
``SourceVerified`` condition kept on its status (as source-controller sets it on a HelmChart)."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from kubernetes import client

from engine.base.paths import cache_root
from engine.base.wire import SOURCE_VERIFIED, SUCCEEDED, VERIFICATION_ERROR
from engine.helm import Helm
from engine.package.model import PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile.status import EngineStatus
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ReleaseBook
from engine.sources.current import point
from engine.sources.verify import FAILED, Verification, VerifyError, verified_message

if TYPE_CHECKING:
    from engine.sources.source import ChartSource


class ChartLocator:
    """Points each package's chart at the archive its source selects (``helm`` pulls, the cluster's Secrets
    through ``api``; None: no cluster), its valuesFrom objects read first (``values``); keeps what the book
    shows of it (the newer-version marker, ``SourceVerified``)."""

    def __init__(self, book: ReleaseBook, helm: Helm, api: client.ApiClient | None, values: ValuesObjects):
        self._book = book
        self._helm = helm
        self._api = api
        self._values = values

    @functools.cached_property
    def source(self) -> ChartSource:
        """Charts from repositories (engine.sources), with helmdeck's cache and the cluster's Secrets."""
        from engine.sources.credentials import kube_key_reader, kube_secret_reader  # (a command that pulls
        from engine.sources.source import ChartSource  # nothing loads none of it)

        api = self._api
        return ChartSource(self._helm, cache_root(), secrets=kube_secret_reader(api) if api is not None else None,
                           keys=kube_key_reader(api) if api is not None else None)

    async def locate(self, spec: PackageSpec) -> str:
        """Point a remote chart's ``chart_path`` at the archive its source selects now (pulled only when
        new; no request within the repository's interval), and read its valuesFrom objects. Returns the
        archive's OCI digest (:attr:`~engine.sources.source.ChartArtifact.oci_digest`: ``""`` but for a chart from
        an OCIRepository). Raises SourceError."""
        await self._values.fetch(spec)
        if spec.chart_request is None:
            return ""
        try:
            artifact = await self.source.pull(spec.chart_request)
        except VerifyError as exc:  # the artifact is not used: the chart path keeps the last verified one
            self._note_verified(spec, exc.verification or Verification(
                spec.chart_request.verify.provider if spec.chart_request.verify else "", FAILED,
                message=exc.message.removeprefix(f"{exc.repository}: ")))
            raise
        self._note_verified(spec, artifact.verification)
        self._book.set_offered(spec.key, self.source.available(spec.chart_request))  # the row's marker
        if point(spec.chart_path, artifact.path) and spec.key in self._book.packages:
            self._book.log(spec.key, "source", "info", f"chart {artifact.source} (revision {artifact.revision})")
        return artifact.oci_digest

    def _note_verified(self, spec: PackageSpec, verification: Verification) -> None:
        """Keep ``SourceVerified`` (Flux's condition and reasons) on the package's status: True with who signed,
        False with the tool's message, absent when the package asks no verification. Written only when it
        changes (a no-op pass writes nothing)."""
        book = self._book
        key = spec.key
        if key not in book.packages:
            return
        status = book.status(key) or EngineStatus()
        before = cond.get(status.conditions, SOURCE_VERIFIED)
        if spec.chart_request is None or spec.chart_request.verify is None:
            if before is not None:
                book.set_status(key, dataclasses.replace(
                    status, conditions=cond.delete_condition(status.conditions, SOURCE_VERIFIED)))
            return
        ok = verification.verified
        reason = SUCCEEDED if ok else VERIFICATION_ERROR
        message = verified_message(verification)
        if before is not None and (before.status, before.reason, before.message) == (
                "True" if ok else "False", reason, message):
            return
        conds = cond.set_condition(status.conditions, SOURCE_VERIFIED, ok, reason, message)
        book.set_status(key, dataclasses.replace(status, conditions=conds))
        if ok:
            book.log(key, "source", "info", message)
