"""`mlfbuild boards`: the boards mlfbuild can build for."""

from __future__ import annotations

import json
from pathlib import Path

from ..schemas import BOARDS as BOARDS_SCHEMA
from .base import Command


class BoardsCommand(Command):
    name = "boards"
    help = "list the boards mlfbuild can build for"

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--board-file", type=Path, action="append", default=[],
                            help="also load this board file")

    def run(self, args):
        from ..boards import list_boards, load_board_file

        boards = list_boards() + [load_board_file(p) for p in args.board_file]
        if args.json:
            document = {"schema": BOARDS_SCHEMA, "boards": [b.to_json() for b in boards]}
            print(json.dumps(document, indent=2, sort_keys=True))
            return 0
        for board in boards:
            also = f" (also: {', '.join(board.aliases)})" if board.aliases else ""
            print(f"{board.name:<20} {board.kind:<9} {board.description}{also}")
        return 0
