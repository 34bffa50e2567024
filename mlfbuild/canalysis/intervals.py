"""Integer intervals for C arithmetic: every value a C expression may take lies inside its interval.

None stands for an unbounded side. Results that could leave the 32-bit range (where C wraps or is
undefined) become unbounded: a wrapped value can be anything, and nothing is proven from it.
"""

from __future__ import annotations

from dataclasses import dataclass

INT_MIN, INT_MAX = -(2**31), 2**32 - 1  # covers int32_t and uint32_t; beyond it a value may wrap


@dataclass(frozen=True)
class Interval:
    lo: int | None
    hi: int | None

    @staticmethod
    def of(value: int) -> "Interval":
        """A literal: exactly its value (only arithmetic may wrap)."""
        return Interval(value, value)

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def empty(self) -> bool:
        return self.lo is not None and self.hi is not None and self.lo > self.hi

    def checked(self) -> "Interval":
        if (self.lo is not None and self.lo < INT_MIN) or (self.hi is not None and self.hi > INT_MAX):
            return TOP
        return self

    def hull(self, other: "Interval") -> "Interval":
        return Interval(None if self.lo is None or other.lo is None else min(self.lo, other.lo),
                        None if self.hi is None or other.hi is None else max(self.hi, other.hi))

    def meet(self, other: "Interval") -> "Interval":
        lo = other.lo if self.lo is None else self.lo if other.lo is None else max(self.lo, other.lo)
        hi = other.hi if self.hi is None else self.hi if other.hi is None else min(self.hi, other.hi)
        return Interval(lo, hi)

    def within(self, other: "Interval") -> bool:
        low_ok = other.lo is None or (self.lo is not None and self.lo >= other.lo)
        high_ok = other.hi is None or (self.hi is not None and self.hi <= other.hi)
        return low_ok and high_ok

    def widen(self, newer: "Interval") -> "Interval":
        """Bounds that moved go to infinity, so loops reach a fixed point in few passes."""
        lo = self.lo if self.lo is not None and newer.lo is not None and newer.lo >= self.lo else None
        hi = self.hi if self.hi is not None and newer.hi is not None and newer.hi <= self.hi else None
        return Interval(lo, hi)

    def __add__(self, other: "Interval") -> "Interval":
        return Interval(_opt(self.lo, other.lo, int.__add__), _opt(self.hi, other.hi, int.__add__)).checked()

    def __neg__(self) -> "Interval":
        return Interval(None if self.hi is None else -self.hi, None if self.lo is None else -self.lo).checked()

    def __sub__(self, other: "Interval") -> "Interval":
        return self + (-other)

    def __mul__(self, other: "Interval") -> "Interval":
        if not (self.bounded and other.bounded):
            if self == ZERO or other == ZERO:
                return ZERO
            return TOP
        products = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(products), max(products)).checked()

    def divide(self, other: "Interval") -> "Interval":
        """C division (truncating toward zero) by a divisor known to be positive."""
        if not (self.bounded and other.bounded) or other.lo <= 0:
            return TOP
        quotients = [_c_div(a, b) for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(quotients), max(quotients))

    def remainder(self, other: "Interval") -> "Interval":
        if not other.bounded or other.lo <= 0:
            return TOP
        if self.lo is not None and self.lo >= 0:
            return Interval(0, other.hi - 1 if self.hi is None else min(self.hi, other.hi - 1))
        return Interval(-(other.hi - 1), other.hi - 1)

    def shift_left(self, other: "Interval") -> "Interval":
        if not (self.bounded and other.bounded) or self.lo < 0 or other.lo < 0 or other.hi > 31:
            return TOP
        return Interval(self.lo << other.lo, self.hi << other.hi).checked()

    def shift_right(self, other: "Interval") -> "Interval":
        if not other.bounded or self.lo is None or self.lo < 0 or other.lo < 0 or other.hi > 31:
            return TOP
        return Interval(self.lo >> other.hi, None if self.hi is None else self.hi >> other.lo)

    def bit_and(self, other: "Interval") -> "Interval":
        highs = [i.hi for i in (self, other) if i.lo is not None and i.lo >= 0 and i.hi is not None]
        return Interval(0, min(highs)) if highs else TOP


def _opt(a, b, op):
    return None if a is None or b is None else op(a, b)


def _c_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


TOP = Interval(None, None)
ZERO = Interval(0, 0)
BOOL = Interval(0, 1)
