"""The commands of the `mlfbuild` program: one module each, all of one shape (base.Command).

mlfbuild/cli.py builds the parser from COMMANDS, in this order (the order of `mlfbuild --help`).
Library modules never import from here.
"""

from __future__ import annotations

from .base import Command
from .boards import BoardsCommand
from .build import BuildCommand
from .example import ExampleCommand
from .export import ExportCommand
from .flash import FlashCommand
from .import_ import ImportCommand
from .inspect import InspectCommand
from .matrix import MatrixCommand
from .monitor import MonitorCommand
from .ports import PortsCommand
from .reference import ReferenceCommand
from .run import RunCommand
from .size import SizeCommand

COMMANDS: list[Command] = [ImportCommand(), InspectCommand(), BoardsCommand(), BuildCommand(), RunCommand(), ReferenceCommand(), SizeCommand(),
                           ExportCommand(), FlashCommand(), MonitorCommand(), MatrixCommand(), PortsCommand(),
                           ExampleCommand()]

__all__ = ["COMMANDS", "Command"]
