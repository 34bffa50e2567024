"""How far a function of TVM's generated C indexes one pointer, proven from the code.

TVM's C code generator writes operator bodies as nested `for (int32_t i = A; i < B; ++i) {` loops,
`int32_t cse_var_1 = (...);` lets, `if (...) { } else { }` and array accesses `p0[expr]` or
`((int32_t*)pad_temp_let)[expr]`, one statement per line. Interval arithmetic over those loops and
lets (narrowed by the comparisons an `if` tests) bounds every index; the extent is the largest
index + 1 times the element size. The answer is "not known" — never a guess — as soon as the code
leaves that shape: the pointer is used other than by indexing, an index reads memory or a variable
that changes, a loop is not a counted for loop, an index may be negative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INT_TYPES = {"int8_t": (-2**7, 2**7 - 1), "uint8_t": (0, 2**8 - 1), "int16_t": (-2**15, 2**15 - 1),
             "uint16_t": (0, 2**16 - 1), "int32_t": (-2**31, 2**31 - 1), "uint32_t": (0, 2**32 - 1),
             "int64_t": (-2**63, 2**63 - 1), "uint64_t": (0, 2**64 - 1), "int": (-2**31, 2**31 - 1)}
ELEMENT_BYTES = {"int8_t": 1, "uint8_t": 1, "char": 1, "bool": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
                 "uint32_t": 4, "float": 4, "int64_t": 8, "uint64_t": 8, "double": 8}
_FOR = re.compile(r"^for \((?:int32_t|int64_t|int) (\w+) = (.+?); \1 < (.+?); \+\+\1\) \{$")
_IF = re.compile(r"^if \((.*)\) \{$")
_LET = re.compile(r"^(?:" + "|".join(INT_TYPES) + r") (\w+) = (.+);$")
_DECLARE = re.compile(r"^(?:const )?[\w]+\*? (\w+);$")
_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_]\w*)|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()?:<>!&\[\]]))")


@dataclass(frozen=True)
class _Let:
    """`int32_t cse_var_1 = (i2 * 64);`: kept as its expression and evaluated where it is used, so an
    `if` that narrows i2 between the two narrows cse_var_1 too (loop variables do not change inside
    their body, and lets are not reassigned)."""

    text: str
    depth: int  # the scope it was defined in


class NotProven(Exception):
    """The code leaves the shape this reading proves things about."""


@dataclass(frozen=True)
class Interval:
    low: int
    high: int

    def __add__(self, other: "Interval") -> "Interval":
        return Interval(self.low + other.low, self.high + other.high)

    def __sub__(self, other: "Interval") -> "Interval":
        return Interval(self.low - other.high, self.high - other.low)

    def __mul__(self, other: "Interval") -> "Interval":
        products = [a * b for a in (self.low, self.high) for b in (other.low, other.high)]
        return Interval(min(products), max(products))

    def union(self, other: "Interval") -> "Interval":
        return Interval(min(self.low, other.low), max(self.high, other.high))


def _c_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def pointer_extent(body: str, name: str, element: str | None) -> tuple[int | None, str]:
    """Bytes `body` can touch through pointer `name` (element type `element`, or the type each access
    casts it to), or None and why not."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):  # it goes into patterns below as a word
        return None, f"{name!r} is not a C identifier"
    try:
        highest, size = _highest_index(body, name, element)
    except NotProven as why:
        return None, str(why)
    if highest is None:
        return None, f"{name} is never indexed"
    return (highest + 1) * size, ""


def _highest_index(body: str, name: str, element: str | None) -> tuple[int | None, int]:
    access = re.compile(r"(?:\(\((\w+)\*\)" + name + r"\)|\b" + name + r")\[")
    scopes: list[dict[str, Interval | None]] = [{}]
    # A scalar assigned again, or stepped, anywhere but in a for loop's own header has no one range.
    statements = re.sub(r"for \(.*?\) \{", "", body)
    reassigned = set(re.findall(r"^\s*(\w+)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", statements, re.M))
    reassigned |= {name for pair in re.findall(r"(?:\+\+|--)\s*(\w+)|(\w+)\s*(?:\+\+|--)", statements)
                   for name in pair if name}
    highest, size = None, 0
    for raw in body.split("\n"):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        for match in access.finditer(line):
            if re.search(r"&\s*\(*\s*$", line[:match.start()]):
                raise NotProven(f"the address of an element of {name} is taken ({line.strip()[:60]!r})")
            ctype = match.group(1) or element
            if ctype not in ELEMENT_BYTES:
                raise NotProven(f"the element type of {name} is not known")
            guarded = list(scopes)
            for condition in _ternary_conditions(line, match.start()):
                guarded.append(_narrowed(condition, guarded))
            if any(isinstance(scope, _Narrowed) and scope.unreachable for scope in guarded):
                continue  # a loop that never runs, or a condition no value meets
            index = _evaluate(_bracketed(line, match.end()), guarded)
            if index.low < 0:
                raise NotProven(f"an index of {name} may be negative")
            highest = index.high if highest is None else max(highest, index.high)
            size = max(size, ELEMENT_BYTES[ctype])
        if len(re.findall(rf"\b{name}\b", line)) != len(access.findall(line)):
            if not re.match(rf"^void\* {name} = \(&\(\w+\[\d+\]\)\);$", line):
                raise NotProven(f"{name} is used other than by indexing ({line[:60]!r})")
        _step(line, scopes, reassigned)
    return highest, size


