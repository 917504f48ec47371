"""The resolution stage (DESIGN, "Resolution"): package spec -> :class:`ResolvedRelease`.

``engine.resolve.loader`` is the bounded YAML loader every YAML input goes
through; ``engine.resolve.chart`` locates charts; ``engine.resolve.release``
composes values and digests. The names below load lazily so that
:mod:`engine.package` can use the loader without an import cycle.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ResolvedRelease", "resolve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from engine.resolve import release

        return getattr(release, name)
    raise AttributeError(name)
