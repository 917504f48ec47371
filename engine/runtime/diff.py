"""What an upgrade would change: a per-object unified diff of two manifests.

Objects are matched by kind, namespace and name (``helm diff`` shows the
same thing); hook objects are left out because Helm stores them apart from
the manifest. Secret values never appear: each becomes a short digest tag,
so a changed secret still shows as a changed line.
"""

from __future__ import annotations

import difflib
import hashlib
import re

import yaml

_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


def _objects(manifest: str) -> dict[str, str]:
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
        if doc["kind"] == "Secret":
            text = yaml.safe_dump(_mask_secret(doc), sort_keys=False)
        body = "\n".join(ln for ln in text.strip("\n").splitlines() if not ln.startswith("# Source:"))
        out[ref] = body + "\n"
    return out


def _mask_secret(doc: dict[str, object]) -> dict[str, object]:
    out = dict(doc)
    for field in ("data", "stringData"):
        values = doc.get(field)
        if isinstance(values, dict):
            out[field] = {k: f"<secret {hashlib.sha256(str(v).encode()).hexdigest()[:8]}>" for k, v in values.items()}
    return out


def manifest_diff(deployed: str, desired: str, deployed_label: str = "deployed") -> str:
    """Unified diff from ``deployed`` to ``desired``, one hunk group per changed object; "" if equal."""
    old, new = _objects(deployed), _objects(desired)
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
