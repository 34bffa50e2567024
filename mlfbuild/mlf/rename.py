"""Rename a module of an unpacked MLF: a copy in which module OLD is NEW throughout.

TVM names every global of a module after it (`tvmgen_<mod>_*`, `TVMGEN_<MOD>_*`, the header
`tvmgen_<mod>.h`, the files `<mod>_lib<N>.c`, `parameters/<mod>.params`, ...), and its default
name `default` makes two models unlinkable in one image. The copy renames:

- C sources and headers by token: identifiers starting `tvmgen_<old>_` / `TVMGEN_<OLD>_` (and the
  bare `tvmgen_<old>`), the header name of `#include "tvmgen_<old>.h"`, and the names in TVM's
  system-library function registry (a string that is a table of symbol names). Comments and every
  other string literal are left as they are: they are text, not names the linker sees;
- LLVM objects through `redefine_symbols(object, {old: new})` (the toolchain's objcopy, supplied by
  the caller: this package knows no compiler);
- metadata.json (the module's key or v5's model_name, function names) and the graph's function names;
- file names carrying the module name.

The source folder is never written to.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from .limits import is_c_identifier

RedefineSymbols = Callable[[Path, dict[str, str]], None]

# One C token at a time; whatever is not a comment, literal or identifier is passed through a
# character at a time. Literals allow prefixes (L, u, U, u8) and escapes, and stop at a newline
# so a stray quote cannot swallow the file.
_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>(?:u8|[LuU])?"(?:\\.|[^"\\\n])*"?)
  | (?P<char>(?:u8|[LuU])?'(?:\\.|[^'\\\n])*'?)
  | (?P<number>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<include>\#[ \t]*include[ \t]*"[^"\n]*")
""", re.S | re.X)


