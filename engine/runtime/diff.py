"""What an upgrade would change: a per-object unified diff of two manifests.

Objects are matched by kind, namespace and name (``helm diff`` shows the
same thing); hook objects are left out because Helm stores them apart from
the manifest. With a :class:`~engine.masking.Masker`, secrets are masked
(engine.masking's rule) before the comparison, so a changed secret still
shows as a changed line but its value never does.
"""

from __future__ import annotations

import difflib
import re

import yaml

from engine.masking import Masker

_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


def _objects(manifest: str, masker: Masker | None = None) -> dict[str, str]:
    """Documents by ``Kind/namespace/name`` (``Kind/name`` without a namespace), hooks dropped."""
    out: dict[str, str] = {}
    for text in _SEPARATOR.split(manifest):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        meta = doc.get("metadata") or {}
        if "helm.sh/hook" in (meta.get("annotations") or {}):
            continue
        ns = meta.get("namespace")
        ref = f"{doc['kind']}/{ns}/{meta.get('name')}" if ns else f"{doc['kind']}/{meta.get('name')}"
        if masker is not None:
            text = masker.mask_manifest(text)
        body = "\n".join(ln for ln in text.strip("\n").splitlines() if not ln.startswith("# Source:"))
        out[ref] = body + "\n"
    return out


def manifest_diff(
    deployed: str, desired: str, deployed_label: str = "deployed", masker: Masker | None = None,
) -> str:
    """Unified diff from ``deployed`` to ``desired``, one hunk group per changed object; "" if equal.

    With ``masker`` the secrets in both are masked first.
    """
    old, new = _objects(deployed, masker), _objects(desired, masker)
    chunks: list[str] = []
    for ref in sorted(set(old) | set(new)):
        a, b = old.get(ref, ""), new.get(ref, "")
        if a == b:
            continue
        chunks.extend(difflib.unified_diff(
            a.splitlines(keepends=True), b.splitlines(keepends=True),
            fromfile=f"{ref} ({deployed_label})" if a else "/dev/null",
            tofile=f"{ref} (desired)" if b else "/dev/null",
        ))
    return "".join(chunks)
