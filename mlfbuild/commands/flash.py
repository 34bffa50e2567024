"""`mlfbuild flash`: write a build's firmware to a board."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .base import Command


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (examples: 0x08000000, 134217728)") from None


class FlashCommand(Command):
    name = "flash"
    help = "write a build's firmware to a board: serial bootloader, UF2 drive, MCUboot or debug probe"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from ..flash_methods import FLASHERS
        from ..flash.reset import RESETS

        parser.add_argument("target", type=Path, help="build folder (from `mlfbuild build`)")
        parser.add_argument("--method", "-m", choices=sorted(FLASHERS),
                            help="flashing method (default: the board's flashing.method; others need the board's "
                                 "data for them: uf2_family, pyocd_target, openocd_config, [flashing.mcuboot])")
        parser.add_argument("--drive", help="uf2: the bootloader's mounted drive (default: the one with INFO_UF2.TXT)")
        parser.add_argument("--probe", help="pyocd/openocd: the debug probe's serial number (default: the one connected)")
        parser.add_argument("--port", "-p", help="serial port or pyserial URL (default: the one USB serial port)")
        parser.add_argument("--baud", type=int, help="baud rate (default: the board's flashing.baud)")
        parser.add_argument("--parity", choices=["even", "none"], default="even",
                            help="even (the bootloader's 8E1, default) or none for PTYs and bridges that "
                                 "cannot carry parity (like stm32flash -m 8n1)")
        parser.add_argument("--no-verify", action="store_true", help="do not read the image back (not advised)")
        parser.add_argument("--reset", choices=list(RESETS),
                            help="how to enter the bootloader: dtr-rts (DTR->BOOT0, RTS->NRST), manual (you "
                                 "press the buttons) or none (already in it); default: the board's")
        parser.add_argument("--address", type=_int, help="where the image goes (default: the board's flashing.address)")
        parser.add_argument("--erase", choices=["sectors", "all"], default="sectors",
                            help="erase only the sectors the image covers (default) or the whole flash")
        parser.add_argument("--no-start", action="store_true",
                            help="leave the chip in its bootloader instead of starting the application")
        parser.add_argument("--ignore-chip-id", action="store_true",
                            help="flash even when the chip's id is not the board's (warns instead)")

    def run(self, args: argparse.Namespace) -> int:
        from ..flash import FlashOptions, Progress, flash, load_job
        from ..flash_methods import uses_port
        from ..serialport import find_port

        job = load_job(args.target, address=args.address)
        method = args.method or job.flashing.method
        _refuse_unused_link_options(args, method, job)
        job.check()                                  # refuse before looking for or opening a port
        for warning in job.warnings:
            print(f"mlfbuild: warning: {warning}", file=sys.stderr)
        needs_port = uses_port(method)
        port = (args.port or find_port()) if needs_port else ""
        options = FlashOptions(port=port, baud=args.baud or job.flashing.baud, parity=args.parity,
                               verify=not args.no_verify, reset=args.reset or job.flashing.reset,
                               erase=args.erase, start=not args.no_start, ignore_chip_id=args.ignore_chip_id,
                               drive=args.drive, probe=args.probe)
        mode = "8E1" if options.parity == "even" else "8N1"
        via = (f"via {port} ({method}, {options.baud} baud {mode}, reset {options.reset})" if needs_port
               else f"({method})")
        print(f"flashing {job.source} ({len(job.image)} bytes) to {job.board} at 0x{job.address:08X} {via}",
              file=sys.stderr, flush=True)
        result = flash(job, options, Progress(), method=method)
        state = getattr(result, "verification", None) or ("verified" if result.verified
                                                          else "NOT verified (--no-verify)")
        started = ", application started" if result.started else ""
        print(f"flashed {result.size} bytes to {job.board} at 0x{result.address:08X}: {state}{started}")
        return 0


def _refuse_unused_link_options(args: argparse.Namespace, method: str, job) -> None:
    """--port, --probe and --drive each choose one kind of link: given to a method that uses another,
    it would be ignored without a word, so it is refused before anything runs."""
    from ..errors import UsageError
    from ..flash_methods import link_option_problem

    for option in ("port", "probe", "drive"):
        problem = getattr(args, option) and link_option_problem(option, method, job.flashing,
                                                               job.board or "the board")
        if problem:
            raise UsageError(problem)
