"""`mlfbuild monitor`: a serial console that shows protocol frames readably."""

from __future__ import annotations

import argparse
import sys

from .base import Command


class MonitorCommand(Command):
    name = "monitor"
    help = "serial console that also shows the firmware's protocol frames readably"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--port", "-p", help="serial port or pyserial URL (default: the one USB serial port)")
        parser.add_argument("--baud", type=int, default=115200, help="baud rate (default 115200)")
        parser.add_argument("--raw", action="store_true", help="do not decode protocol frames")

    def run(self, args: argparse.Namespace) -> int:
        from ..errors import InvalidInputError
        from ..serialport import find_port, open_port
        from ..console.monitor import run_monitor

        port = args.port or find_port()
        # DTR/RTS deasserted: a board wired for `--reset dtr-rts` runs its application.
        ser = open_port(port, baudrate=args.baud, parity="none", timeout=0.1, dtr=False, rts=False,
                        error=InvalidInputError, purpose="the monitor")
        try:
            why = run_monitor(ser, decode_frames=not args.raw)
        finally:
            ser.close()
        if why.startswith("port closed"):
            print(f"mlfbuild: monitor: {port}: {why}", file=sys.stderr)
            return 1
        return 0
