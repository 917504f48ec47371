"""The cycle collector paused while a command starts (``main`` pauses it; :func:`imported` and
:func:`started` mark the steps after)."""

from __future__ import annotations

import gc

_paused = False  # pause() paused the cycle collector for start-up


def pause() -> None:
    """Start-up makes ~700 modules' worth of objects and no garbage; the cycle collector's full passes over
    them were ~100 ms of a headless command's CPU. Paused until :func:`started` (only when the collector was
    on: a test calling ``main`` keeps its own)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def imported() -> None:
    """The command's modules are imported: kept out of the cycle collector's passes from now on
    (``gc.freeze``, as long-running Python services do after start). Not the engine: an engine the app
    leaves on a context switch is collected."""
    if _paused and not gc.isenabled():
        gc.freeze()


def started() -> None:
    """Start-up is over: the cycle collector runs again (when :func:`pause` paused it)."""
    global _paused
    if _paused:
        imported()
        _paused = False
        gc.enable()
