"""Size report on real firmware: every shared fixture built for the M4F board and the host, checked
against GNU size, plus budgets on the small board, the USMP on/off diff, and the HTML page in a real
headless browser. Builds are shared with test_build.py through the session `build_firmware` cache."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, buildable, entry_id, manifest_entries
from mlfbuild.build import build
from mlfbuild.errors import OverBudgetError
from mlfbuild.size import diff, size_report

pytestmark = pytest.mark.cross

EXAMPLE = REPO / "examples" / "tiny_aot.tar"
M4F = "mps2-an386"
KWS_USMP = ("tvm-0.13", "kws_aot_c_unpacked_usmp.tar")
KWS_NOUSMP = ("tvm-0.13", "kws_aot_c_unpacked_nousmp.tar")
MULTI = ("tvm-0.13", "multi_kws_ad_aot_c_usmp.tar")
FIXTURES = [item for item in manifest_entries() if buildable(item[1], M4F)]


def _report(folder: Path, **kwargs):
    return size_report(folder / "firmware.elf", json.loads((folder / "build.json").read_text()), **kwargs)


def _berkeley(tool: str, elf: Path) -> dict[str, int]:
    """text, data, bss as GNU size prints them (Berkeley format, decimal)."""
    out = subprocess.run([tool, "-B", "-d", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


def _writable_in_flash(elf: Path, flash_end: int) -> int:
    """Bytes GNU size calls data that never reach RAM: writable sections that live in flash (objdump
    -h: CONTENTS without READONLY at a flash address)."""
    out = subprocess.run(["arm-none-eabi-objdump", "-h", str(elf)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    total = 0
    for i, line in enumerate(lines):
        match = re.match(r"\s*\d+\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if not match or i + 1 >= len(lines):
            continue
        size, vma = int(match.group(2), 16), int(match.group(3), 16)
        flags = lines[i + 1]
        if "ALLOC" in flags and "CONTENTS" in flags and "READONLY" not in flags and vma < flash_end:
            total += size
    return total


def _check_every_byte(report) -> None:
    for region in (report.flash, report.ram):
        assert sum(region.by_category.values()) == region.used, region.name
        assert sum(s["size"] for s in region.sections) == region.used
    assert sum(i.flash for i in report.items) == report.flash.used
    assert sum(i.ram for i in report.items) == report.ram.used
    assert sum(c["flash"] for c in report.categories()) == report.flash.used
    assert sum(c["ram"] for c in report.categories()) == report.ram.used


@pytest.mark.parametrize("item", FIXTURES, ids=entry_id)
def test_every_fixture_totals_equal_size_and_every_byte_has_an_owner(item, fixtures_dir, build_firmware):
    fixture_set, entry = item
    out = build_firmware(fixtures_dir / fixture_set / entry["file"], M4F)
    report = _report(out)
    gnu = _berkeley("arm-none-eabi-size", out / "firmware.elf")
    assert report.berkeley == gnu
    assert report.flash.used == gnu["text"] + gnu["data"]
    # RAM = data + bss, less what GNU size miscounts: a writable .rodata (TVM < 0.17's non-const
    # USMP constant pool) lives in flash; the report says so in a note.
    in_flash = _writable_in_flash(out / "firmware.elf", report.flash.total)
    assert report.ram.used == gnu["data"] + gnu["bss"] - in_flash
    assert any("READONLY" in n for n in report.notes) == bool(in_flash)
    _check_every_byte(report)
    assert report.flash.by_category.get("other", 0) == 0 and report.ram.by_category.get("other", 0) == 0
    record = json.loads((out / "build.json").read_text())
    # the .stack reserve the build chose (computed bound + margin, else the board's), inside ram.used
    assert report.ram.by_category["stack"] == record["stack"]["reserve"] > 0
    categories = {c["name"] for c in report.categories() if c["flash"] or c["ram"]}
    assert {"model", "runtime", "board", "app", "libc", "stack"} <= categories
    # Predicted vs linked, per module: every module of the MLF, every metadata figure.
    modules = {m.name: m for m in report.modules}
    for module in record["library"]["modules"]:
        rows = modules[module["name"]].memory
        if module["memory"]["main"]:
            assert {r.kind for r in rows} == {"workspace", "constants", "io"}
            assert all(r.explanation for r in rows)
        listed = [o for o in modules[module["name"]].operators if o.in_metadata]
        assert len(listed) == len(module["memory"]["operator_functions"])
        assert any(o.code_bytes for o in listed)
    assert report.to_json()["flash"]["used"] == report.flash.used


def test_multi_module_predicted_vs_linked(fixtures_dir, build_firmware):
    out = build_firmware(fixtures_dir.joinpath(*MULTI), M4F)
    report = _report(out)
    library = {m["name"]: m for m in json.loads((out / "build.json").read_text())["library"]["modules"]}
    modules = {m.name: m for m in report.modules}
    assert set(modules) == {"kws", "ad"}
    for name, module in modules.items():
        rows = {r.kind: r for r in module.memory}
        # USMP: each module's own pools, told apart by compile unit though both are named global_*;
        # TVM's size is the prediction, the pool as linked is TVM's or mlfbuild's re-plan.
        assert rows["workspace"].linked == module.pool["bytes"] == module.by_subcategory["USMP workspace pool"]["ram"]
        assert rows["workspace"].predicted == module.pool["tvm_bytes"]
        assert rows["constants"].linked == rows["constants"].predicted == module.by_subcategory["constants"]["flash"]
        tensors = library[name]["inputs"] + library[name]["outputs"]
        assert rows["io"].linked == sum(t["size_bytes"] for t in tensors) == module.by_subcategory["io buffers"]["ram"]
        assert rows["io"].predicted != rows["io"].linked and "docs/size-report.md" in rows["io"].explanation
    pools = [i for i in report.items if i.name == "global_workspace"]
    assert sorted(i.module for i in pools) == ["ad", "kws"]
    text = report.format_text()
    assert "model kws (aot, USMP)" in text and "model ad (aot, USMP)" in text


def test_usmp_on_off_diff_shows_the_workspace_change(fixtures_dir, build_firmware):
    base = _report(build_firmware(fixtures_dir.joinpath(*KWS_NOUSMP), M4F)).to_json()
    current = _report(build_firmware(fixtures_dir.joinpath(*KWS_USMP), M4F)).to_json()
    changes = diff(base, current)
    subs = {(s["category"], s["subcategory"]): s for s in changes.subcategories}
    pool = subs[("model", "workspace pool")]
    usmp = subs[("model", "USMP workspace pool")]
    assert pool["ram_current"] == 0 and pool["ram_delta"] == -pool["ram_base"] and pool["ram_base"] > 100_000
    assert usmp["ram_base"] == 0 and usmp["ram_delta"] == 56_192  # TVM's 104,192 B re-planned
    workspace = next(m for m in changes.modules if m["kind"] == "workspace")
    assert workspace["current_linked"] == 56_192 and workspace["base_linked"] == pool["ram_base"]
    names = [s["name"] for s in changes.symbols[:3]]
    assert "mlf_kws_arena" in names and "global_workspace" in names
    assert "compared as 'kws'" in " ".join(changes.caveats)
    text = changes.format_text()
    assert "model/workspace pool" in text and "model/USMP workspace pool" in text and "+56,192" in text
    markdown = changes.format_markdown()
    assert "| model/USMP workspace pool | 0 | +56,192 |" in markdown


def test_model_too_big_for_the_small_board_and_fine_on_the_big_one(fixtures_dir, build_firmware, tmp_path):
    mlf = fixtures_dir.joinpath(*KWS_NOUSMP)
    # kws without USMP needs ~100 KiB of workspace; lm3s6965evb has 64 KiB of RAM: the linker refuses first.
    with pytest.raises(OverBudgetError, match="(?i)ram"):
        build(mlf, "lm3s6965evb", tmp_path / "lm3s")
    # The same model on the M4F board fits, with no warning …
    out = build_firmware(mlf, M4F)
    fits = _report(out)
    fits.raise_if_over_budget()
    assert not fits.warnings
    # … and the budget gate with the small board's RAM as budget says by how much and what is big.
    small = _report(out, budget_ram=64 * 1024)
    with pytest.raises(OverBudgetError) as caught:
        small.raise_if_over_budget()
    assert caught.value.exit_code == 5
    table = caught.value.table
    assert f"+{small.ram.used - 65536:,}" in table
    biggest = table.split("biggest in ram:")[1].splitlines()[1]
    assert "mlf_default_arena" in biggest and "105,360" in biggest


def test_budget_gate_on_the_small_board_where_it_links(fixtures_dir, build_firmware):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "mlp_aot_c_unpacked_nousmp.tar", "lm3s6965evb")
    report = _report(out)
    assert report.flash.total == 256 * 1024 and report.ram.total == 64 * 1024
    report.raise_if_over_budget()
    with pytest.raises(OverBudgetError) as caught:
        _report(out, budget_flash=report.flash.used - 1).raise_if_over_budget()
    assert "over by" in caught.value.table and "+1 " in caught.value.table
    warned = _report(out, budget_ram=int(report.ram.used / 0.92))
    assert warned.warnings and warned.warnings[0].startswith("ram is 92")
    warned.raise_if_over_budget()


def test_host_build(build_firmware):
    out = build_firmware(EXAMPLE, "host")
    report = _report(out)
    gnu = _berkeley("size", out / "firmware.elf")
    assert report.berkeley == gnu
    assert report.flash.used == gnu["text"] + gnu["data"] and report.ram.used == gnu["data"] + gnu["bss"]
    assert report.flash.total is None
    _check_every_byte(report)
    rows = {r.kind: r for r in report.modules[0].memory}
    assert rows["workspace"].linked == rows["workspace"].predicted
    assert report.flash.by_category["model"] > 0 and report.ram.by_category["model"] > 0


def test_html_page_renders_its_charts_in_headless_chromium(fixtures_dir, build_firmware, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        message = "no headless Chromium (Debian: apt-get install -y chromium; scripts/setup.sh --test installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    report = _report(build_firmware(fixtures_dir.joinpath(*KWS_USMP), M4F), budget_ram=256 * 1024)
    page = tmp_path / "size.html"
    page.write_text(report.format_html())
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--user-data-dir=" + str(tmp_path / "profile"), "--virtual-time-budget=3000"]
    dom = subprocess.run(command + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90).stdout
    # The page's own script measures its SVGs once laid out: bars and treemaps with a real size.
    match = re.search(r'data-rendered="(\d+) (\d+) (\d+)"', dom)
    assert match, dom[:2000]
    charts, segments, tiles = (int(v) for v in match.groups())
    assert charts == 4 and segments >= 8 and tiles >= 40  # 2 bars + 2 treemaps, all with a real size
    assert 'id="bar-ram"' in dom and 'id="treemap-flash"' in dom
    shot = tmp_path / "size.png"
    subprocess.run(command + ["--window-size=1000,1400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=90)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
