"""How long a size report takes (not a test: run it by hand, numbers go to stdout).

    .venv/bin/python benchmarks/size_report.py                 # synthetic ~1 MiB Cortex-M ELF
    .venv/bin/python benchmarks/size_report.py BUILD_DIR ...   # also real mlfbuild build folders

The synthetic firmware is generated C (thousands of functions, ~900 KiB of const tables, string
literals, .data and .bss) compiled with arm-none-eabi-gcc -g and linked with a two-region linker
script, plus a build.json-like record that claims it is one MLF module, so every stage of the report
runs on it: ELF and DWARF reading, attribution with the literal-reference scan, module join, and
all output forms.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mlfbuild.size import diff, size_report  # noqa: E402
from mlfbuild.size.attribution import Classifier, ModelFacts, attribute  # noqa: E402
from mlfbuild.size.elf import load_elf  # noqa: E402
from mlfbuild.size.report import board_regions  # noqa: E402

FUNCTIONS = 3000
TABLES = 220
TABLE_BYTES = 4096
RUNS = 7

LINKER = """
MEMORY { FLASH (rx) : ORIGIN = 0x0, LENGTH = 4M  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
ENTRY(Reset_Handler)
SECTIONS {
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text .text.*) } > FLASH
  .rodata : { *(.rodata .rodata.*) } > FLASH
  .data : { *(.data .data.*) } > RAM AT> FLASH
  .bss (NOLOAD) : { *(.bss .bss.* COMMON) } > RAM
  .stack (NOLOAD) : { . = ALIGN(8); . = . + 0x2000; } > RAM
}
"""


def synthetic_sources(folder: Path) -> list[Path]:
    model = folder / "model" / "codegen" / "host" / "src"
    model.mkdir(parents=True)
    src = folder / "src"
    src.mkdir()
    lines = ["#include <stdint.h>"]
    for t in range(TABLES):
        values = ",".join(str((t * 31 + i * 7) % 251 - 125) for i in range(TABLE_BYTES))
        lines.append(f"static const int8_t fused_constant_{t}[{TABLE_BYTES}] __attribute__((aligned(16))) = {{{values}}};")
    for f in range(FUNCTIONS):
        table = f % TABLES
        lines.append(f"int32_t tvmgen_big_fused_op_{f}(int8_t* out, int32_t n) {{ int32_t acc = {f};"
                     f" for (int32_t i = 0; i < n; ++i) {{ acc += fused_constant_{table}[(i * {f % 13 + 1}) & {TABLE_BYTES - 1}]"
                     f" * out[i]; out[i] = (int8_t)(acc >> {f % 7 + 1}); }} return acc; }}")
    (model / "big_lib1.c").write_text("\n".join(lines) + "\n")
    calls = "\n".join(f"  acc += tvmgen_big_fused_op_{f}(buf, (int32_t)sizeof buf);" for f in range(FUNCTIONS))
    decls = "\n".join(f"int32_t tvmgen_big_fused_op_{f}(int8_t*, int32_t);" for f in range(FUNCTIONS))
    (src / "main.c").write_text(f"""#include <stdint.h>
{decls}
static int8_t buf[4096];
volatile int32_t sink = 7;
const char* const messages[] = {{"m-ready", "m-results-[", "m-lap-us-"}};
void Reset_Handler(void) {{
  int32_t acc = sink;
{calls}
  sink = acc + (int32_t)(uintptr_t)messages[acc & 1];
  for (;;) {{}}
}}
__attribute__((used, section(".isr_vector"))) const void* const vectors[2] = {{(void*)0x20400000, (void*)Reset_Handler}};
""")
    return [model / "big_lib1.c", src / "main.c"]


def synthetic_record() -> dict:
    return {
        "board": {"name": "synthetic-m4", "memory": {"flash": {"origin": 0, "length": 4 << 20},
                                                     "ram": {"origin": 0x20000000, "length": 4 << 20},
                                                     "stack_bytes": 0x2000, "heap_bytes": 0}},
        "toolchain": "arm-none-eabi-gcc", "mlf": {"name": "synthetic.tar", "sha256": "0" * 64},
        "models": [{"name": "big", "workspace_bytes": 0, "inputs": [], "outputs": []}],
        "library": {"modules": [{"name": "big", "executor": "aot", "usmp": False, "inputs": [], "outputs": [],
                                 "memory": {"main": [{"device": 1, "workspace_size_bytes": 0,
                                                      "constants_size_bytes": TABLES * TABLE_BYTES,
                                                      "io_size_bytes": 0}],
                                            "operator_functions": [{"function_name": f"tvmgen_big_fused_op_{f}",
                                                                    "workspace_size_bytes": 0}
                                                                   for f in range(FUNCTIONS)]}}]},
    }


def build_synthetic(folder: Path) -> tuple[Path, dict]:
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        raise SystemExit("arm-none-eabi-gcc not found: the synthetic benchmark needs it")
    sources = synthetic_sources(folder)
    (folder / "linker.ld").write_text(LINKER)
    elf = folder / "firmware.elf"
    subprocess.run([cc, "-mcpu=cortex-m4", "-mthumb", "-Os", "-g", "-ffunction-sections", "-fdata-sections",
                    f"-ffile-prefix-map={folder}=.", "-nostdlib", "-T", str(folder / "linker.ld"),
                    "-Wl,--gc-sections", "-o", str(elf), *[str(s.relative_to(folder)) for s in sources]],
                   cwd=folder, check=True)
    record = synthetic_record()
    (folder / "build.json").write_text(json.dumps(record))
    return elf, record


def timed(fn, runs: int = RUNS) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench(label: str, elf: Path, record: dict) -> None:
    regions = board_regions(record)

    def load():
        image = load_elf(elf, regions)
        image.close()
        return image

    def load_and_attribute():
        image = load_elf(elf, regions)
        try:
            return attribute(image, Classifier(ModelFacts.from_record(record)))
        finally:
            image.close()

    t_load, _ = timed(load)
    t_attr, _ = timed(load_and_attribute)
    t_report, report = timed(lambda: size_report(elf, record))
    t_forms, _ = timed(lambda: (report.format_text(), report.format_markdown(), report.format_html(),
                                report.to_json_text()))
    snapshot = report.to_json()
    t_diff, _ = timed(lambda: diff(snapshot, snapshot))
    size = elf.stat().st_size
    symbols = len(report.items)
    print(f"{label}: ELF {size / 1048576:.2f} MiB, flash {report.flash.used:,} B, RAM {report.ram.used:,} B, "
          f"{symbols} owners")
    print(f"  load ELF + DWARF       {1000 * t_load:8.1f} ms")
    print(f"  + attribute all bytes  {1000 * t_attr:8.1f} ms")
    print(f"  size_report() total    {1000 * t_report:8.1f} ms")
    print(f"  text+md+html+json      {1000 * t_forms:8.1f} ms")
    print(f"  diff (self)            {1000 * t_diff:8.1f} ms")
    assert sum(report.flash.by_category.values()) == report.flash.used
    assert sum(report.ram.by_category.values()) == report.ram.used


def main(argv: list[str]) -> int:
    print(f"median of {RUNS} runs, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="mlfbuild-size-bench-") as work:
        elf, record = build_synthetic(Path(work))
        bench("synthetic", elf, record)
    for folder in argv:
        path = Path(folder)
        bench(str(path), path / "firmware.elf", json.loads((path / "build.json").read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
