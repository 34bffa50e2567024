#!/usr/bin/env bash
# Set up everything (scripts/setup.sh), then do the main job on the bundled example: build the
# example MLF for the default QEMU board, run it in QEMU against its reference output, and report
# where every byte of flash and RAM goes. Output folder: build/example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/mlfbuild build examples/tiny_aot.tar --board mps2-an386 -o build/example
.venv/bin/mlfbuild run build/example --reference examples/tiny_aot.npz --repeat 3
.venv/bin/mlfbuild size build/example
