"""The ``helmdeck`` command line: the parser of every command and ``main``.

``helmdeck`` opens the app on a cluster chosen as kubectl does (:mod:`helmdeck.app`); each command is a
module of :mod:`helmdeck.commands` that adds its arguments and runs itself: ``demo`` opens the app on the
local control plane with the example packages, ``cluster ...`` manages that control plane, ``controller``
runs in the cluster, ``export`` prints a folder as objects; ``reconcile``, ``status``, ``plan``, ``render``,
``diff``, ``versions`` and ``cleanup`` run headless.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from helmdeck import app, startup
from helmdeck.commands import COMMANDS
from helmdeck.console import EXIT_PIPE, quiet_stdout
from helmdeck.parser import (
    EXIT_CHANGES,
    EXIT_CONVERGED,
    EXIT_FAILED,
    EXIT_NO_CHANGES,
    EXIT_STALLED,
    EXIT_USAGE,
    HelmdeckParser,
    Version,
    common_flags,
    example_packages,
)

__all__ = ["EXIT_CHANGES", "EXIT_CONVERGED", "EXIT_FAILED", "EXIT_NO_CHANGES", "EXIT_PIPE", "EXIT_STALLED",
           "EXIT_USAGE", "build_parser", "example_packages", "main"]


def build_parser() -> HelmdeckParser:
    """The top level (the shared flags, the app's, ``--version``), then each command of :data:`COMMANDS`."""
    common = common_flags()
    parser = HelmdeckParser(
        prog="helmdeck", parents=[common_flags()],
        description="Operate Helm releases from the terminal: the app without a command, headless with one.")
    parser.add_argument("--version", action=Version, nargs=0,
                        help="print helmdeck's version and the helm binary it would run, then exit")
    app.add_flags(parser)
    parser.set_defaults(run=app.run)
    # Plain parsers: HelmdeckParser's rule is the top level's alone.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    for command in COMMANDS:
        command.add(sub, common)
    parser.share_defaults()
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # this process's own command line (tests call main with theirs)
        startup.pause()  # the collector runs again once the engine is built (startup.started)
    parsed = argparse.Namespace()
    try:
        args = build_parser().parse_args(argv, parsed)
        code: int = args.run(args)
        return code
    except BrokenPipeError:
        quiet_stdout()
        return EXIT_PIPE
    except SystemExit as exc:  # argparse and the usage checks
        code = exc.code if isinstance(exc.code, int) else EXIT_FAILED
        # diff's exit codes gate CI (terraform plan -detailed-exitcode): 2 means "changes" only, so its usage
        # errors are errors (1). The subcommand is set before its own arguments are parsed.
        return EXIT_FAILED if getattr(parsed, "command", None) in ("diff", "plan") and code == EXIT_USAGE else code