def _step(line: str, scopes: list[dict], reassigned: set[str]) -> None:
    """Follow the scopes: loops and ifs open one with their variables' ranges, `}` closes one."""
    if line == "}":
        scopes.pop()
        if not scopes:
            raise NotProven("unbalanced braces")
        return
    if line == "} else {":
        outer_unreachable = any(isinstance(scope, _Narrowed) and scope.unreachable for scope in scopes[:-1])
        scopes[-1] = _Narrowed(unreachable=outer_unreachable)
        return
    loop = _FOR.match(line)
    if loop:
        if loop.group(1) in reassigned:
            raise NotProven(f"loop variable {loop.group(1)} changes inside its loop")
        start, stop = _evaluate(loop.group(2), scopes), _evaluate(loop.group(3), scopes)
        if stop.high - 1 >= start.low:
            scopes.append({loop.group(1): Interval(start.low, stop.high - 1)})
        else:
            scopes.append(_Narrowed(unreachable=True))
        return
    branch = _IF.match(line)
    if branch:
        scopes.append(_narrowed(branch.group(1), scopes))
        return
    if line.endswith("{"):
        if re.match(r"^(while|do|switch)\b", line):
            raise NotProven(f"a loop that is not a counted for loop ({line[:60]!r})")
        scopes.append({})
        return
    let = _LET.match(line)
    if let:
        scopes[-1][let.group(1)] = None if let.group(1) in reassigned else _Let(let.group(2), len(scopes) - 1)
        return
    declared = _DECLARE.match(line)
    if declared:
        scopes[-1][declared.group(1)] = None


def _ternary_conditions(line: str, position: int) -> list[str]:
    """Conditions of the `(cond ? then : else)` groups whose `then` holds `position`, outermost first:
    TVM 0.13 writes padding as `(((1 <= i1) && (i1 < 26)) ? p0[...] : (int16_t)0)`."""
    conditions, opens = [], []
    for index, char in enumerate(line[:position]):
        if char == "(":
            opens.append(index)
        elif char == ")" and opens:
            opens.pop()
    for start in opens:
        end = _closing(line, start)
        if end < position:
            continue
        depth, question, colon = 0, -1, -1
        for index in range(start + 1, end):
            depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(line[index], 0)
            if depth == 0 and line[index] == "?" and question < 0:
                question = index
            elif depth == 0 and line[index] == ":" and question >= 0 and colon < 0:
                colon = index
        if 0 <= question < position < colon:
            conditions.append(line[start + 1:question])
    return conditions


def _bracketed(line: str, start: int) -> str:
    depth, end = 1, start
    while end < len(line) and depth:
        depth += {"[": 1, "]": -1}.get(line[end], 0)
        end += 1
    if depth:
        raise NotProven("an index spans lines")
    return line[start:end - 1]


def _narrowed(condition: str, scopes: list[dict]) -> "_Narrowed":
    """Ranges of variables inside `if (condition)`: each `v < e`, `e <= v`... of a top-level && chain."""
    narrowed = _Narrowed()
    for atom in _conjuncts(condition):
        match = re.fullmatch(r"\(?\s*(.+?)\s*(<=|<|>=|>)\s*(.+?)\s*\)?", atom)
        if not match:
            continue
        left, op, right = match.groups()
        for var, bound, flipped in ((left, right, False), (right, left, True)):
            if not re.fullmatch(r"\w+", var) or re.fullmatch(r"\d+", var):
                continue
            current = narrowed[var] if var in narrowed else _lookup(var, scopes, quiet=True)
            try:
                limit = _evaluate(bound, scopes)
            except NotProven:
                continue
            if current is None:
                continue
            effective = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op] if flipped else op
            low, high = current.low, current.high
            if effective == "<":
                high = min(high, limit.high - 1)
            elif effective == "<=":
                high = min(high, limit.high)
            elif effective == ">":
                low = max(low, limit.low + 1)
            else:
                low = max(low, limit.low)
            if low > high:
                return _Narrowed(unreachable=True)
            narrowed[var] = Interval(low, high)
    return narrowed


