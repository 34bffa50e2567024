"""Meaning-preserving edits of TVM's generated C, the corpus the re-plan must never be wrong on.

Each takes the module's sources and returns them edited; the code computes exactly what it did
before. They are written against the shape TVM emits (one statement per line, two-space indents,
`}` alone on the line that closes a block) and change nothing they do not recognise. A re-plan of the
edited code may keep TVM's layout; it may never overlap live tensors.
"""

from __future__ import annotations

import re

_MAIN_CALL = re.compile(r"^(\s*if \()(tvmgen_\w+)\((.*)\)( != 0 \) return -1;)$")
_FOR = re.compile(r"^(\s*)for \((int32_t|int64_t|int) (\w+) = ([^;]+); \3 < ([^;]+); \+\+\3\) \{$")
_CARVE = re.compile(r"^\s*void\* (sid_\w+) = \(&\(global_workspace_\w+\[\d+\]\)\);$")
_REGION_ARGUMENT = re.compile(r"\bsid_\w+\b")


def _map_lines(sources: dict[str, str], edit) -> dict[str, str]:
    return {path: "\n".join(edit(text.split("\n"))) for path, text in sources.items()}


def _main_arguments(sources: dict[str, str], wrap) -> dict[str, str]:
    def edit(lines):
        out = []
        for line in lines:
            call = _MAIN_CALL.match(line)
            if call:
                arguments = ", ".join(_REGION_ARGUMENT.sub(lambda m: wrap(m.group(0)), a.strip())
                                      for a in call.group(3).split(","))
                line = f"{call.group(1)}{call.group(2)}({arguments}){call.group(4)}"
            out.append(line)
        return out
    return _map_lines(sources, edit)


def offset_zero_arithmetic(sources):
    """`sid_10_let` handed as `(void*)((int8_t*)sid_10_let + 0)`."""
    return _main_arguments(sources, lambda name: f"(void*)((int8_t*){name} + 0)")


def casts_and_parentheses(sources):
    """`sid_1_let` handed as `((int8_t*)(sid_1_let))`."""
    return _main_arguments(sources, lambda name: f"((int8_t*)(({name})))")


def aliases_through_locals(sources):
    """Every region handed through a local pointer set just before the call."""
    def edit(lines):
        out, count = [], 0
        for line in lines:
            call = _MAIN_CALL.match(line)
            if call:
                names = sorted(set(_REGION_ARGUMENT.findall(call.group(3))))
                for name in names:
                    count += 1
                    out.append(f"  int8_t* alias_{count}_{name} = (int8_t*){name};")
                for name in names:
                    line = re.sub(rf"\b{name}\b", f"alias_{count - len(names) + names.index(name) + 1}_{name}", line)
            out.append(line)
        return out
    return _map_lines(sources, edit)


def reordered_carves(sources):
    """The main's region declarations in the opposite order (they are independent)."""
    def edit(lines):
        carves = [i for i, line in enumerate(lines) if _CARVE.match(line)]
        if len(carves) < 2 or carves != list(range(carves[0], carves[-1] + 1)):
            return lines
        return lines[:carves[0]] + lines[carves[0]:carves[-1] + 1][::-1] + lines[carves[-1] + 1:]
    return _map_lines(sources, edit)


def _rewrite_loops(sources, rewrite):
    def edit(lines):
        out, index = [], 0
        while index < len(lines):
            loop = _FOR.match(lines[index])
            if not loop:
                out.append(lines[index])
                index += 1
                continue
            indent = loop.group(1)
            end = next(j for j in range(index + 1, len(lines)) if lines[j] == f"{indent}}}")
            body = edit(lines[index + 1:end])
            out += rewrite(indent, loop.group(2), loop.group(3), loop.group(4), loop.group(5), body)
            index = end + 1
        return out
    return _map_lines(sources, edit)


def loops_declared_outside(sources):
    """`for (int32_t i = 0; i < 64; ++i)` as `int32_t i = 0; for (i = 0; i < 64; ++i)` in a block."""
    return _rewrite_loops(sources, lambda ind, ty, var, start, stop, body: [
        f"{ind}{{ {ty} {var} = 0;", f"{ind}for ({var} = {start}; {var} < {stop}; ++{var}) {{", *body, f"{ind}}} }}"])


def loops_as_while(sources):
    """The same loop as `while (i < 64) { ...; i = i + 1; }`."""
    return _rewrite_loops(sources, lambda ind, ty, var, start, stop, body: [
        f"{ind}{{ {ty} {var} = {start};", f"{ind}while ({var} < {stop}) {{", *body, f"{ind}  {var} = {var} + 1;",
        f"{ind}}} }}"])


def loops_as_do_while(sources):
    """The same loop as `do { ... } while (++i < 64);` (TVM's loops all run at least once)."""
    return _rewrite_loops(sources, lambda ind, ty, var, start, stop, body: [
        f"{ind}{{ {ty} {var} = {start};", f"{ind}do {{", *body, f"{ind}}} while (++{var} < {stop}); }}"])


def loops_flipped(sources):
    """The comparison written the other way round and the step as `i += 1`."""
    return _rewrite_loops(sources, lambda ind, ty, var, start, stop, body: [
        f"{ind}for ({ty} {var} = {start}; ({stop}) > {var}; {var} += 1) {{", *body, f"{ind}}}"])


def file_scope_pointer(sources):
    """A file-scope pointer into the pool that the first operator with a loop reads: after a re-plan
    it would read another tensor, so the pool must be kept."""
    edited = dict(sources)
    for path, text in sources.items():
        marker = "static uint8_t global_workspace["
        if marker in text:
            end = text.index(";", text.index(marker)) + 1
            edited[path] = text[:end] + "\nuint8_t* const mlf_keep = &global_workspace[128];" + text[end:]
    for path, text in edited.items():
        match = re.search(r"^(TVM_DLL int32_t tvmgen_\w+\([^)]*\) \{\n)(  for )", text, re.M)
        if match and "global_workspace[" not in text:
            edited[path] = (text[:match.end(1)] + "  extern uint8_t* const mlf_keep; volatile uint8_t mlf_seen = mlf_keep[0];"
                            " (void)mlf_seen;\n" + text[match.end(1):])
            break
    return edited


PRESERVING = [offset_zero_arithmetic, casts_and_parentheses, aliases_through_locals, reordered_carves,
              loops_declared_outside, loops_as_while, loops_as_do_while, loops_flipped]
