"""An independent check of a pool plan against the running code: the module's C built natively under
AddressSanitizer with every region the plan claims as an allocation of its own, exactly as many bytes
as the plan gives it, and poisoned during every operator call the plan says it is not live in.

It shares nothing with the static analysis but the claims it checks (each region's literal offset in
the source, its size, its live steps, each operator call's steps): a read or write past a region's
planned bytes is a heap-buffer-overflow, a touch of a region during a call outside its planned life
a use-after-poison, and the run's outputs must equal the same code's with TVM's own layout. Operator
calls are found at run time from gcc's -finstrument-functions hooks (tvmgen_<mod>_run is depth 1, the
AOT main 2, its operators 3). Lifetimes inside one operator call are checked by that output
comparison, not by poisoning.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

_HOOKS = r"""
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <stddef.h>
#define NO_HOOK __attribute__((no_instrument_function))
extern uint8_t* mlfchk_pool_base(void);
static const long sizes[] = {%(sizes)s};
static const int first_step[] = {%(firsts)s}, last_step[] = {%(lasts)s};
static const int call_first[] = {%(call_firsts)s}, call_last[] = {%(call_lasts)s};
static uint8_t* regions[%(count)d];
static int depth, call = -1;
NO_HOOK static void poison_all(void) {
  for (int k = 0; k < %(count)d; ++k) ASAN_POISON_MEMORY_REGION(regions[k], sizes[k]);
}
NO_HOOK ptrdiff_t mlfchk_offset(int k) {
  if (!regions[k]) { regions[k] = malloc(sizes[k] ? sizes[k] : 1); ASAN_POISON_MEMORY_REGION(regions[k], sizes[k]); }
  return regions[k] - mlfchk_pool_base();
}
NO_HOOK void mlfchk_init(void) { for (int k = 0; k < %(count)d; ++k) mlfchk_offset(k); poison_all(); }
NO_HOOK void __cyg_profile_func_enter(void* fn, void* site) {
  (void)fn; (void)site;
  if (++depth != 3) return;
  ++call;
  if (call >= %(calls)d) { fprintf(stderr, "mlfchk: more operator calls than the plan knows\n"); abort(); }
  for (int k = 0; k < %(count)d; ++k) {
    int live = first_step[k] <= call_last[call] && call_first[call] <= last_step[k];
    if (live) ASAN_UNPOISON_MEMORY_REGION(regions[k], sizes[k]);
  }
}
NO_HOOK void __cyg_profile_func_exit(void* fn, void* site) {
  (void)fn; (void)site;
  if (depth-- == 3) poison_all();
}
"""

_HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include "tvmgen_%(mod)s.h"
%(buffers)s
void mlfchk_init(void);
int main(void) {
  uint32_t seed = 12345u;
  %(fill)s
  struct tvmgen_%(mod)s_inputs inputs = {%(inputs)s};
  struct tvmgen_%(mod)s_outputs outputs = {%(outputs)s};
  %(init)s
  int status = tvmgen_%(mod)s_run(&inputs, &outputs);
  %(dump)s
  printf("\nstatus %%d\n", status);
  return status;
}
"""


def build_and_run(module, sources: dict[str, str], pool, include_dirs: list[Path], out: Path,
                  cmsis_nn_sources: list[Path] = (), checked: bool = True) -> str:
    """Build the module natively (checked: each planned region its own poisoned allocation) and run it
    once on fixed pseudo-random inputs; its stdout (outputs in hex, status), or AssertionError with
    AddressSanitizer's report."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    edits = {}
    if checked:
        for index, region in enumerate(pool.regions):
            for site in region.sites:
                edits.setdefault(site.path, []).append((site.start, site.end, f"mlfchk_offset({index})"))
        for site in pool.untouched:
            edits.setdefault(site.path, []).append((site.start, site.end, "0"))
    for number, (path, text) in enumerate(sorted(sources.items())):
        for start, end, new in sorted(edits.get(path, []), reverse=True):
            text = text[:start] + new + text[end:]
        if checked and pool.declaration and path == pool.declaration.path:
            text += "\n#include <stddef.h>\nptrdiff_t mlfchk_offset(int);\n__attribute__((no_instrument_function)) uint8_t* mlfchk_pool_base(void) { return global_workspace; }\n"
        elif checked and path in edits:
            text = "#include <stddef.h>\nptrdiff_t mlfchk_offset(int);\n" + text
        target = out / f"model{number}.c"
        target.write_text(text, errors="surrogateescape")
        written.append(target)
    harness = out / "harness.c"
    harness.write_text(_harness(module, checked))
    flags = ["-O0", "-g", "-fsanitize=address", "-fno-omit-frame-pointer", "-w", "-std=gnu11"]
    includes = [arg for folder in include_dirs for arg in ("-I", str(folder))]
    command = ["gcc", *flags, *includes, *map(str, written), str(harness), *map(str, cmsis_nn_sources), "-lm",
               "-o", str(out / "model")]
    if checked:
        hooks = out / "hooks.c"
        hooks.write_text(_hooks(pool))
        command[1:1] = []
        instrumented = ["gcc", *flags, "-finstrument-functions", *includes, "-c"]
        objects = []
        for source in written:
            subprocess.run([*instrumented, str(source), "-o", str(source.with_suffix(".o"))], check=True)
            objects.append(source.with_suffix(".o"))
        command = ["gcc", *flags, *includes, *map(str, objects), str(harness), str(hooks), *map(str, cmsis_nn_sources),
                   "-lm", "-o", str(out / "model")]
    subprocess.run(command, check=True, capture_output=True, text=True)
    done = subprocess.run([str(out / "model")], capture_output=True, text=True, timeout=300,
                          env={"ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1"})
    assert done.returncode == 0, f"the checked run failed:\n{done.stderr[-3000:]}"
    return done.stdout


def _harness(module, checked: bool) -> str:
    buffers, fill, dump = [], [], []
    for kind, tensors in (("in", module.inputs), ("out", module.outputs)):
        for index, tensor in enumerate(tensors):
            buffers.append(f"static uint8_t {kind}{index}[{tensor.nbytes}] __attribute__((aligned(16)));")
            if kind == "in":
                fill.append(f"for (int i = 0; i < {tensor.nbytes}; ++i) {{ seed = seed * 1103515245u + 12345u; "
                            f"in{index}[i] = (uint8_t)(seed >> 16); }}")
            else:
                dump.append(f'for (int i = 0; i < {tensor.nbytes}; ++i) printf("%02x", out{index}[i]);')
    return _HARNESS % {
        "mod": module.name, "buffers": "\n".join(buffers), "fill": "\n  ".join(fill), "dump": "\n  ".join(dump),
        "inputs": ", ".join(f".{t.c_name} = in{i}" for i, t in enumerate(module.inputs)),
        "outputs": ", ".join(f".{t.c_name} = out{i}" for i, t in enumerate(module.outputs)),
        "init": "mlfchk_init();" if checked else ""}


def _hooks(pool) -> str:
    regions = pool.regions
    return _HOOKS % {
        "count": len(regions), "sizes": ", ".join(str(r.size) for r in regions) or "0",
        "firsts": ", ".join(str(r.first) for r in regions) or "0", "lasts": ", ".join(str(r.last) for r in regions) or "0",
        "calls": len(pool.call_spans), "call_firsts": ", ".join(str(s[1]) for s in pool.call_spans) or "0",
        "call_lasts": ", ".join(str(s[2]) for s in pool.call_spans) or "0"}
