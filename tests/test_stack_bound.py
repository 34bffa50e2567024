"""The static stack bound: gcc's own figures and the image's disassembly, the reserve it sets, the
size report's stack section, and measured <= bound on every fixture run in QEMU."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, entry_id, fixture_boards, references_for
from mlfbuild.project import ProjectOptions, linked_stack_bytes
from mlfbuild.size import size_report
from mlfbuild.size.stack import (BASIC_FRAME, FPU_FRAME, STACK_MARGIN, Function, _gcc_reports, _read_instruction,
                                 _Walker, stack_reserve)

EXAMPLE = REPO / "examples" / "tiny_aot.tar"


def test_prologue_instructions_give_the_frame():
    f = Function(frame=0)
    _read_instruction(f, "f", "push", "{r4, r5, r6, r7, lr}")
    _read_instruction(f, "f", "vpush", "{d8-d10}")
    _read_instruction(f, "f", "sub", "sp, #60\t@ 0x3c")
    _read_instruction(f, "f", "sub.w", "sp, sp, #1024\t@ 0x400")
    _read_instruction(f, "f", "str.w", "lr, [sp, #-4]!")
    assert f.frame == 20 + 24 + 60 + 1024 + 4
    _read_instruction(f, "f", "bl", "1234 <memcpy>")
    _read_instruction(f, "f", "b.w", "1240 <memset>")
    _read_instruction(f, "f", "bne.n", "1250 <f+0x10>")
    _read_instruction(f, "f", "bx", "lr")
    assert f.calls == {"memcpy", "memset"} and not f.indirect
    _read_instruction(f, "f", "blx", "r3")
    assert f.indirect
    _read_instruction(f, "f", "sub", "sp, r3")
    assert f.frame is None  # moved by a run-time amount


def test_walker_names_recursion_and_unresolved_pointers():
    functions = {"a": Function(frame=8, calls={"b"}), "b": Function(frame=16, calls={"a"})}
    walker = _Walker(functions, [])
    assert walker.depth("a")[0] is None
    assert any("recursion (a -> b -> a)" in why for why in walker.unbounded)
    functions = {"main": Function(frame=8, indirect=True)}
    walker = _Walker(functions, [])
    assert walker.depth("main")[0] is None and "main: calls through a pointer" in walker.unbounded.pop()
    functions = {"main": Function(frame=8, indirect=True), "run": Function(frame=40, calls={"leaf"}),
                 "leaf": Function(frame=4)}
    assert _Walker(functions, ["run"]).depth("main") == (52, ("main", "run", "leaf"))
    walker = _Walker({"main": Function(frame=8, calls={"__stack_size"})}, [])
    assert walker.depth("main")[0] is None and "__stack_size: called, but not found" in walker.unbounded.pop()


def test_branch_targets_are_resolved_by_address_not_by_objdumps_label():
    # With flash at 0 (lm3s6965evb), objdump may label a function's address with an absolute
    # linker-script symbol of the same value.
    f = Function(frame=0)
    _read_instruction(f, "main", "bl", "378 <__stack_size>", {0x378: "mlf_run"})
    assert f.calls == {"mlf_run"}


@pytest.mark.cross
def test_gcc_reports_frames_and_calls(tmp_path):
    source = tmp_path / "m.c"
    source.write_text("__attribute__((noinline)) int leaf(int x) { volatile int a[20]; a[0] = x; return a[0]; }\n"
                      "int rec(int n) { return n ? rec(n - 1) + leaf(n) : 0; }\n"
                      "int call(int (*f)(int)) { return f(1) + leaf(2); }\n")
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-O1", "-fstack-usage", "-fcallgraph-info=su",
                    "-c", str(source), "-o", str(tmp_path / "m.o")], check=True)
    reports = _gcc_reports(tmp_path)
    assert reports["leaf"].frame >= 80
    assert "rec" in reports["rec"].calls and "leaf" in reports["rec"].calls
    assert reports["call"].indirect


def test_reserve_is_bound_plus_margin_or_the_fallback():
    assert stack_reserve(628, 8192) == (628 + STACK_MARGIN + 7) // 8 * 8
    assert stack_reserve(None, 8192) == 8192
    assert BASIC_FRAME == 36 and FPU_FRAME == 108


@pytest.mark.cross
def test_build_links_the_computed_reserve(build_firmware, fixtures_dir):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", "mps2-an386")
    record = json.loads((out / "build.json").read_text())
    stack = record["stack"]
    assert stack["bound"] and not stack["unbounded"] and stack["frames_from_gcc"] > 40
    assert stack["path"][:2] == ["Reset_Handler", "main"] and stack["exception_frame"] == FPU_FRAME
    assert stack["reserve"] == stack_reserve(stack["bound"], 8192) == linked_stack_bytes(out / "project")
    report = size_report(out / "firmware.elf", record)
    assert report.stack["reserve"] == stack["reserve"] and report.stack["bound"] == stack["bound"]
    # The whole firmware's RAM, stack included, in 90 KiB (the model's floor is 88,688 B).
    assert report.ram.used <= 90 * 1024, report.ram.used


@pytest.mark.cross
def test_stack_bytes_fixes_the_reserve(build_firmware):
    out = build_firmware(EXAMPLE, "mps2-an386", stack_bytes=4096)
    record = json.loads((out / "build.json").read_text())
    assert record["stack"]["reserve"] == 4096 == linked_stack_bytes(out / "project")
    assert record["stack"]["reserve_source"] == "--stack-bytes" and record["stack"]["bound"] < 4096


def test_size_report_shows_bound_reserve_and_peak(build_firmware):
    from mlfbuild.size.render import stack_lines

    lines = stack_lines({"bound": 600, "exception_frame": 108, "path": ["Reset_Handler", "main"], "reserve": 856,
                         "reserve_source": "bound + 256 B margin", "measured_peak": 500, "unbounded": []})
    text = "\n".join(lines)
    assert "static bound" in text and "600 B" in text and "856 B" in text and "500 B  last run" in text
    text = "\n".join(stack_lines({"bound": None, "unbounded": ["f: recursion (f -> f)"], "reserve": 8192,
                                  "reserve_source": "board x (no static bound)", "measured_peak": None}))
    assert "f: recursion" in text and "no run yet" in text


RUNS = fixture_boards(("mps2-an386",))


@pytest.mark.qemu
@pytest.mark.parametrize("item, board", RUNS, ids=[f"{entry_id(i)}-{b}" for i, b in RUNS])
def test_measured_stack_never_exceeds_the_bound(item, board, fixtures_dir, build_firmware):
    from mlfbuild.run import run_build

    fixture_set, entry = item
    out = build_firmware(fixtures_dir / fixture_set / entry["file"], board)
    bound = json.loads((out / "build.json").read_text())["stack"]["bound"]
    result = run_build(out, references=references_for(fixture_set, entry, fixtures_dir), timeout=60, repeat=3)
    assert result.status == "pass"
    assert bound is not None
    for model in result.models:
        assert 0 < model.stack_peak <= bound, (model.name, model.stack_peak, bound)


@pytest.mark.cross
def test_a_model_that_fits_only_with_the_computed_stack(fixtures_dir, tmp_path):
    from mlfbuild.build import build

    # mps2-an386 with 90 KiB of RAM: kws (graph) fits with its computed stack, not with the board's 8 KiB.
    text = (REPO / "boards" / "mps2-an386.toml").read_text()
    board_file = tmp_path / "an386-90k.toml"
    board_file.write_text(text.replace('name = "mps2-an386"', 'name = "an386-90k"')
                          .replace("ram = { origin = 0x20000000, length = 0x400000 }",
                                   "ram = { origin = 0x20000000, length = 0x16800 }"))
    result = build(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", "an386-90k", tmp_path / "o",
                   board_files=(board_file,), options=ProjectOptions(werror=True))
    assert result.record["stack"]["reserve"] < 8192 and result.size.ram.used <= 0x16800