def _conjuncts(condition: str) -> list[str]:
    text = condition.strip()
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith("&&", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    if len(parts) == 1:
        return parts
    return [atom for part in parts for atom in _conjuncts(part)]


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _lookup(var: str, scopes: list[dict], quiet: bool = False) -> Interval | None:
    for scope in reversed(scopes):
        if var in scope:
            value = scope[var]
            if isinstance(value, _Let):
                value = _let_value(var, value, scopes, quiet)
            if value is None and not quiet:
                raise NotProven(f"{var} does not have a known range")
            return value
    if quiet:
        return None
    raise NotProven(f"{var} is not a loop variable or a let of known range")


def _let_value(var: str, let: _Let, scopes: list[dict], quiet: bool) -> Interval | None:
    """A let's range where it is used; refused when a name it reads was defined anew since."""
    names = set(re.findall(r"[A-Za-z_]\w*", let.text))
    for scope in scopes[let.depth + 1:]:
        redefined = [n for n in names if n in scope and not isinstance(scope, _Narrowed)]
        if redefined:
            if quiet:
                return None
            raise NotProven(f"{var} reads {redefined[0]}, defined again after it")
    try:
        return _evaluate(let.text, scopes)
    except NotProven:
        if quiet:
            return None
        raise


class _Narrowed(dict):
    """The scope of an `if`: ranges of outer variables narrowed by its condition, nothing defined;
    `unreachable` when no value meets the condition (or an enclosing loop never runs)."""

    def __init__(self, unreachable: bool = False):
        super().__init__()
        self.unreachable = unreachable


def _evaluate(text: str, scopes: list[dict]) -> Interval:
    tokens = _tokens(text)
    parser = _Parser(tokens, scopes)
    value = parser.ternary()
    if parser.position != len(tokens):
        raise NotProven(f"cannot read the index {text[:60]!r}")
    return value


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise NotProven(f"cannot read the index {text[:60]!r}")
        tokens.append(next(group for group in match.groups() if group is not None))
        position = match.end()
    return tokens


class _Parser:
    """Precedence climbing over C's integer operators, each giving an Interval."""

    def __init__(self, tokens: list[str], scopes: list[dict]):
        self.tokens, self.scopes, self.position = tokens, scopes, 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise NotProven("cannot read an index")
        self.position += 1
        return token

    def ternary(self) -> Interval:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.take("?")
        then = self.ternary()
        self.take(":")
        return then.union(self.ternary())

    _LEVELS = (("||",), ("&&",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Interval:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()
            left = _apply(op, left, self.binary(level + 1))
        return left

    def unary(self) -> Interval:
        token = self.peek()
        if token == "-":
            self.take()
            value = self.unary()
            return Interval(-value.high, -value.low)
        if token == "!":
            self.take()
            self.unary()
            return Interval(0, 1)
        if token == "(" and self.tokens[self.position + 1:self.position + 2] and \
                self.tokens[self.position + 1] in INT_TYPES and self.tokens[self.position + 2:self.position + 3] == [")"]:
            ctype = self.tokens[self.position + 1]
            self.position += 3
            value = self.unary()
            low, high = INT_TYPES[ctype]
            if value.low < low or value.high > high:
                raise NotProven(f"a cast to {ctype} may wrap")
            return value
        return self.primary()

    def primary(self) -> Interval:
        token = self.take()
        if token == "(":
            value = self.ternary()
            self.take(")")
            return value
        if token.isdigit():
            return Interval(int(token), int(token))
        if re.fullmatch(r"[A-Za-z_]\w*", token):
            if self.peek() in ("[", "("):
                raise NotProven(f"an index reads memory or calls {token}")
            return _lookup(token, self.scopes)
        raise NotProven("cannot read an index")


def _apply(op: str, a: Interval, b: Interval) -> Interval:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if b.low <= 0:
            raise NotProven("a division by a value that may not be positive")
        if op == "/":
            quotients = [_c_div(x, y) for x in (a.low, a.high) for y in (b.low, b.high)]
            return Interval(min(quotients), max(quotients))
        return Interval(0 if a.low >= 0 else -(b.high - 1), min(b.high - 1, a.high) if a.low >= 0 else b.high - 1)
    if op == "&":
        if a.low < 0 or b.low < 0:
            raise NotProven("a bitwise and of a value that may be negative")
        return Interval(0, min(a.high, b.high))
    if op in ("<<", ">>"):
        if b.low < 0 or b.high > 31 or a.low < 0:
            raise NotProven("a shift outside what is read here")
        return Interval(a.low << b.low, a.high << b.high) if op == "<<" else Interval(a.low >> b.high, a.high >> b.low)
    return Interval(0, 1)  # comparisons and logic
