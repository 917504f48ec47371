"""The one builder of Package documents for the tests and the benchmarks: the object a test creates on the API
server, or the file it writes to a packages folder.

Tests of the loader's handling of text itself (line numbers, flow style, comments, bad YAML) write their text by
hand; every other Package comes from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "helmdeck.dev/v1alpha1"


class _Dumper(yaml.SafeDumper):
    """Safe YAML that also writes a ``str`` subclass (an engine enum such as ``MaintenanceState``) as its text."""


_Dumper.add_multi_representer(str, lambda dumper, value: dumper.represent_str(str.__str__(value)))


def package_doc(name: str, namespace: str | None = None, *, metadata: Mapping[str, Any] | None = None,
                **spec: Any) -> dict[str, Any]:
    """A Package as the API server and a package file hold it: ``{"apiVersion": "helmdeck.dev/v1alpha1",
    "kind": "Package", "metadata": {"name", "namespace", **metadata}, "spec": spec}``.

    ``namespace`` None leaves ``metadata.namespace`` out (a file's namespace then comes from the command line's
    ``-n``); ``metadata`` adds fields such as ``resourceVersion``. ``spec`` holds the fields as the document names
    them (``chartRef=``, ``dependsOn=``, ``valuesFrom=``), written in the order given; ``Path`` values become
    strings (a local chart folder)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata or {})
    body = {key: str(value) if isinstance(value, Path) else value for key, value in spec.items()}
    return {"apiVersion": API_VERSION, "kind": "Package", "metadata": meta, "spec": body}


def package_yaml(name: str, namespace: str | None = None, *, metadata: Mapping[str, Any] | None = None,
                 **spec: Any) -> str:
    """:func:`package_doc` as a YAML document (block style, fields in the order given)."""
    return yaml.dump(package_doc(name, namespace, metadata=metadata, **spec), Dumper=_Dumper, sort_keys=False)


def write_package(folder: Path, name: str, namespace: str | None = None, *, file: str | None = None,
                  metadata: Mapping[str, Any] | None = None, **spec: Any) -> Path:
    """:func:`package_yaml` written to ``folder/<file>`` (default ``<name>.yaml``; ``folder`` made if missing);
    returns the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file or f"{name}.yaml")
    path.write_text(package_yaml(name, namespace, metadata=metadata, **spec))
    return path
