"""Board files: every shipped board validates; broken files fail with one-line BoardErrors;
the linker script template renders each board's memory map."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest

from mlfbuild import boards
from mlfbuild.boards import DEFAULT_BOARD, Board, MemoryRegion, list_boards, load_board, load_board_file
from mlfbuild.errors import BoardError, InvalidInputError
from mlfbuild.project.runtime import UART_DRIVER_MACROS, crt_defines, crt_sources
from mlfbuild.resources import data_dir

QEMU_BOARDS = {"mps2-an386", "mps2-an385", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2",
               "lm3s6965evb", "microbit"}
HARDWARE_BOARDS = {"nucleo-f446re", "nucleo-f746zg", "nucleo-l4r5zi", "stm32f4-discovery",
                   "feather-nrf52840-express", "nrf52840dk", "arduino-zero", "metro-m4"}
ALL_BOARDS = QEMU_BOARDS | HARDWARE_BOARDS | {"host"}

KiB = 1024
MiB = 1024 * KiB
# name -> (flash origin, flash length, ram origin, ram length, uart kind, uart base)
EXPECTED_MAPS = {
    "mps2-an386": (0x0, 4 * MiB, 0x20000000, 4 * MiB, "cmsdk", 0x40004000),
    "mps2-an385": (0x0, 4 * MiB, 0x20000000, 4 * MiB, "cmsdk", 0x40004000),
    "mps2-an500": (0x0, 4 * MiB, 0x20000000, 4 * MiB, "cmsdk", 0x40004000),
    "mps2-an505": (0x10000000, 4 * MiB, 0x38000000, 4 * MiB, "cmsdk", 0x40200000),
    "mps3-an547": (0x0, 512 * KiB, 0x20000000, 512 * KiB, "cmsdk", 0x49303000),
    "netduinoplus2": (0x08000000, 1 * MiB, 0x20000000, 128 * KiB, "stm32", 0x40011000),
    "lm3s6965evb": (0x0, 256 * KiB, 0x20000000, 64 * KiB, "pl011", 0x4000C000),
    "microbit": (0x0, 256 * KiB, 0x20000000, 16 * KiB, "nrf", 0x40002000),
    "feather-nrf52840-express": (0x26000, 0xF4000 - 0x26000, 0x20000008, 256 * KiB - 8, "nrf", 0x40002000),
    "nrf52840dk": (0xC200, 0x77000 - 0x200 - 0x1000, 0x20000000, 256 * KiB, "nrf", 0x40002000),
    "nucleo-f446re": (0x08000000, 512 * KiB, 0x20000000, 128 * KiB, "stm32", 0x40004400),
    "nucleo-f746zg": (0x08000000, 1 * MiB, 0x20000000, 320 * KiB, "stm32f7", 0x40004800),
    "nucleo-l4r5zi": (0x08000000, 2 * MiB, 0x20000000, 640 * KiB, "stm32-lpuart", 0x40008000),
    "stm32f4-discovery": (0x08000000, 1 * MiB, 0x20000000, 128 * KiB, "stm32", 0x40004400),
}


def test_every_board_loads_and_names_match_the_list():
    loaded = list_boards()
    assert {b.name for b in loaded} == ALL_BOARDS
    assert [b.name for b in loaded] == sorted(b.name for b in loaded)
    for board in loaded:
        assert board.source is not None and board.source.stem == board.name
        assert load_board(board.name) == board
    assert DEFAULT_BOARD == "mps2-an386"
    assert load_board(DEFAULT_BOARD).is_emulated


@pytest.mark.parametrize("name", sorted(EXPECTED_MAPS))
def test_memory_maps_and_consoles(name):
    board = load_board(name)
    flash_origin, flash_len, ram_origin, ram_len, uart, base = EXPECTED_MAPS[name]
    assert board.memory.flash == MemoryRegion(flash_origin, flash_len)
    assert board.memory.ram == MemoryRegion(ram_origin, ram_len)
    assert (board.console.uart, board.console.base) == (uart, base)
    assert board.cpu.elf_machine == "EM_ARM"
    assert board.cpu.float_abi in ("soft", "softfp", "hard")
    assert board.timer.systick_hz >= 1000
    assert board.memory.stack_bytes > 0


def test_kinds_and_sections():
    for board in list_boards():
        if board.name == "host":
            assert board.is_host and not board.is_emulated
            assert board.cpu is None and board.memory is None and board.timer is None
            assert board.console.uart == "stdio" and board.cflags == ()
        elif board.name in QEMU_BOARDS:
            assert board.is_emulated and board.qemu.machine == board.name and board.flashing is None
        else:
            assert board.is_hardware and board.qemu is None
            assert board.flashing.address == board.memory.flash.origin
            if board.flashing.method != "stm32-uart" and not board.flashing.sectors:
                continue
            # the sector table covers flash exactly
            table = board.flashing.sector_table()
            assert table[0][0] == board.memory.flash.origin
            assert table[-1][0] + table[-1][1] == board.memory.flash.end


def test_cpu_flags():
    assert load_board("mps2-an385").cpu.float_abi == "soft"
    assert "-mfloat-abi=soft" in load_board("lm3s6965evb").cflags
    assert "-mfpu=fpv5-d16" in load_board("mps2-an500").cflags
    assert "-mfpu=fpv5-sp-d16" in load_board("mps2-an505").cflags
    assert "-mfpu=fpv5-sp-d16" in load_board("nucleo-f746zg").cflags
    assert "-mcpu=cortex-m55" in load_board("mps3-an547").cflags


def test_f4_sector_layout():
    f407 = load_board("stm32f4-discovery").flashing
    sizes = [size for _, size in f407.sector_table()]
    assert sizes == [16 * KiB] * 4 + [64 * KiB] + [128 * KiB] * 7
    assert f407.sectors_for(0x08000000, 0x4001) == [0, 1]
    assert f407.sectors_for(0x08010000, 1) == [4]


def test_c_defines():
    an386 = crt_defines(load_board("mps2-an386"))
    assert an386 == ["-DMLFRT_UART_CMSDK=1", "-DMLFRT_UART_BASE=0x40004000u", "-DMLFRT_UART_BAUD=115200u",
                     "-DMLFRT_UART_CLOCK_HZ=25000000u", "-DMLFRT_SYSTICK_HZ=25000000u", "-DMLFRT_SEMIHOSTING=1"]
    assert crt_defines(load_board("host")) == ["-DMLFRT_HOST=1"]
    f746 = crt_defines(load_board("nucleo-f746zg"))
    assert "-DMLFRT_UART_STM32F7=1" in f746 and "-DMLFRT_SEMIHOSTING=0" in f746
    assert any(d.startswith("-DMLFRT_BOARD_INIT_WRITES=0x40023830u,") for d in f746)
    assert "-DMLFRT_UART_LPUART=1" in crt_defines(load_board("nucleo-l4r5zi"))
    for board in list_boards():
        for define in crt_defines(board):
            assert not re.search(r"[\s'\"{}]", define), define  # safe unquoted in make and sh
        crt = data_dir("crt")
        assert all((crt / src).is_file() for src in crt_sources(board))


def test_to_json_round_trips_the_data():
    an505 = load_board("mps2-an505").to_json()
    assert an505["memory"]["flash"] == {"origin": 0x10000000, "length": 0x400000}
    assert an505["qemu"] == {"machine": "mps2-an505"}
    assert "flashing" not in an505
    assert load_board("host").to_json() == {"name": "host", "description": load_board("host").description,
                                            "kind": "host", "console": {"uart": "stdio"}}
    f446 = load_board("nucleo-f446re").to_json()
    assert f446["flashing"]["sectors"][0] == {"count": 4, "size": 0x4000}
    assert f446["console"]["init"][0] == {"addr": 0x40023830, "clear": 0, "set": 1}


# ------------------------------------------------------------------------------------------------
# Broken board files

GOOD = (data_dir("boards") / "mps2-an386.toml").read_text()


def _write(tmp_path: Path, text: str, name: str = "mps2-an386") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _expect_error(path: Path, *fragments: str) -> str:
    with pytest.raises(BoardError) as info:
        load_board_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    assert isinstance(info.value, InvalidInputError) and info.value.exit_code == 3
    return message


BROKEN = {
    "bad_toml": (GOOD.replace('kind = "qemu"', 'kind = "qemu'), ["invalid TOML"]),
    "missing_key": (GOOD.replace('core = "cortex-m4"\n', ""), ["cpu.core", "missing"]),
    "missing_section": (GOOD.replace("[timer]\nsystick_hz = 25000000\n", ""), ["timer", "missing"]),
    "unknown_key": (GOOD.replace("heap_bytes = 0", "heap_bytes = 0\nheap_kib = 3"), ["memory.heap_kib", "unknown key"]),
    "unknown_top_key": (GOOD.replace('kind = "qemu"', 'kind = "qemu"\nvendor = "arm"'), ["vendor", "unknown key"]),
    "wrong_type": (GOOD.replace("baud = 115200", 'baud = "115200"'), ["console.baud", "must be an integer"]),
    "flash_origin_not_int": (GOOD.replace("origin = 0x00000000", 'origin = "0x0"'),
                             ["memory.flash.origin", "must be an integer"]),
    "bool_is_not_int": (GOOD.replace("heap_bytes = 0", "heap_bytes = false"), ["memory.heap_bytes", "integer"]),
    "qemu_without_qemu_section": (GOOD.replace('[qemu]\nmachine = "mps2-an386"\n', ""), ["qemu", "missing"]),
    "bad_kind": (GOOD.replace('kind = "qemu"', 'kind = "fpga"'), ["kind", "one of"]),
    "bad_uart": (GOOD.replace('uart = "cmsdk"', 'uart = "16550"'), ["console.uart", "one of"]),
    "name_mismatch": (GOOD.replace('name = "mps2-an386"', 'name = "other"'), ["name", "file name"]),
    "float_abi_contradiction": (GOOD.replace('float_abi = "hard"', 'float_abi = "soft"'),
                                ["cpu.cflags", "contradicts"]),
    "flashing_on_qemu": (GOOD + '\n[flashing]\nmethod = "stm32-uart"\n', ["flashing", "not allowed"]),
    "negative_length": (GOOD.replace("length = 0x400000 }\nstack", "length = -1 }\nstack"),
                        ["memory.ram.length", "between"]),
    "overlap": (GOOD.replace("origin = 0x20000000", "origin = 0x00100000"), ["memory.ram", "overlaps"]),
    "stack_not_multiple_of_8": (GOOD.replace("stack_bytes = 0x2000", "stack_bytes = 0x2004"),
                                ["memory.stack_bytes", "multiple of 8"]),
    "region_beyond_4g": (GOOD.replace("origin = 0x20000000, length = 0x400000",
                                      "origin = 0xFFFFF000, length = 0x400000"), ["memory.ram", "32-bit"]),
    "table_not_table": ("timer = 5\n" + GOOD.replace("[timer]\nsystick_hz = 25000000\n", ""),
                        ["timer", "must be a table"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_board_files(tmp_path, case):
    text, fragments = BROKEN[case]
    name = "mps2-an386"
    _expect_error(_write(tmp_path, text, name), *fragments)


def test_hardware_board_checks(tmp_path):
    good = (data_dir("boards") / "nucleo-f446re.toml").read_text()
    load_board_file(_write(tmp_path, good, "nucleo-f446re"))  # a copy is fine
    _expect_error(_write(tmp_path, good.replace("{ count = 3, size = 0x20000 }", "{ count = 2, size = 0x20000 }"),
                         "nucleo-f446re"), "flashing.sectors", "ends at")
    _expect_error(_write(tmp_path, good.replace('method = "openocd"', 'method = "jtag"'), "nucleo-f446re"),
                  "flashing.method")
    _expect_error(_write(tmp_path, good.replace("[flashing]", "[flashingx]"), "nucleo-f446re"), "flashing", "missing")
    _expect_error(_write(tmp_path, good.replace("addr = 0x40023830", "addr = 0x40023831"), "nucleo-f446re"),
                  "console.init[0].addr", "aligned")
    _expect_error(_write(tmp_path, good.replace("set = 0x1\n", "set = 0x1\nmask = 3\n", 1), "nucleo-f446re"),
                  "console.init[0].mask", "unknown key")


def test_host_board_checks(tmp_path):
    host = (data_dir("boards") / "host.toml").read_text()
    _expect_error(_write(tmp_path, host.replace('uart = "stdio"', 'uart = "cmsdk"'), "host"), "console.uart")
    _expect_error(_write(tmp_path, host + "\n[cpu]\ncore = 'x'\n", "host"), "cpu", "not allowed")
    _expect_error(_write(tmp_path, GOOD.replace('uart = "cmsdk"', 'uart = "stdio"')), "console.uart", "host")


def test_unreadable_and_not_utf8(tmp_path):
    _expect_error(tmp_path / "absent.toml", "cannot read")
    path = tmp_path / "mps2-an386.toml"
    path.write_bytes(b'name = "\xff"\n')
    _expect_error(path, "UTF-8")


def test_unknown_board_lists_known_names():
    with pytest.raises(BoardError) as info:
        load_board("mps2-an999")
    message = str(info.value)
    assert "mps2-an999" in message and "mps2-an386" in message and "host" in message
    assert "\n" not in message
    with pytest.raises(BoardError):
        load_board("../boards/host")


def test_board_file_adds_and_overrides(tmp_path):
    custom = _write(tmp_path, GOOD.replace("mps2-an386", "my-board").replace("stack_bytes = 0x2000",
                                                                          "stack_bytes = 0x1000"), "my-board")
    board = load_board("my-board", [custom])
    assert board.name == "my-board" and board.memory.stack_bytes == 0x1000 and board.source == custom
    assert load_board("mps2-an386", [custom]).memory.stack_bytes == 0x2000  # others unaffected
    override = _write(tmp_path, GOOD.replace("stack_bytes = 0x2000", "stack_bytes = 0x4000"))
    assert load_board("mps2-an386", [override]).memory.stack_bytes == 0x4000
    with pytest.raises(BoardError) as info:
        load_board("nope", [custom])
    assert "my-board" in str(info.value)


def test_boards_are_frozen():
    board = load_board("mps2-an386")
    with pytest.raises(Exception):
        board.name = "x"  # type: ignore[misc]
    assert isinstance(board, Board)
    assert set(boards.UARTS) >= {"cmsdk", "pl011", "stm32", "stm32f7", "stdio"}
    assert set(UART_DRIVER_MACROS) == set(boards.UARTS)  # every UART a board may name has a driver


# ------------------------------------------------------------------------------------------------
# Linker script template


def _render(board: Board, **variables) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("linker.ld.j2").render(board=board, **variables)


@pytest.mark.parametrize("name", sorted(EXPECTED_MAPS))
def test_linker_script_renders_board_memory(name):
    board = load_board(name)
    script = _render(board, stack_bytes=0x3000, heap_bytes=0x400)
    memory = re.search(r"MEMORY\s*\{(.*?)\}", script, re.S).group(1)
    flash = re.search(r"FLASH \(rx\)\s*: ORIGIN = (0x[0-9A-F]+), LENGTH = (0x[0-9A-F]+)", memory)
    ram = re.search(r"RAM\s+\(rwx\)\s*: ORIGIN = (0x[0-9A-F]+), LENGTH = (0x[0-9A-F]+)", memory)
    assert (int(flash.group(1), 16), int(flash.group(2), 16)) == (board.memory.flash.origin, board.memory.flash.length)
    assert (int(ram.group(1), 16), int(ram.group(2), 16)) == (board.memory.ram.origin, board.memory.ram.length)
    assert "__stack_size = 0x3000;" in script and "__heap_size = 0x400;" in script
    for needle in ("KEEP(*(.isr_vector))", ".rodata.tvm", ".bss.noinit.tvm", ".noinit (NOLOAD)", ".heap (NOLOAD)",
                   ".stack (NOLOAD)", "PHDRS", ".ARM.exidx", "AT> FLASH", "_sidata", "_sdata", "_edata", "_sbss",
                   "_ebss", "_estack", "_sstack", "__heap_start", "__heap_end", "end = .;"):
        assert needle in script, needle
    # the vector table comes first, the stack last
    assert script.index(".isr_vector :") < script.index(".text :") < script.index(".data :")
    assert script.index(".bss (NOLOAD)") < script.index(".heap (NOLOAD)") < script.index(".stack (NOLOAD)")


def test_linker_script_defaults_to_board_sizes():
    board = load_board("lm3s6965evb")
    script = _render(board)  # stack_bytes/heap_bytes undefined
    assert f"__stack_size = 0x{board.memory.stack_bytes:X};" in script
    assert _render(board, stack_bytes=None, heap_bytes=None) == script


def test_cflags_that_a_shell_would_act_on_are_refused(tmp_path):
    from mlfbuild.boards import load_board_file
    from mlfbuild.errors import BoardError

    text = (Path(__file__).resolve().parents[1] / "boards" / "mps2-an386.toml").read_text().replace('"-mthumb"', '"-mthumb; rm -rf ~"')
    path = tmp_path / "mps2-an386.toml"
    path.write_text(text)
    with pytest.raises(BoardError, match="not a plain compiler option"):
        load_board_file(path)
