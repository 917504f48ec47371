"""``spec.driftDetection``: mode and ignore rules (Flux HelmRelease v2), and which paths an object ignores.

::

    driftDetection:
      mode: enabled                     # disabled | warn | enabled
      ignore:
        - paths: ["/spec/replicas"]     # RFC 6901 JSON pointers; "" ignores the whole object
          target: {kind: Deployment}    # optional selector (engine.package.selector)

As Flux's (fluxcd/pkg ``jsondiff``): an object's ignored paths are those of
every rule whose target matches it (a rule without a target matches every
object); they are removed from both the live object and the dry-run result
before comparing, and drift correction leaves them as they are live. An
object whose labels or annotations say ``helm.toolkit.fluxcd.io/driftDetection:
disabled`` (or helmdeck's ``wire.DRIFT_DETECTION``), in the manifest or live, is
not compared at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.base import wire
from engine.base.fields import Fields
from engine.base.pointer import PointerError, tokens
from engine.base.schema import allowed
from engine.package.schema import PACKAGE_SPEC
from engine.package.selector import Selector, parse_selector

# Flux's v2.DriftDetectionMetadataKey, and helmdeck's own; the value is compared without case.
DISABLE_KEYS = (wire.FLUX_DRIFT_DETECTION, wire.DRIFT_DETECTION)
DISABLED = "disabled"


@dataclass(frozen=True)
class IgnoreRule:
    """JSON pointers to leave out of the comparison on the objects ``target`` selects (None: all)."""

    paths: tuple[str, ...]
    target: Selector | None = None


@dataclass(frozen=True)
class DriftDetection:
    """The parsed ``spec.driftDetection``."""

    mode: str = "disabled"
    ignore: tuple[IgnoreRule, ...] = ()


def parse_drift_detection(raw: Any, doc: Fields, modes: tuple[str, ...]) -> DriftDetection:
    """``spec.driftDetection`` of one package file. Raises PackageError naming file, line, field and fix."""
    section = doc.mapping(raw, "spec.driftDetection", allowed(PACKAGE_SPEC, "driftDetection"))
    mode = doc.choice(section.get("mode"), "spec.driftDetection.mode", modes, "disabled")
    rules_raw = doc.sequence(section.get("ignore"), "spec.driftDetection.ignore",
                             "write a list of {paths: [/spec/replicas], target: {kind: Deployment}}")
    rules = []
    for i, item in enumerate(rules_raw):
        path = f"spec.driftDetection.ignore[{i}]"
        entry = doc.mapping(item, path, allowed(PACKAGE_SPEC, "driftDetection.ignore"), required=True,
                            fix="write {paths: [...], target: ...}")
        paths_raw = entry.get("paths")
        if not isinstance(paths_raw, list) or not paths_raw:
            raise doc.error(f"{path}.paths", "must be a non-empty list of JSON pointers",
                            'write e.g. paths: ["/spec/replicas"]')
        paths = []
        for j, pointer in enumerate(paths_raw):
            where = f"{path}.paths[{j}]"
            text = doc.string(pointer, where, fix='write an RFC 6901 pointer such as "/spec/replicas"')
            try:
                tokens(text)
            except PointerError as exc:
                raise doc.error(where, str(exc), 'write an RFC 6901 pointer such as "/spec/replicas" '
                                '("~1" for a "/" inside a key)') from None
            paths.append(text)
        rules.append(IgnoreRule(tuple(paths), parse_selector(entry.get("target"), f"{path}.target", doc)))
    return DriftDetection(mode, tuple(rules))


def detection_disabled(obj: Mapping[str, Any] | None) -> bool:
    """Does ``obj`` opt out of drift detection (label or annotation, Flux's key or helmdeck's)?"""
    meta = (obj or {}).get("metadata") or {}
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if any(str(values.get(key, "")).lower() == DISABLED for key in DISABLE_KEYS):
            return True
    return False


def ignored_paths(rules: Sequence[IgnoreRule], obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The pointers to leave out for ``obj`` (a manifest object with its namespace set): those of every
    rule whose target matches, in rule order, each once."""
    out: dict[str, None] = {}  # ordered and each once, without a scan per path (10,000 rules stay linear)
    for rule in rules:
        if rule.target is None or rule.target.matches(obj):
            out.update(dict.fromkeys(rule.paths))
    return tuple(out)
