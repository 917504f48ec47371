"""``helmdeck render PACKAGE``: the manifests an upgrade of one package would apply (secrets masked)."""

from __future__ import annotations

import argparse

from helmdeck import builder, one_package
from helmdeck.parser import Subcommands

HELP = "print the manifests an upgrade of PACKAGE would apply"


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("render", parents=[common], help=HELP, description=f"{HELP} (secrets masked). ")
    one_package.add_arguments(p)
    p.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    return one_package.run(args, "render")