def parse_renames(items: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """`OLD=NEW` items (the --module option) as pairs, each name a C identifier."""
    pairs = []
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not is_c_identifier(old) or not is_c_identifier(new):
            raise UsageError(f"--module {item!r}: expected OLD=NEW, two module names that are C identifiers "
                             "(such as --module default=kws)")
        if old != new:
            pairs.append((old, new))
    return pairs


def plan_renames(modules_per_mlf: list[list[str]], pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Which renames apply to which MLF: each OLD=NEW renames the first module named OLD not renamed
    yet, in the order the MLFs are given (so `--module default=kws --module default=ad` names the
    first MLF's `default` kws and the second's ad)."""
    plan: list[list[tuple[str, str]]] = [[] for _ in modules_per_mlf]
    for old, new in pairs:
        index = next((i for i, names in enumerate(modules_per_mlf)
                      if old in names and all(o != old for o, _ in plan[i])), None)
        if index is None:
            known = sorted({name for names in modules_per_mlf for name in names})
            raise UsageError(f"--module {old}={new}: no{' other' if any(o == old for p in plan for o, _ in p) else ''}"
                             f" module named '{old}' (the modules are {', '.join(known)})")
        if new in modules_per_mlf[index] or any(n == new for _, n in plan[index]):
            raise UsageError(f"--module {old}={new}: the MLF already has a module named '{new}'")
        plan[index].append((old, new))
    _check_renamed_names(modules_per_mlf, plan)
    return plan


def _check_renamed_names(modules_per_mlf: list[list[str]], plan: list[list[tuple[str, str]]]) -> None:
    """A new name must differ from every other module's in the image, case aside: `AD` beside `ad`
    shares the include guard TVMGEN_AD_H_ and every MLF_AD_* macro, so the compiler would refuse it."""
    final = [(index, dict(renames).get(name, name)) for index, (names, renames) in enumerate(zip(modules_per_mlf, plan))
             for name in names]
    for index, renames in enumerate(plan):
        for old, new in renames:
            twin = next((name for i, name in final if name.casefold() == new.casefold() and (i, name) != (index, new)),
                        None)
            if twin == new:
                raise UsageError(f"--module {old}={new}: another MLF has a module named '{new}' too; their "
                                 f"symbols (tvmgen_{new}_*) would clash: choose another name")
            if twin is not None:
                raise UsageError(f"--module {old}={new}: '{new}' and the module '{twin}' differ only in case; their "
                                 f"headers would share the guard TVMGEN_{new.upper()}_H_ and every "
                                 f"MLF_{new.upper()}_* macro: choose a name that differs otherwise")


def rename_modules(root: Path, dest: Path, pairs: list[tuple[str, str]],
                   redefine_symbols: RedefineSymbols | None = None) -> Path:
    """Copy the unpacked MLF at `root` to `dest` (which must not exist) with each module OLD named NEW."""
    shutil.copytree(root, dest, symlinks=False)
    for old, new in pairs:
        _rename_in_place(dest, old, new, redefine_symbols)
    return dest


def _rename_in_place(dest: Path, old: str, new: str, redefine_symbols: RedefineSymbols | None) -> None:
    others = _module_names(dest / "metadata.json")
    _rename_metadata(dest / "metadata.json", old, new, others)
    for path in sorted(dest.rglob("*")):
        if path.is_file() and path.relative_to(dest).parts[0] != "runtime":
            _rename_contents(path, old, new, others, redefine_symbols)
    for path in sorted(dest.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        renamed = _renamed_file_name(path.name, old, new)
        if renamed != path.name and path.relative_to(dest).parts[0] != "runtime":
            path.rename(path.with_name(renamed))


def rename_c(text: str, old: str, new: str, others: tuple[str, ...] = ()) -> str:
    """`text` (C) with module `old`'s names made `new`'s; comments and other strings untouched.
    `others`: the MLF's other modules, whose names may start with `old_` (their symbols stay)."""
    rename = _name_renamer(old, new, others)

    def rewrite(kind: str, token: str) -> str:
        if kind == "ident":
            return rename(token)
        if kind == "include":
            return token.replace(f'"tvmgen_{old}.h"', f'"tvmgen_{new}.h"')
        if kind == "string" and _is_function_registry(token):
            return re.sub(r"tvmgen_[A-Za-z0-9_]*", lambda m: rename(m.group(0)), token)
        return token
    return map_tokens(text, rewrite)


def map_tokens(text: str, rewrite: Callable[[str, str], str]) -> str:
    """`text` (C) with each comment, literal, identifier or include token passed through
    `rewrite(kind, token)`; everything between tokens as it was."""
    out, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            out.append(text[at])
            at += 1
            continue
        out.append(rewrite(match.lastgroup, match.group(0)))
        at = match.end()
    return "".join(out)


def _name_renamer(old: str, new: str, others: tuple[str, ...]) -> Callable[[str], str]:
    """name -> name with module `old`'s prefixes made `new`'s; a longer module name sharing the
    prefix (`kws_big` when renaming `kws`) keeps its own."""
    prefixes = {f"tvmgen_{old}_": f"tvmgen_{new}_", f"TVMGEN_{old.upper()}_": f"TVMGEN_{new.upper()}_"}
    theirs = tuple(p for other in others if other != old
                   for p in (f"tvmgen_{other}_", f"TVMGEN_{other.upper()}_", ) if p.startswith(tuple(prefixes)))

    def rename(name: str) -> str:
        if name == f"tvmgen_{old}":
            return f"tvmgen_{new}"
        if name.startswith(theirs) or name in (p[:-1] for p in theirs):
            return name
        for before, after in prefixes.items():
            if name.startswith(before):
                return after + name[len(before):]
        return name
    return rename


def _is_function_registry(literal: str) -> bool:
    """TVM's system-library registry: `"\\NNN\\000tvmgen_x_f\\000tvmgen_x_g..."`, a count then
    NUL-separated function names (c_source_module / codegen_c_host write it that way)."""
    return literal.startswith('"\\') and "\\000tvmgen_" in literal


def rename_symbol_map(symbols: set[str] | frozenset[str], old: str, new: str,
                      others: tuple[str, ...] = ()) -> dict[str, str]:
    rename = _name_renamer(old, new, others)
    return {s: rename(s) for s in symbols if rename(s) != s}


def _rename_contents(path: Path, old: str, new: str, others: tuple[str, ...],
                     redefine_symbols: RedefineSymbols | None) -> None:
    suffix = path.suffix
    if suffix in (".c", ".h", ".cc", ".cpp", ".hpp"):
        text = path.read_text(errors="surrogateescape")
        path.write_text(rename_c(text, old, new, others), errors="surrogateescape")
    elif suffix in (".graph", ".json") and path.parent.name == "graph":
        graph = json.loads(path.read_text())
        path.write_text(json.dumps(_rename_json_strings(graph, _name_renamer(old, new, others)), indent=2))
    elif suffix == ".o" and path.name.startswith(f"{old}_lib"):
        if redefine_symbols is None:
            raise UsageError(f"{path.name}: renaming a module of LLVM objects needs the toolchain's objcopy")
        from .objfile import inspect_object

        info = inspect_object(path, path.name)
        mapping = rename_symbol_map(info.symbols | info.undefined, old, new, others)
        if mapping:
            redefine_symbols(path, mapping)


def _module_names(path: Path) -> tuple[str, ...]:
    meta = json.loads(path.read_text())
    modules = meta.get("modules")
    return tuple(modules) if isinstance(modules, dict) else (meta.get("model_name"),)


def _rename_metadata(path: Path, old: str, new: str, others: tuple[str, ...]) -> None:
    meta = json.loads(path.read_text())
    modules = meta.get("modules")
    if isinstance(modules, dict):
        meta["modules"] = {(new if key == old else key): value for key, value in modules.items()}
    elif meta.get("model_name") == old:
        meta["model_name"] = new
    path.write_text(json.dumps(_rename_json_strings(meta, _name_renamer(old, new, others)), indent=2))


def _rename_json_strings(value, rename: Callable[[str], str]):
    """String values that are names of the module's functions (metadata's function_name, the graph's
    func_name and node names)."""
    if isinstance(value, dict):
        return {key: _rename_json_strings(item, rename) for key, item in value.items()}
    if isinstance(value, list):
        return [_rename_json_strings(item, rename) for item in value]
    return rename(value) if isinstance(value, str) else value


def _renamed_file_name(name: str, old: str, new: str) -> str:
    for before, after in ((f"tvmgen_{old}.h", f"tvmgen_{new}.h"), (f"{old}.params", f"{new}.params"),
                          (f"{old}.graph", f"{new}.graph"), (f"{old}.relay", f"{new}.relay")):
        if name == before:
            return after
    if name.startswith(f"{old}_lib") and re.fullmatch(r"\d+\.(c|cc|cpp|o)", name[len(old) + 4:]):
        return f"{new}_lib" + name[len(old) + 4:]
    return name


def renamed_libraries(libraries: list, pairs: list[tuple[str, str]], workdir: Path,
                      redefine_symbols: RedefineSymbols | None = None) -> list:
    """`libraries` (ModelLibrary, in the order given) with the --module renames applied: a renamed
    one is a renamed copy under `workdir`, read again."""
    if not pairs:
        return list(libraries)
    from .reader import describe

    plan = plan_renames([[m.name for m in lib.modules] for lib in libraries], pairs)
    result = []
    for index, (library, renames) in enumerate(zip(libraries, plan)):
        if renames:
            root = rename_modules(library.root, Path(workdir) / f"renamed-{index}", renames, redefine_symbols)
            library = describe(root, sha256=library.sha256)
        result.append(library)
    return result


# The section TVM puts a module's workspace pool in: one name for every module, so no linker script
# could place one model's pool apart from another's. Each module's copy gets its own, which a rule
# for TVM's name written as `*(.bss.noinit.tvm*)` still catches. The constants keep TVM's
# `.rodata.tvm`: ld matches a pattern without a wildcard exactly, so `*(.rodata.tvm)` — the rule
# scripts were written with — placed nothing once it was `.rodata.tvm.<mod>`; one model's constants
# are told apart by their object files instead (`kws_lib*(.rodata.tvm)`).
POOL_SECTIONS = (".bss.noinit.tvm",)


def module_pool_sections(text: str, module: str) -> str:
    """`text` (C) with each string literal that is exactly one of POOL_SECTIONS suffixed `.<module>`
    (".bss.noinit.tvm" -> ".bss.noinit.tvm.kws"); every other token as it was."""
    def rewrite(kind: str, token: str) -> str:
        if kind == "string" and token[0] == '"' and token[1:-1] in POOL_SECTIONS:
            return f'"{token[1:-1]}.{module}"'
        return token
    return map_tokens(text, rewrite)
