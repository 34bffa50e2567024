"""`mlfbuild example`: write the bundled example MLF and its reference."""

from __future__ import annotations

from pathlib import Path

from .base import Command


class ExampleCommand(Command):
    name = "example"
    help = "write the bundled example MLF and its reference into DIR, to try every command on"

    def add_arguments(self, parser):
        parser.add_argument("dir", type=Path, nargs="?", default=Path("mlfbuild-example"),
                            help="folder to write tiny_aot.tar and tiny_aot.npz into (default: mlfbuild-example)")

    def run(self, args):
        from ..example import write_example

        mlf, reference = write_example(args.dir)
        print(f"wrote {mlf} and {reference}; try:\n  mlfbuild build {mlf} -o build/example\n"
              f"  mlfbuild run build/example --reference {reference}\n  mlfbuild size build/example")
        return 0
