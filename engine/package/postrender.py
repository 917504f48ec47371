"""``spec.postRenderers`` and ``spec.commonMetadata``: the user's post-rendering (Flux HelmRelease v2).

::

    postRenderers:                      # applied in order, each by the real kustomize
      - kustomize:
          patches:                      # strategic merge or JSON 6902 patches, inline
            - patch: |
                - op: add
                  path: /metadata/annotations/team
                  value: web
              target: {group, version, kind, name, namespace, labelSelector, annotationSelector}
          images: [{name, newName, newTag, digest}]
    commonMetadata:                     # set on every object's metadata (not on pod templates)
      labels: {team: web}
      annotations: {owner: ops@example.com}

Bounded: at most :data:`MAX_STEPS` steps, :data:`MAX_PATCHES` patches and
:data:`MAX_IMAGES` images per step (each step is one kustomize run per render).

As Flux's ``BuildPostRenderers``: the kustomize steps run first, then
commonMetadata, then helmdeck's own labels (:data:`STAMPED`: commonMetadata may not name them).
``postRenderStrategy`` (Flux's, helm 4's ``action.PostRenderStrategy``) says which manifests they get: helm 4's
CLI always sends hooks and templates in one stream, and helmdeck's post-renderer splits it as helm's
``separate`` and ``nohooks`` would (:func:`engine.helm.postrender.render`).
:attr:`Rendering.canonical` goes into the spec digest, so any change is a spec
change (an upgrade).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.base import wire
from engine.base.fields import Fields, type_name
from engine.base.label_selector import KEY, LABEL_VALUE
from engine.base.loader import YamlLimitError, package_limits, parse_text
from engine.base.schema import allowed
from engine.package.schema import PACKAGE_SPEC, POST_RENDER_STRATEGIES
from engine.package.selector import Selector, parse_selector

SPEC_FIELDS = ("postRenderers", "commonMetadata", "postRenderStrategy")  # the spec fields this module reads
# The labels helmdeck stamps on every rendered object (engine.resolve.release): commonMetadata may not set them.
STAMPED = frozenset({wire.ORIGIN_NAME, wire.ORIGIN_NAMESPACE, wire.RESOURCE_MAINTENANCE,
                     wire.FLUX_ORIGIN_NAME, wire.FLUX_ORIGIN_NAMESPACE})
MAX_STEPS = 10  # kustomize runs per render: each is a process over the whole manifest
MAX_PATCHES = 100  # per step
MAX_IMAGES = 100  # per step


@dataclass(frozen=True)
class Patch:
    """One kustomize patch: ``patch`` (YAML text) and the objects it applies to (None: named in the patch)."""

    patch: str
    target: Selector | None = None


@dataclass(frozen=True)
class Image:
    """kustomize's image override: ``name`` is the image to change, the rest what it becomes."""

    name: str
    new_name: str = ""
    new_tag: str = ""
    digest: str = ""


@dataclass(frozen=True)
class Kustomize:
    """One ``postRenderers[].kustomize`` step."""

    patches: tuple[Patch, ...] = ()
    images: tuple[Image, ...] = ()

    def document(self) -> dict[str, Any]:
        """This step as the fields of a kustomization.yaml (kustomize's own names, set fields only)."""
        out: dict[str, Any] = {}
        if self.patches:
            out["patches"] = [{"patch": p.patch, **({"target": p.target.document()} if p.target else {})}
                              for p in self.patches]
        if self.images:
            out["images"] = [{k: v for k, v in (("name", i.name), ("newName", i.new_name), ("newTag", i.new_tag),
                                                ("digest", i.digest)) if v} for i in self.images]
        return out


@dataclass(frozen=True)
class Rendering:
    """The user's post-rendering: kustomize steps in order, then commonMetadata (``(key, value)`` pairs), and
    which manifests they (and helmdeck's labels) are given: ``strategy``, Flux's ``postRenderStrategy``
    (``combined``, ``separate``, ``nohooks``; "" helm's default: combined on helm 4, helm 3 never sends hooks)."""

    steps: tuple[Kustomize, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    strategy: str = ""

    @property
    def empty(self) -> bool:
        return not (self.steps or self.labels or self.annotations or self.strategy)

    @property
    def sends_hooks(self) -> bool:
        """Does the strategy ask for hooks to be post-rendered (``combined`` or ``separate``, named): what helm 3,
        which never sends them, cannot do."""
        return self.strategy in ("combined", "separate")

    def document(self) -> dict[str, Any]:
        """As the package file says it (Flux's shape), empty parts left out; the post-renderer's config."""
        out: dict[str, Any] = {}
        if self.steps:
            out["postRenderers"] = [{"kustomize": s.document()} for s in self.steps]
        common = {k: dict(v) for k, v in (("labels", self.labels), ("annotations", self.annotations)) if v}
        if common:
            out["commonMetadata"] = common
        if self.strategy:
            out["postRenderStrategy"] = self.strategy
        return out

    @property
    def canonical(self) -> str:
        """Canonical JSON of :meth:`document` (``""`` when empty): the spec digest's input."""
        return json.dumps(self.document(), sort_keys=True, separators=(",", ":")) if not self.empty else ""

    @property
    def digest(self) -> str:
        """32 hex characters of :attr:`canonical` (``""`` when empty): the release label
        ``wire.POST_RENDER_DIGEST``."""
        return wire.label_digest(self.canonical.encode()) if not self.empty else ""


def parse_rendering(spec: dict[str, Any], doc: Fields) -> Rendering:
    """``spec.postRenderers`` and ``spec.commonMetadata`` of one package file. Raises PackageError
    naming file, line, field and fix."""
    raw = doc.sequence(spec.get("postRenderers"), "spec.postRenderers",
                       "write a list of {kustomize: {patches, images}}")
    if len(raw) > MAX_STEPS:
        raise doc.error("spec.postRenderers", f"has {len(raw)} steps, over the limit of {MAX_STEPS}",
                        "merge them: one kustomize step takes many patches and images, applied in order")
    steps = []
    for i, item in enumerate(raw):
        path = f"spec.postRenderers[{i}]"
        entry = doc.mapping(item, path, allowed(PACKAGE_SPEC, "postRenderers"), required=True,
                            fix="write {kustomize: {patches, images}}")
        steps.append(_kustomize(entry.get("kustomize"), f"{path}.kustomize", doc))
    common = doc.mapping(spec.get("commonMetadata"), "spec.commonMetadata", allowed(PACKAGE_SPEC, "commonMetadata"))
    return Rendering(tuple(steps), _metadata(common.get("labels"), "spec.commonMetadata.labels", doc, True),
                     _metadata(common.get("annotations"), "spec.commonMetadata.annotations", doc, False),
                     doc.choice(spec.get("postRenderStrategy"), "spec.postRenderStrategy", POST_RENDER_STRATEGIES, ""))


def _list(raw: Any, path: str, doc: Fields, shape: str) -> list[Any]:
    return doc.sequence(raw, path, f"write a list of {shape}")


def _kustomize(raw: Any, path: str, doc: Fields) -> Kustomize:
    section = doc.mapping(raw, path, allowed(PACKAGE_SPEC, "postRenderers.kustomize"), required=True,
                          fix="write {patches: [...], images: [...]} (Flux v2 has no patchesStrategicMerge)")
    patches = []
    raw_patches = _list(section.get("patches"), f"{path}.patches", doc, "{patch, target}")
    raw_images = _list(section.get("images"), f"{path}.images", doc, "{name, newName, newTag, digest}")
    for field, items, limit in (("patches", raw_patches, MAX_PATCHES), ("images", raw_images, MAX_IMAGES)):
        if len(items) > limit:
            raise doc.error(f"{path}.{field}", f"has {len(items)} {field}, over the limit of {limit} per step",
                            f"combine {field} for the same objects, or spread them over more steps")
    for i, item in enumerate(raw_patches):
        where = f"{path}.patches[{i}]"
        entry = doc.mapping(item, where, allowed(PACKAGE_SPEC, "postRenderers.kustomize.patches"),
                            required=True, fix="write {patch: ..., target: ...}")
        text = doc.string(entry.get("patch"), f"{where}.patch", required=True,
                          fix="write a strategic merge patch or a JSON 6902 patch as a YAML string")
        target = parse_selector(entry.get("target"), f"{where}.target", doc)
        _check_patch(text, target, f"{where}.patch", doc)
        patches.append(Patch(text, target))
    images = []
    for i, item in enumerate(raw_images):
        where = f"{path}.images[{i}]"
        entry = doc.mapping(item, where, allowed(PACKAGE_SPEC, "postRenderers.kustomize.images"), required=True)
        name = doc.string(entry.get("name"), f"{where}.name", required=True,
                          fix="name the image to replace, as the chart writes it (e.g. busybox)")
        new = [doc.string(entry.get(f), f"{where}.{f}") for f in ("newName", "newTag", "digest")]
        for field, text in zip(("name", "newName", "newTag", "digest"), (name, *new), strict=True):
            if any(c.isspace() or not c.isprintable() for c in text):
                raise doc.error(f"{where}.{field}", f"{text!r} holds a space or control character",
                                "write an image reference such as registry.example.com/web, 1.27 or sha256:<hex>")
        if not any(new):
            raise doc.error(where, "changes nothing", "set newName, newTag or digest")
        images.append(Image(name, *new))
    return Kustomize(tuple(patches), tuple(images))


def _check_patch(text: str, target: Selector | None, path: str, doc: Fields) -> None:
    """A patch must be YAML: a mapping (strategic merge) or a list of operations (JSON 6902, needs a target)."""
    try:  # bounded, as the file around it: a deep or alias-bombed patch is refused, never a crash
        body = parse_text(text, doc.file, package_limits()).data
    except YamlLimitError as exc:
        raise doc.error(path, f"is not YAML ({exc.problem})", exc.fix or "fix the patch text") from None
    if isinstance(body, list):
        if target is None:
            raise doc.error(path, "is a JSON 6902 patch without a target",
                            "add target: {kind, name} naming the objects to patch")
        for j, op in enumerate(body):
            if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
                raise doc.error(path, f"operation {j} needs op and path",
                                "write e.g. - {op: replace, path: /spec/replicas, value: 2}")
    elif isinstance(body, dict):
        meta = body.get("metadata")
        named = isinstance(meta, dict) and meta.get("name")
        if target is None and not (body.get("kind") and named):
            raise doc.error(path, "a strategic merge patch without a target must name its object",
                            "give kind and metadata.name in the patch, or a target")
    else:
        raise doc.error(path, f"must hold a mapping or a list, not {type_name(body)}",
                        "write a strategic merge patch (a mapping) or a JSON 6902 patch (a list)")


def _metadata(raw: Any, path: str, doc: Fields, labels: bool) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise doc.error(path, f"must be a mapping, not {type_name(raw)}", "write key: value pairs")
    out = []
    for key, value in raw.items():
        where = f"{path}.{key}"
        if not isinstance(key, str) or not KEY.match(key):
            raise doc.error(where, f"{key!r} is not a Kubernetes {'label' if labels else 'annotation'} key",
                            "use [prefix/]name: a DNS subdomain prefix and at most 63 letters, digits, '-', '_', '.'")
        if not isinstance(value, str):
            raise doc.error(where, f"must be a string, not {type_name(value)}", "quote the value")
        if labels and key in STAMPED:
            raise doc.error(where, f"{key} is helmdeck's own label (stamped on every object, over any value)",
                            "remove it, or use a label key of your own")
        if labels and not LABEL_VALUE.match(value):
            raise doc.error(where, f"{value!r} is not a label value",
                            "use at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric")
        out.append((key, value))
    return tuple(sorted(out))
