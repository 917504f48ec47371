"""The subcommands, one module each: ``add(sub, common)`` adds its parser and arguments (``common``: the
shared flags, :func:`helmdeck.parser.common_flags`) with ``run`` as its default, and ``run(args)`` runs it
and returns the exit code. :data:`COMMANDS` is their order in ``helmdeck --help``. No command imports another
(an import-linter contract): what two share lives in ``helmdeck/`` beside this package."""

from __future__ import annotations

from types import ModuleType

from helmdeck.commands import (
    cleanup,
    cluster,
    controller,
    demo,
    diff,
    export,
    plan,
    reconcile,
    render,
    status,
    versions,
)

COMMANDS: tuple[ModuleType, ...] = (demo, cluster, reconcile, controller, status, render, diff, versions, plan,
                                    export, cleanup)
