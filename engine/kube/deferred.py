"""The kubernetes package's ``__init__``, run when something asks for what only it defines.

``kubernetes/__init__.py`` imports every part of the package (its generated client, kubeconfig loader,
dynamic client, watch, the websocket stream, utils, leader election, informers), and ``import
kubernetes.<anything>`` runs it first. helmdeck uses the kubeconfig and in-cluster loaders and the REST
transport; the dynamic client (drift detection) is imported when it is used. :func:`defer` registers the
package unrun: ``kubernetes.client``, ``kubernetes.config`` and every other submodule import as usual (the
package's own, unmodified), and the first access to anything else its ``__init__`` defines
(``kubernetes.__version__``) runs it then, so code written for the package as published sees no difference.

Only the top package: its ``__init__`` binds nothing but its subpackages (each to itself) and its version.
(``kubernetes.utils`` binds ``create_from_yaml``, a submodule's name, to a function.)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable

PACKAGE = "kubernetes"


def defer(name: str = PACKAGE) -> None:
    """Register the package ``name`` with its ``__init__`` unrun, unless it is imported already (or not
    installed: the ordinary import then says so)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = _on_first_use(module, spec)  # type: ignore[method-assign]
    sys.modules[name] = module


def _on_first_use(module: types.ModuleType, spec: importlib.machinery.ModuleSpec) -> Callable[[str], object]:
    """The package's ``__getattr__`` (PEP 562: called for names its namespace lacks)."""
    lock = threading.RLock()
    ran = False

    def attribute(name: str) -> object:
        nonlocal ran
        if not name.startswith("__"):  # ``kubernetes.watch``: the submodule, as the __init__ would bind it
            try:
                return importlib.import_module(f"{spec.name}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{spec.name}.{name}":
                    raise
        with lock:
            if not ran:
                ran = True
                assert spec.loader is not None
                spec.loader.exec_module(module)  # the package's own __init__, once
        if name in module.__dict__:
            return module.__dict__[name]
        raise AttributeError(f"module {spec.name!r} has no attribute {name!r}")

    return attribute
