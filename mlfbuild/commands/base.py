"""The shape every command has: a name, a one-line help, its arguments and a run that returns an exit code.

Library errors (mlfbuild.errors.MlfError) pass through `run` untouched: mlfbuild/cli.py maps them to
exit codes in one place."""

from __future__ import annotations

import argparse


class Command:
    name = ""
    help = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError
