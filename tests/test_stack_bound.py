"""The static stack bound: gcc's own figures and the image's disassembly, the reserve it sets, the
size report's stack section, and measured <= bound on every fixture run in QEMU."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, entry_id, fixture_boards, references_for
from mlfbuild.project import ProjectOptions, linked_stack_bytes
from mlfbuild.size import size_report
from mlfbuild.size.stack import (BASIC_FRAME, FPU_FRAME, STACK_MARGIN, Function, _gcc_reports, _read_instruction,
                                 _Walker, stack_reserve)

EXAMPLE = REPO / "examples" / "tiny_aot.tar"


def test_prologue_instructions_give_the_frame():
    heads = {0x1234: "memcpy", 0x1240: "memset", 0x1244: "g", 0x1240 - 0x30: "f"}
    f = Function(frame=0)
    for mnemonic, operands in [("push", "{r4, r5, r6, r7, lr}"), ("vpush", "{d8-d10}"), ("sub", "sp, #60\t@ 0x3c"),
                               ("sub.w", "sp, sp, #1024\t@ 0x400"), ("str.w", "lr, [sp, #-4]!")]:
        _read_instruction(f, "f", mnemonic, operands, heads)
    assert f.frame == 20 + 24 + 60 + 1024 + 4
    _read_instruction(f, "f", "bl", "1234 <memcpy>", heads)
    _read_instruction(f, "f", "b.w", "1240 <memset>", heads)  # a tail call
    _read_instruction(f, "f", "bne.n", "1250 <f+0x10>", heads)
    _read_instruction(f, "f", "b.n", "1210 <f>", heads)  # back to its own start: a loop
    _read_instruction(f, "f", "bx", "lr", heads)
    assert f.calls == {"memcpy", "memset"} and not f.indirect
    _read_instruction(f, "f", "cbz", "r3, 1244 <g>", heads)  # a conditional tail call
    assert "g" in f.calls
    _read_instruction(f, "f", "blx", "r3", heads)
    assert f.indirect
    _read_instruction(f, "f", "sub", "sp, r3", heads)
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


def test_a_cycle_closed_by_a_pointer_call_says_so():
    functions = {"a": Function(frame=8, indirect=True), "b": Function(frame=8, calls={"a"})}
    walker = _Walker(functions, ["b"])
    assert walker.depth("a")[0] is None
    [why] = walker.unbounded
    assert why.startswith("a: recursion (a -> (pointer) b -> a), closed by a call through a pointer"), why


@pytest.mark.cross
def test_newlibs_guarded_stdio_set_up_is_walked_twice_not_taken_for_recursion(build_firmware, fixtures_dir):
    from mlfbuild.size import libc_guards
    from mlfbuild.size.stack import _disassembly, _symbol_address

    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_packed.tar", "mps2-an386", runtime="tvm")
    stack = json.loads((out / "build.json").read_text())["stack"]
    assert not any("__sinit" in why for why in stack["unbounded"]), stack["unbounded"]
    # What is left is said as what it is: newlib's flush reaches printf's helper only as a pointer call may.
    assert any("-> (pointer) __sfputs_r), closed by a call through a pointer" in why
               for why in stack["unbounded"]), stack["unbounded"]

    elf = out / "firmware.elf"
    pointer = _symbol_address(elf, "_global_impure_ptr")
    functions, listing = _disassembly(elf, "arm-none-eabi-objdump")
    assert libc_guards.unroll_newlib_sinit(functions, listing, pointer)
    depth, path = _Walker(functions, []).depth("__sinit.part.0")
    assert path[:4] == ("__sinit.part.0", "__sfp", "__sinit.part.0 [global reent]", "__sfp [stdio set up]"), path
    frames = functions["__sinit.part.0"].frame + functions["__sfp"].frame
    assert depth > 2 * frames
    # Without the store that sets the flag before __sfp, the guard is not shown: the cycle stays.
    functions, listing = _disassembly(elf, "arm-none-eabi-objdump")
    listing["__sinit.part.0"] = [i for i in listing["__sinit.part.0"] if not i[1].startswith("streq")]
    assert not libc_guards.unroll_newlib_sinit(functions, listing, pointer)
    assert _Walker(functions, []).depth("__sinit.part.0")[0] is None
    functions, listing = _disassembly(elf, "arm-none-eabi-objdump")  # nor when __sfp tests another word
    listing["__sfp"] = [(a, m, o.replace("#24]", "#28]")) for a, m, o in listing["__sfp"]]
    assert not libc_guards.unroll_newlib_sinit(functions, listing, pointer)


def test_branch_targets_are_resolved_by_address_not_by_objdumps_label():
    # With flash at 0, objdump may label a code address with an absolute linker-script symbol of the
    # same value: a function's start, or a jump inside a function.
    f = Function(frame=0)
    _read_instruction(f, "main", "bl", "378 <__stack_size>", {0x378: "mlf_run"})
    assert f.calls == {"mlf_run"}
    _read_instruction(f, "main", "b.n", "2000 <__stack_size>", {0x378: "mlf_run", 0x1f80: "main"})
    _read_instruction(f, "main.cold", "b.w", "1f90 <main+0x10>", {0x1f80: "main"})  # back into its parent
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


@pytest.mark.parametrize("value", ["0", "12", str(2 ** 64), "8M"])
def test_stack_bytes_the_board_cannot_hold_is_refused_before_anything_is_written(value, tmp_path, capsys):
    from mlfbuild.cli import main

    out = tmp_path / "out"
    assert main(["build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out), "--stack-bytes", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--stack-bytes {int(value.removesuffix('M')) << (20 if 'M' in value else 0)}" \
        in err and "multiple of 8 from 8 to 4,194,304 B" in err, err
    assert not out.exists()


def test_stack_bytes_on_the_host_is_refused_before_anything_is_written(tmp_path, capsys):
    from mlfbuild.cli import main

    out = tmp_path / "out"
    assert main(["build", str(EXAMPLE), "-b", "host", "-o", str(out), "--stack-bytes", "4096"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--stack-bytes does not apply to the host board" in err, err
    assert not out.exists()


@pytest.mark.cross
def test_a_stack_reserve_the_ram_cannot_hold_beside_the_data_shows_the_size_table(tmp_path):
    # The whole of RAM for .stack: the data no longer fits. The diagnostic link must keep the
    # reserve asked for, or it fits and the error falls back to the linker's words.
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "build", str(EXAMPLE), "-b", "mps2-an386",
                             "-o", str(tmp_path / "o"), "--stack-bytes", str(0x400000)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 5, result.stderr
    first = next(line for line in result.stderr.splitlines() if line.startswith("mlfbuild: error:"))
    assert re.search(r"does not fit the board: ram [\d,]+ B > 4,194,304 B by [\d,]+ B", first), first
    assert "overflowed" not in first and "over by" in result.stderr and ".stack" in result.stderr, result.stderr


@pytest.mark.qemu
def test_a_run_that_fills_the_stack_reserve_warns(build_firmware):
    out = build_firmware(EXAMPLE, "mps2-an386", stack_bytes=8)
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--timeout", "20"],
                            capture_output=True, text=True, timeout=120)
    assert "stack peak 8 B" in result.stdout, result.stdout + result.stderr
    assert "warning: model tiny: the stack peak reached the whole .stack reserve (8 B)" in result.stderr, result.stderr


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


# -- code that once made the walker give up on real models ---------------------------------------

def _function_addresses(elf) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as stream:
        symtab = ELFFile(stream).get_section_by_name(".symtab")
        return {s.name: s["st_value"] for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}


def _disassemble(elf) -> str:
    return subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(elf)], check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.cross
def test_weights_that_equal_code_addresses_are_data(build_firmware, tmp_path):
    # Weights and biases sit in flash beside the code; with flash at 0 an int32 bias can equal a
    # function's address. Such a word is data: taken for a function pointer the model table's
    # caller might follow, it made `main -> run_model -> main` look recursive.
    from mlfbuild.build import build
    from mlfwriter import TinyModel, tar_tree

    plain = build_firmware(EXAMPLE, "mps2-an386")
    before = json.loads((plain / "build.json").read_text())["stack"]
    addresses = _function_addresses(plain / "firmware.elf")
    model = TinyModel()
    model.b1[:2] = [addresses["main"], addresses["run_model"]]  # Thumb addresses, as a pointer holds them
    result = build(tar_tree(model.files(), tmp_path / "tiny.tar"), "mps2-an386", tmp_path / "o",
                   options=ProjectOptions(werror=True))
    assert _function_addresses(result.elf)["run_model"] == addresses["run_model"]  # the same layout
    after = result.record["stack"]
    assert after["unbounded"] == [] and after["bound"] == before["bound"]


@pytest.mark.cross
def test_a_linker_symbol_at_a_jump_target_is_not_a_call(build_firmware, tmp_path):
    # `__stack_size` is an absolute symbol. When its value equals the address of a jump inside a
    # global function, objdump labels the jump `<__stack_size>` — in an image without relocations;
    # the build keeps them (and objdump then prefers main+0x..), but the walker must not depend on it.
    import shutil

    from mlfbuild.size.stack import compute_stack_bound

    plain = build_firmware(EXAMPLE, "mps2-an386")
    before = json.loads((plain / "build.json").read_text())["stack"]
    jumps = re.findall(r"\tb(?:ne|eq|cs|cc|ge|lt|gt|le|hi|ls)?(?:\.[nw])?\t([0-9a-f]+) <(\w+)\+0x[0-9a-f]+>$",
                       _disassemble(plain / "firmware.elf"), re.M)
    target = next(int(address, 16) for address, function in jumps
                  if function == "main" and int(address, 16) % 8 == 0 and int(address, 16) >= 512)
    out = build_firmware(EXAMPLE, "mps2-an386", stack_bytes=target)
    stack = json.loads((out / "build.json").read_text())["stack"]
    assert stack["unbounded"] == [] and stack["bound"] == before["bound"] and stack["reserve"] == target

    project = shutil.copytree(out / "project", tmp_path / "project")
    makefile = project / "Makefile"
    makefile.write_text(makefile.read_text().replace(" -Wl,--emit-relocs", ""))
    (project / "build" / "firmware.elf").unlink()
    subprocess.run(["make", "-s", "-C", str(project), "build/firmware.elf"], check=True, capture_output=True)
    elf = project / "build" / "firmware.elf"
    assert f"{target:x} <__stack_size>" in _disassemble(elf)
    bound = compute_stack_bound(elf, project / "build", "arm-none-eabi-objdump", fpu=True)
    assert not any("__stack_size" in why for why in bound.unbounded), bound.unbounded
    assert bound.bound is None and all("keeps no relocations" in why for why in bound.unbounded), bound.unbounded


# Two identical functions (gcc's identical-code folding, -fipa-icf at -Os and -O2, keeps one body,
# which objdump shows under one of the names) that reach the deepest frame through a tail call (`b`:
# the caller's frame is gone). The deepest path goes through the caller of the folded twin.
FOLDED_AND_TAIL_CALLS = """
__attribute__((noinline)) int32_t tiny_deep(const int8_t* p, int32_t n) {
  volatile int32_t scratch[400];
  int32_t sum = 0;
  for (int32_t i = 0; i < n; ++i) { scratch[i % 400] = p[i & 15]; sum += scratch[(i * 7) % 400]; }
  return sum;
}
__attribute__((noinline)) int32_t tiny_tail(const int8_t* p, int32_t n) { return tiny_deep(p, n + 1); }
__attribute__((noinline)) static int32_t tiny_twin_a(const int8_t* p, int32_t n) {
  volatile int32_t scratch[200];
  for (int32_t i = 0; i < 200; ++i) scratch[i] = p[i & 15];
  return scratch[n % 200] + tiny_tail(p, n);
}
__attribute__((noinline)) static int32_t tiny_twin_b(const int8_t* p, int32_t n) {
  volatile int32_t scratch[200];
  for (int32_t i = 0; i < 200; ++i) scratch[i] = p[i & 15];
  return scratch[n % 200] + tiny_tail(p, n);
}
__attribute__((noinline)) int32_t tiny_probe_a(const int8_t* p) { return tiny_twin_a(p, 300) + 1; }
__attribute__((noinline)) int32_t tiny_probe_b(const int8_t* p) {
  volatile int32_t pad[16];
  pad[0] = p[0];
  return tiny_twin_b(p, 500) + pad[0];
}
"""


def _folded_model(tmp_path):
    from mlfwriter import TinyModel, tar_tree

    model = TinyModel()
    model.behaviour = ("  { volatile int32_t sink = tiny_probe_a(input_buffer_var) + tiny_probe_b(input_buffer_var);"
                       " (void)sink; }\n")
    files = model.files()
    lib1 = f"codegen/host/src/{model.name}_lib1.c"
    files[lib1] = files[lib1].replace(b"#include <stdbool.h>\n", b"#include <stdbool.h>\n" + FOLDED_AND_TAIL_CALLS.encode())
    return tar_tree(files, tmp_path / "folded.tar")


@pytest.mark.qemu
def test_folded_functions_and_tail_calls_keep_their_frames(build_firmware, tmp_path):
    from mlfbuild.run import run_build

    mlf = _folded_model(tmp_path)
    for opt in ("-Os", "-O2"):
        out = build_firmware(mlf, "mps2-an386", optimize=opt)
        addresses = _function_addresses(out / "firmware.elf")
        text = _disassemble(out / "firmware.elf")
        # What the compiler did is what this test is about: one twin body, and `b` into tiny_deep.
        assert addresses.get("tiny_twin_a", -1) == addresses.get("tiny_twin_b", -2), opt
        assert re.search(r"\tb(?:\.w)?\t[0-9a-f]+ <tiny_deep>", text), opt
        stack = json.loads((out / "build.json").read_text())["stack"]
        assert stack["unbounded"] == [] and stack["bound"] is not None, opt
        path = stack["path"]
        assert path[path.index("tiny_probe_b") + 1] in ("tiny_twin_a", "tiny_twin_b"), path
        assert path[path.index("tiny_tail") + 1] == "tiny_deep", path
        assert stack["bound"] > 1600 + 800, stack
    result = run_build(out, references=[f"tiny={EXAMPLE.with_suffix('.npz')}"], timeout=60)
    assert result.status == "pass"
    assert 1600 + 800 < result.models[0].stack_peak <= stack["bound"], (result.models[0].stack_peak, stack["bound"])
