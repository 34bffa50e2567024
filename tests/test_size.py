"""Size report on hand-made ELF images: no toolchain, no QEMU, milliseconds per test.

The image below is written byte by byte (ELF32, ARM, no DWARF), so every expected number is known:
attribution by names and STT_FILE, gaps (padding, zero-size assembly functions, anonymous literals
found through a literal pool), the stack reserve, the data load image, budgets, diffs and forms.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import struct
from pathlib import Path

import pytest

from mlfbuild.errors import EXIT_OVER_BUDGET, InvalidInputError, OverBudgetError
from mlfbuild import record as build_folder
from mlfbuild.cliargs import parse_size
from mlfbuild.commands.size import SizeCommand
from mlfbuild.size import diff, load_snapshot, size_report
from mlfbuild.size.attribution import Classifier, ModelFacts
from mlfbuild.size.elf import Section, Symbol, normalise_path
from mlfbuild.size.html import squarify

FLASH, RAM = 0x0, 0x20000000
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS = 1, 2, 3, 8
A, W, X = 0x2, 0x1, 0x4


def _strtab(names: list[str]) -> tuple[bytes, dict[str, int]]:
    blob, offsets = b"\0", {"": 0}
    for name in names:
        if name not in offsets:
            offsets[name] = len(blob)
            blob += name.encode() + b"\0"
    return blob, offsets


def write_elf(path: Path, sections: list[dict], symbols: list[dict], data_lma: int) -> Path:
    """A minimal ARM executable. sections: {name, type, flags, addr, data|size}; symbols: {name,
    value, size, type (0 notype, 1 object, 2 func, 4 file), bind (0 local, 1 global), section name}."""
    names = [s["name"] for s in sections] + [".symtab", ".strtab", ".shstrtab"]
    shstr, shoff_names = _strtab(names)
    locals_ = [s for s in symbols if s.get("bind", 1) == 0]
    globals_ = [s for s in symbols if s.get("bind", 1) != 0]
    ordered = locals_ + globals_
    strtab, str_off = _strtab([s["name"] for s in ordered])
    index_of = {s["name"]: i + 1 for i, s in enumerate(sections)}
    symtab = bytes(16)
    for s in ordered:
        shndx = 0xFFF1 if s.get("type") == 4 else index_of[s["section"]]
        info = (s.get("bind", 1) << 4) | s.get("type", 1)
        symtab += struct.pack("<IIIBBH", str_off[s["name"]], s.get("value", 0), s.get("size", 0), info, 0, shndx)
    phnum = 2
    offset = 52 + 32 * phnum
    blobs, headers = [], [bytes(40)]
    file_offsets = {}
    for s in sections:
        payload = s.get("data", b"") if s["type"] != SHT_NOBITS else b""
        size = len(payload) if s["type"] != SHT_NOBITS else s["size"]
        file_offsets[s["name"]] = offset
        headers.append(struct.pack("<IIIIIIIIII", shoff_names[s["name"]], s["type"], s["flags"], s["addr"], offset,
                                   size, 0, 0, 4, 0))
        blobs.append(payload)
        offset += len(payload)
    symtab_index = len(sections) + 1
    for name, kind, payload, link, info, entsize in ((".symtab", SHT_SYMTAB, symtab, symtab_index + 1, len(locals_) + 1, 16),
                                                     (".strtab", SHT_STRTAB, strtab, 0, 0, 0),
                                                     (".shstrtab", SHT_STRTAB, shstr, 0, 0, 0)):
        headers.append(struct.pack("<IIIIIIIIII", shoff_names[name], kind, 0, 0, offset, len(payload), link, info, 1, entsize))
        blobs.append(payload)
        offset += len(payload)
    shoff = offset
    flash_sections = [s for s in sections if s["addr"] < RAM]
    flash_end = max(s["addr"] + len(s.get("data", b"")) for s in flash_sections)
    data = next(s for s in sections if s["name"] == ".data")
    phdrs = struct.pack("<IIIIIIII", 1, file_offsets[flash_sections[0]["name"]], FLASH, FLASH, flash_end, flash_end, 5, 4)
    phdrs += struct.pack("<IIIIIIII", 1, file_offsets[".data"], RAM, data_lma, len(data["data"]), len(data["data"]), 6, 4)
    header = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIIIIIHHHHHH", 2, 40, 1, 1, 52, shoff, 0x05000400, 52, 32, phnum, 40,
                          len(headers), len(headers) - 1)
    path.write_bytes(header + phdrs + b"".join(blobs) + b"".join(headers))
    return path


def make_firmware(folder: Path, *, workspace: int = 0x100, writable_rodata: bool = False) -> tuple[Path, dict]:
    """Flash: .text 0x100 + .rodata 0x100 + .data load image 0x10. RAM: .data 0x10, .bss, .stack 0x400."""
    text = bytearray(0x100)
    text[0xC0:0xF4] = b"\x01\x02" * 26  # the body of a zero-size assembly function, then 12 B of zero fill
    text[0x90:0x94] = struct.pack("<I", 0x1A0)  # main's literal pool: the address of "hello"
    rodata = bytearray(0x100)
    rodata[0x00:0x80] = b"\x11" * 0x80
    rodata[0xA0:0xB0] = b"hello\0world\0\0\0\0\0"
    bss_size = 0x10 + workspace + 0x20 + 0x10
    sections = [
        {"name": ".text", "type": SHT_PROGBITS, "flags": A | X, "addr": 0x0, "data": bytes(text)},
        {"name": ".rodata", "type": SHT_PROGBITS, "flags": A | (W if writable_rodata else 0), "addr": 0x100,
         "data": bytes(rodata)},
        {"name": ".data", "type": SHT_PROGBITS, "flags": A | W, "addr": RAM, "data": bytes(0x10)},
        {"name": ".bss", "type": SHT_NOBITS, "flags": A | W, "addr": RAM + 0x10, "size": bss_size},
        {"name": ".stack", "type": SHT_NOBITS, "flags": A | W, "addr": RAM + 0x800, "size": 0x400},
    ]
    ws_at = RAM + 0x20
    symbols = [
        {"name": "startup_cortexm.c", "type": 4, "bind": 0},
        {"name": "Reset_Handler", "value": 0x1, "size": 0x20, "type": 2, "bind": 0, "section": ".text"},
        {"name": "kws_lib0.c", "type": 4, "bind": 0},
        {"name": "global_const_workspace", "value": 0x100, "size": 0x80, "type": 1, "bind": 0, "section": ".rodata"},
        {"name": "global_workspace", "value": ws_at, "size": workspace, "type": 1, "bind": 0, "section": ".bss"},
        {"name": "backend.c", "type": 4, "bind": 0},
        {"name": "s_ws", "value": ws_at + workspace + 0x20, "size": 0x10, "type": 1, "bind": 0, "section": ".bss"},
        {"name": "main.c", "type": 4, "bind": 0},
        {"name": "$t", "value": 0x70, "size": 0, "type": 0, "bind": 0, "section": ".text"},
        {"name": "tvmgen_kws_fused_add", "value": 0x21, "size": 0x40, "type": 2, "section": ".text"},
        {"name": "tvmgen_kws_run", "value": 0x61, "size": 0x10, "type": 2, "section": ".text"},
        {"name": "main", "value": 0x71, "size": 0x30, "type": 2, "bind": 0, "section": ".text"},
        {"name": "memcpy", "value": 0xA1, "size": 0x20, "type": 2, "section": ".text"},
        {"name": "__aeabi_uldivmod", "value": 0xC1, "size": 0, "type": 2, "section": ".text"},
        {"name": "mlf_kws_inputs", "value": 0x180, "size": 0x14, "type": 1, "section": ".rodata"},
        {"name": "counter", "value": RAM, "size": 4, "type": 1, "bind": 0, "section": ".data"},
        {"name": "impure_data", "value": RAM + 4, "size": 8, "type": 1, "section": ".data"},
        {"name": "mlf_kws_input0_data", "value": ws_at + workspace, "size": 0x20, "type": 1, "section": ".bss"},
        {"name": "_sbss", "value": RAM + 0x10, "size": 0, "type": 0, "section": ".bss"},
    ]
    elf = write_elf(folder / "firmware.elf", sections, symbols, data_lma=0x200)
    record = {
        "board": {"name": "tiny-m4", "memory": {"flash": {"origin": FLASH, "length": 0x10000},
                                                "ram": {"origin": RAM, "length": 0x1000},
                                                "stack_bytes": 0x400, "heap_bytes": 0}},
        "toolchain": "arm-none-eabi-gcc 12.2", "mlfbuild_version": "0.1.0",
        "mlf": {"name": "kws.tar", "sha256": "ab" * 32, "version": 7},
        "models": [{"name": "kws", "workspace_bytes": 0}],
        "library": {"modules": [{
            "name": "kws", "executor": "aot", "usmp": True, "entry_function": "tvmgen_kws_run",
            "inputs": [{"name": "input", "size_bytes": 0x20}], "outputs": [{"name": "output", "size_bytes": 0}],
            "memory": {"main": [{"device": 1, "workspace_size_bytes": 0x100, "constants_size_bytes": 0x80,
                                 "io_size_bytes": 0x40}],
                       "operator_functions": [{"function_name": "tvmgen_kws_fused_add", "workspace_size_bytes": 0},
                                              {"function_name": "tvmgen_kws_fused_gone", "workspace_size_bytes": 32}]}}]},
    }
    (folder / "build.json").write_text(json.dumps(record))
    return elf, record


@pytest.fixture
def firmware(tmp_path):
    return make_firmware(tmp_path)


def _item(report, name):
    return next(i for i in report.items if i.name == name)


# --- attribution ---------------------------------------------------------------------------------

def test_totals_are_what_size_counts_and_every_byte_has_one_owner(firmware):
    elf, record = firmware
    report = size_report(elf, record)
    assert report.berkeley == {"text": 0x200, "data": 0x10, "bss": 0x140 + 0x400}
    assert report.flash.used == 0x210 == report.berkeley["text"] + report.berkeley["data"]
    assert report.ram.used == report.berkeley["data"] + report.berkeley["bss"]
    assert report.flash.total == 0x10000 and report.ram.total == 0x1000
    for region in (report.flash, report.ram):
        assert sum(region.by_category.values()) == region.used
    assert sum(c["flash"] for c in report.categories()) == report.flash.used
    assert sum(c["ram"] for c in report.categories()) == report.ram.used
    assert sum(i.flash for i in report.items) == report.flash.used
    assert sum(i.ram for i in report.items) == report.ram.used
    assert report.flash.by_kind == {"text": 0x100, "rodata": 0x100, "data": 0x10}
    assert report.ram.by_kind == {"data": 0x10, "bss": 0x140, "stack": 0x400}
    assert not report.notes or "DWARF" in report.notes[0]


def test_symbols_go_to_model_runtime_board_app_libc(firmware):
    report = size_report(*firmware)
    expect = {
        "Reset_Handler": ("board", 0x20, 0), "tvmgen_kws_fused_add": ("model", 0x40, 0),
        "tvmgen_kws_run": ("model", 0x10, 0), "main": ("app", 0x30, 0), "memcpy": ("libc", 0x20, 0),
        "global_const_workspace": ("model", 0x80, 0), "global_workspace": ("model", 0, 0x100),
        "mlf_kws_input0_data": ("model", 0, 0x20), "s_ws": ("runtime", 0, 0x10),
        "counter": ("app", 4, 4),  # .data: its load image in flash and its copy in RAM
        "impure_data": ("libc", 8, 8),
    }
    for name, (category, flash, ram) in expect.items():
        item = _item(report, name)
        assert (item.category, item.flash, item.ram) == (category, flash, ram), name
    assert _item(report, "global_workspace").subcategory == "USMP workspace pool"
    assert _item(report, "global_const_workspace").subcategory == "constants"
    assert _item(report, "mlf_kws_input0_data").subcategory == "io buffers"
    assert _item(report, "tvmgen_kws_run").subcategory == "executor"
    assert {i.module for i in report.items if i.category == "model"} == {"kws"}


def test_gaps_padding_asm_functions_literals_and_reserves(firmware):
    report = size_report(*firmware)
    # A zero-size assembly function owns the bytes up to the next symbol; zero fill is padding.
    assert _item(report, "__aeabi_uldivmod").flash == 0x34
    assert _item(report, "__aeabi_uldivmod").subcategory == "libgcc"
    literals = [i for i in report.items if i.name == "(anonymous literals)"]
    assert [(i.category, i.file or i.subcategory) for i in literals] == [("app", "main.c")]
    assert literals[0].flash == 0x200 - 0x1A0  # from "hello" to the end of the unnamed run
    padding = {i.name: (i.flash, i.ram) for i in report.items if i.category == "padding"}
    assert padding["(alignment in .text)"] == (0x0C, 0)
    assert padding["(alignment in .rodata)"] == (0x0C, 0)
    assert padding["(alignment in .data)"] == (4, 4)
    assert padding["(alignment in .bss)"] == (0, 0x10)
    assert _item(report, "(.stack reserve)").ram == 0x400
    assert _item(report, "(.stack reserve)").category == "stack"


def test_writable_section_in_flash_is_flash_not_ram(tmp_path):
    elf, record = make_firmware(tmp_path, writable_rodata=True)
    report = size_report(elf, record)
    assert report.berkeley["data"] == 0x110  # GNU size calls the writable .rodata "data"
    assert report.flash.used == report.berkeley["text"] + report.berkeley["data"]
    assert report.ram.used == report.berkeley["data"] + report.berkeley["bss"] - 0x100
    assert any("READONLY" in note and ".rodata" in note for note in report.notes)


def test_host_style_regions_without_a_board(firmware):
    elf, record = firmware
    record = dict(record, board={"name": "host", "kind": "host"})
    report = size_report(elf, record)
    assert report.flash.total is None and report.flash.budget is None
    assert report.flash.used == report.berkeley["text"] + report.berkeley["data"]
    assert report.ram.used == report.berkeley["data"] + report.berkeley["bss"]
    report.raise_if_over_budget()


def test_classifier_uses_paths_first_then_names():
    facts = ModelFacts(modules=("kws2", "kws"), operators={"matmul": "kws"}, usmp={})
    classify = Classifier(facts)
    text = Section(index=1, name=".text", type="SHT_PROGBITS", flags=6, addr=0, lma=0, size=100, kind="text")

    def owner(name, path=None, file=None, kind="FUNC", bind="GLOBAL"):
        return classify.owner(Symbol(0, name, 0, 4, kind, bind, 1, file=file, path=path), text)
    assert owner("tvmgen_kws2_fused_x").module == "kws2"  # longest module name wins
    assert owner("tvmgen_kws_fused_x").module == "kws"
    assert owner("matmul").category == "model"
    assert owner("helper", path="model/codegen/host/src/kws2_lib1.c").module == "kws2"
    assert owner("TVMBackendAllocWorkspace", path="crt/src/backend.c").category == "runtime"
    assert owner("mlfrt_putc", path="crt/src/platform_cortexm.c").category == "board"
    assert owner("_write", path="crt/src/newlib_syscalls.c").category == "board"
    assert owner("mlf_models", path="src/models.c").subcategory == "model table"
    assert owner("mlf_workspace_pool", path="src/models.c", kind="OBJECT").subcategory == "workspace pool"
    assert owner("arm_convolve_s8", path="lib/cmsis-nn/Source/ConvolutionFunctions/arm_convolve_s8.c").subcategory == "kernel library"
    for path in ("src/mlf_cmsis_nn_scratch.c", None):
        scratch = owner("mlf_cmsis_nn_scratch", path=path, kind="OBJECT")
        assert (scratch.category, scratch.subcategory, scratch.module) == ("model", "CMSIS-NN scratch", "(shared)")
    assert owner("memset", path="newlib/libc/string/memset.c").category == "libc"
    assert owner("expf", path="newlib/libm/math/ef_exp.c").subcategory == "libm"
    assert owner("TVMFuncCall", path="tvm_crt/src/runtime/crt/common/crt_runtime_api.c").category == "runtime"
    assert owner("_start").category == "libc"  # no debug info, no hint: the C library
    assert owner("hex.0", file="main.c", kind="OBJECT", bind="LOCAL").category == "app"


def test_normalised_paths_are_machine_independent():
    assert normalise_path("../../../../newlib/libc/string/memset.c") == "newlib/libc/string/memset.c"
    assert normalise_path("/build/gcc-12/libgcc/libgcc2.c") == "libgcc/libgcc2.c"
    assert normalise_path("/home/me/proj/src/main.c", "/home/me/proj") == "src/main.c"
    assert normalise_path("./src/main.c") == "src/main.c"


# --- predicted vs linked, operators, measured ------------------------------------------------------

def test_predicted_vs_linked_with_explanations(firmware):
    report = size_report(*firmware)
    module = report.modules[0]
    rows = {r.kind: r for r in module.memory}
    assert (rows["workspace"].predicted, rows["workspace"].linked) == (0x100, 0x100)
    assert "exactly as planned" in rows["workspace"].explanation
    assert (rows["constants"].predicted, rows["constants"].linked) == (0x80, 0x80)
    assert (rows["io"].predicted, rows["io"].linked, rows["io"].difference) == (0x40, 0x20, -0x20)
    assert "twice" in rows["io"].explanation
    ops = {o.name: o for o in module.operators}
    assert ops["tvmgen_kws_fused_add"].code_bytes == 0x40 and ops["tvmgen_kws_fused_add"].in_metadata
    assert ops["tvmgen_kws_fused_gone"].code_bytes is None and ops["tvmgen_kws_fused_gone"].workspace_bytes == 32
    assert not ops["tvmgen_kws_run"].in_metadata and ops["tvmgen_kws_run"].code_bytes == 0x10
    text = report.format_text()
    assert "predicted vs linked" in text and "not linked" in text and "tvmgen_kws_fused_add" in text


def test_metadata_quirks_are_explained(firmware):
    elf, record = firmware
    module = record["library"]["modules"][0]
    module.update(usmp=False)
    module["memory"]["main"][0].update(constants_size_bytes=0, io_size_bytes=0x20)
    rows = {r.kind: r for r in size_report(elf, record).modules[0].memory}
    assert "0 without a USMP constant pool" in rows["constants"].explanation
    assert "as predicted" in rows["io"].explanation
    assert "stack allocator" in rows["workspace"].explanation
    module["memory"]["main"].append({"device": 2, "workspace_size_bytes": 8, "constants_size_bytes": 0, "io_size_bytes": 0})
    rows = size_report(elf, record).modules[0].memory
    assert any(r.device == 2 and r.linked is None and "not part of this firmware" in r.explanation for r in rows)


def test_measured_peaks_next_to_static_numbers(firmware):
    report = size_report(*firmware, measured={"stack_peak": 0x3A0, "workspace_peak": 0})
    rows = {r["name"]: r for r in report.measured}
    assert rows["stack_peak"]["static"] == 0x400 and rows["stack_peak"]["headroom"] == 0x60
    assert rows["stack_peak"]["percent"] == pytest.approx(90.6, abs=0.1)
    assert any("stack high-water mark" in w for w in report.warnings)  # above 90 % of the reserve
    assert "stack high-water mark" in report.format_text()
    assert report.to_json()["measured"][1]["name"] == "workspace_peak"
    with pytest.raises(InvalidInputError):
        size_report(*firmware, measured={"stack_peak": "lots"})


# --- budgets ------------------------------------------------------------------------------------

def test_over_budget_raises_with_a_table(firmware):
    report = size_report(*firmware, budget_ram=1000)
    assert report.ram.budget == 1000 and report.ram.over_by == report.ram.used - 1000
    with pytest.raises(OverBudgetError) as caught:
        report.raise_if_over_budget()
    error = caught.value
    assert error.exit_code == EXIT_OVER_BUDGET == 5
    assert f"by {report.ram.used - 1000:,} B" in str(error)
    assert f"+{report.ram.used - 1000:,}" in error.table
    assert "biggest in ram" in error.table and "(.stack reserve)" in error.table and "global_workspace" in error.table
    assert "flash" in error.table and "fits" in error.table


def test_budget_cannot_exceed_the_board_and_warns_above_90_percent(firmware):
    report = size_report(*firmware, budget_flash=1 << 30)
    assert report.flash.budget == 0x10000  # the board's flash is the ceiling
    used = report.ram.used
    warned = size_report(*firmware, budget_ram=int(used / 0.95))
    assert any(w.startswith("ram is 95") for w in warned.warnings)
    warned.raise_if_over_budget()  # a warning, not an error
    assert not size_report(*firmware).warnings


# --- forms --------------------------------------------------------------------------------------

def test_json_snapshot_is_stable_and_portable(firmware, tmp_path):
    elf, record = firmware
    snapshot = size_report(elf, record).to_json()
    assert snapshot == size_report(elf, record).to_json()
    assert snapshot["schema"] == "mlfbuild-size/1"
    assert snapshot["flash"]["used"] == 0x210 and snapshot["flash"]["total"] == 0x10000
    assert snapshot["ram"]["used"] == 0x550 and snapshot["ram"]["total"] == 0x1000
    assert snapshot["build"]["board"] == "tiny-m4" and snapshot["build"]["mlf"]["sha256"] == "ab" * 32
    assert snapshot["build"]["toolchain"] == "arm-none-eabi-gcc 12.2"
    assert {c["name"] for c in snapshot["categories"]} >= {"model", "runtime", "board", "app", "libc", "padding", "stack"}
    assert snapshot["symbols"][0]["name"] == "(.stack reserve)"
    assert snapshot["modules"][0]["predicted_vs_linked"][0]["kind"] == "workspace"
    text = json.dumps(snapshot)
    assert str(tmp_path) not in text and "/tmp/" not in text


def test_text_markdown_and_html_forms(firmware):
    report = size_report(*firmware, budget_ram=1200)
    short = report.format_short()
    assert len(short.splitlines()) <= 5 and "flash" in short and "ram" in short and "over budget" in short
    markdown = report.format_markdown()
    assert "| region | used | budget | free | use |" in markdown and "| ram | 1,360 | 1,200 |" in markdown
    assert "| kws | io | 64 | 32 | -32 |" in markdown
    page = report.format_html()
    assert page.startswith("<!DOCTYPE html>") and 'class="bar" id="bar-flash"' in page and 'id="treemap-ram"' in page
    assert 'class="seg" data-category="model"' in page and 'class="tile"' in page
    assert "http://" not in page and "https://" not in page and "<link" not in page and "src=" not in page


def test_squarified_treemap_fills_its_box():
    values = [500, 250, 120, 60, 40, 20, 10]
    rects = squarify(values, 0, 0, 300, 200)
    for (x, y, w, h), value in zip(rects, values):
        assert w * h == pytest.approx(300 * 200 * value / sum(values))
        assert -1e-6 <= x and x + w <= 300 + 1e-6 and -1e-6 <= y and y + h <= 200 + 1e-6
    assert sum(w * h for _, _, w, h in rects) == pytest.approx(300 * 200)


# --- diff ------------------------------------------------------------------------------------------

def test_diff_shows_growth_by_category_and_symbol(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = size_report(*make_firmware(tmp_path / "a", workspace=0x100)).to_json()
    current = size_report(*make_firmware(tmp_path / "b", workspace=0x140)).to_json()
    changes = diff(base, current)
    assert [(r["name"], r["delta"]) for r in changes.regions] == [("flash", 0), ("ram", 0x40)]
    model = next(c for c in changes.categories if c["name"] == "model")
    assert model["ram"]["delta"] == 0x40
    assert changes.subcategories[0]["subcategory"] == "USMP workspace pool"
    assert changes.symbols[0]["name"] == "global_workspace" and changes.symbols[0]["ram_delta"] == 0x40
    assert changes.modules[0]["kind"] == "workspace"
    text = changes.format_text()
    assert "+64" in text and "global_workspace" in text
    markdown = changes.format_markdown()
    assert "| ram | 1,360 | 1,424 | **+64** | +4.7 % |" in markdown
    assert "no change" in diff(base, base).format_text()


def test_diff_pairs_renamed_single_modules(tmp_path):
    (tmp_path / "a").mkdir()
    base = size_report(*make_firmware(tmp_path / "a")).to_json()
    renamed = json.loads(json.dumps(base).replace("kws", "default"))
    changes = diff(renamed, base)
    assert "module 'default' of the base compared as 'kws'" in changes.caveats
    assert changes.symbols == []


def test_diff_refuses_what_is_not_a_snapshot(tmp_path, firmware):
    with pytest.raises(InvalidInputError):
        diff({"flash": {}}, size_report(*firmware))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InvalidInputError):
        load_snapshot(bad)
    bad.write_text("[]")
    with pytest.raises(InvalidInputError):
        load_snapshot(bad)


# --- inputs and the command --------------------------------------------------------------------

def test_unreadable_inputs_are_invalid_input(tmp_path, firmware):
    elf, record = firmware
    junk = tmp_path / "junk.elf"
    junk.write_bytes(b"not an elf at all")
    with pytest.raises(InvalidInputError):
        size_report(junk, record)
    with pytest.raises(InvalidInputError):
        size_report(tmp_path / "missing.elf", record)
    with pytest.raises(InvalidInputError):
        size_report(elf, dict(record, board={"memory": {"flash": {}}}))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInputError):
        build_folder.load_for_elf(empty)
    (empty / "firmware.elf").write_bytes(elf.read_bytes())
    with pytest.raises(InvalidInputError, match="build.json"):
        build_folder.load_for_elf(empty)
    (empty / "build.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        build_folder.load_for_elf(empty / "firmware.elf")


def test_parse_size():
    assert parse_size("65536") == 65536 and parse_size("64K") == 65536 and parse_size("64KiB") == 65536
    assert parse_size("0x10000") == 65536 and parse_size("1M") == 1 << 20
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size("lots")


command = SizeCommand()


def _run(argv: list[str]) -> tuple[str, str]:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    command.run(parser.parse_args(argv), out=out, err=err)
    return out.getvalue(), err.getvalue()


def test_command_forms_diff_and_budget(firmware, tmp_path):
    elf, _ = firmware
    folder = str(elf.parent)
    text, _ = _run([folder])
    assert "where the bytes go" in text
    snapshot, _ = _run([folder, "--json"])
    (tmp_path / "base.json").write_text(snapshot)
    assert json.loads(snapshot)["flash"]["used"] == 0x210
    markdown, _ = _run([str(elf), "--markdown", "--html", str(tmp_path / "size.html")])
    assert markdown.startswith("### Firmware size") and (tmp_path / "size.html").read_text().startswith("<!DOCTYPE")
    changes, _ = _run([folder, "--diff", str(tmp_path / "base.json")])
    assert "no change" in changes
    with pytest.raises(OverBudgetError) as caught:
        _run([folder, "--budget-flash", "512"])
    assert "flash" in caught.value.table
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([folder, "--json", "--markdown"])


def test_diff_header_html_and_long_names_read_apart(tmp_path):
    """size --diff said the same header for builds of different flags, cut symbol names at the end
    (rows read alike) and --html ignored --diff."""
    from mlfbuild.size.diff import _short

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base_report = size_report(*make_firmware(tmp_path / "a", workspace=0x100))
    report = size_report(*make_firmware(tmp_path / "b", workspace=0x140))
    base = base_report.to_json()
    current = report.to_json()
    base["build"]["cflags"] = ["-mcpu=cortex-m4", "-Os"]
    current["build"]["cflags"] = ["-mcpu=cortex-m4", "-O2"]
    changes = diff(base, current)
    header = changes.format_text().splitlines()[0]
    assert "(-Os)" in header and "(-O2)" in header and "cortex-m4" not in header
    assert "(-O2)" in changes.format_markdown().splitlines()[0]
    stem = "tvmgen_kws_fused_nn_conv2d_add_fixed_point_multiply_per_axis_add_clip_cast_subtract_"
    one, two = _short(stem + "1"), _short(stem + "2")
    assert one != two and len(one) == 70 and "…" in one[1:-1] and one.endswith("_1")
    page = report.format_html(changes)
    assert "Change from the base" in page and "(-O2)" in page and "global_workspace" in page
    assert page.index("Change from the base") < page.index("Regions against budget")
    assert "Change from the base" not in report.format_html()


def test_html_page_width_numbers_tiles_and_budget_legend(firmware):
    from mlfbuild.size.html import _shared_prefix

    page = size_report(*firmware, budget_ram=1200).format_html()
    assert "940px" not in page and "word-break:break-all" not in page and "white-space:nowrap" in page
    assert 'class="legend budget-legend"' in page and "budget</span>" in page
    assert _shared_prefix(["tvmgen_kws_fused_a", "tvmgen_kws_fused_conv_b", "tvmgen_kws_fused_c"]) == "tvmgen_kws_fused_"
    assert _shared_prefix(["alpha", "beta"]) == "" and _shared_prefix(["only_one"]) == ""
    report = size_report(*firmware)
    stem = "tvmgen_kws_fused_nn_conv2d_add_fixed_point_multiply_per_axis_add_clip_cast_subtract"
    model = [item for item in report.items if item.category == "model" and item.flash > 0]
    for index, item in enumerate(model):
        item.name = f"{stem}_{index}"
    flash_map = report.format_html().split('id="treemap-flash"')[1].split("</svg>")[0]
    labels = [label for label in re.findall(r'pointer-events="none">([^<]*)</text>', flash_map)
              if label.startswith("…")]
    assert len(labels) == len(model) > 1 and len(set(labels)) == len(labels)


def test_report_at_the_end_of_a_build_keeps_a_snapshot(firmware):
    elf, record = firmware
    report = size_report(elf, record, budget_ram=1000)
    build_folder.write_snapshot(elf.parent, report.to_json_text())
    assert json.loads((elf.parent / "size.json").read_text()) == report.to_json()
    assert report.over_budget and "over budget" in report.format_short()
    with pytest.raises(OverBudgetError):
        report.raise_if_over_budget()


@pytest.mark.parametrize("edit", [
    lambda s: s.pop("flash"),
    lambda s: s["ram"].update(used="1000"),
    lambda s: s["categories"][0].update(flash=None),
    lambda s: s["categories"][0]["subcategories"][0].pop("name"),
    lambda s: s["symbols"][0].pop("name"),
    lambda s: s["symbols"][0].update(flash=[1]),
    lambda s: s["modules"][0].update(predicted_vs_linked={"kind": "io"}),
    lambda s: s["build"].update(mlf=["m.tar"]),
], ids=["no-flash", "used-text", "category-null", "subcategory-nameless", "symbol-nameless", "symbol-list",
        "rows-object", "mlf-list"])
@pytest.mark.parametrize("form", [[], ["--markdown"]], ids=["text", "markdown"])
def test_a_damaged_diff_base_is_one_line(firmware, tmp_path, edit, form):
    elf, _ = firmware
    snapshot = json.loads(_run([str(elf.parent), "--json"])[0])
    assert snapshot["categories"] and snapshot["symbols"] and snapshot["modules"] is not None
    snapshot.setdefault("modules", []).insert(0, {"name": "m", "predicted_vs_linked": [{"kind": "io", "device": 1}]})
    edit(snapshot)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(snapshot))
    with pytest.raises(InvalidInputError) as caught:
        _run([str(elf.parent), "--diff", str(base), *form])
    assert str(caught.value).startswith(f"{base}: ") and "\n" not in str(caught.value), caught.value


def test_a_diff_base_that_never_ends_is_refused(firmware):
    elf, _ = firmware
    with pytest.raises(InvalidInputError, match="/dev/zero: this size snapshot is a character device"):
        _run([str(elf.parent), "--diff", "/dev/zero"])
