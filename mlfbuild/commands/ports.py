"""`mlfbuild ports`: serial ports with their USB ids and what mlfbuild knows of them."""

from __future__ import annotations

import json

from ..ports import format_ports, list_ports
from ..schemas import PORTS as PORTS_SCHEMA
from .base import Command


class PortsCommand(Command):
    name = "ports"
    help = "list serial ports with their USB ids, marking known bootloaders, boards and debug probes"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="print the list as JSON")

    def run(self, args) -> int:
        ports = list_ports()
        document = {"schema": PORTS_SCHEMA, "ports": [p.to_json() for p in ports]}
        print(json.dumps(document, indent=2) if args.json else format_ports(ports))
        return 0
