"""``helmdeck diff PACKAGE``: what an upgrade of one package would change, deployed against desired (secrets
masked); exit codes as terraform plan -detailed-exitcode."""

from __future__ import annotations

import argparse

from helmdeck import builder, one_package
from helmdeck.parser import DIFF_CODES, Subcommands

HELP = "print what an upgrade of PACKAGE would change (deployed vs desired)"


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("diff", parents=[common], help=HELP, description=f"{HELP} (secrets masked). {DIFF_CODES}")
    one_package.add_arguments(p)
    p.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    return one_package.run(args, "diff")
