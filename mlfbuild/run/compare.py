"""Compare firmware outputs with a reference: the numbers a CI log should show."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    name: str
    max_abs_error: float
    rmse: float
    cosine: float
    top1_agree: bool
    mismatches: int
    first_mismatches: list[int]
    size: int

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_json(self) -> dict:
        return {"name": self.name, "max_abs_error": self.max_abs_error, "rmse": self.rmse, "cosine": self.cosine,
                "top1_agree": self.top1_agree, "mismatches": self.mismatches,
                "first_mismatches": self.first_mismatches, "size": self.size, "ok": self.ok}


def default_tolerances(dtype: np.dtype) -> tuple[float, float]:
    """(atol, rtol): integer models must match bit for bit; float within 1e-5."""
    return (0.0, 0.0) if np.issubdtype(dtype, np.integer) or dtype == np.bool_ else (1e-5, 1e-5)


def compare(name: str, actual: np.ndarray, expected: np.ndarray, atol: float | None = None,
            rtol: float | None = None) -> Comparison:
    default_atol, default_rtol = default_tolerances(expected.dtype)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    a = actual.astype(np.float64).reshape(-1)
    e = expected.astype(np.float64).reshape(-1)
    diff = np.abs(a - e)
    bad = np.flatnonzero(~(diff <= atol + rtol * np.abs(e)) | (np.isnan(a) != np.isnan(e)))
    norm = float(np.linalg.norm(a) * np.linalg.norm(e))
    cosine = float(np.dot(a, e) / norm) if norm > 0 else (1.0 if not np.any(a) and not np.any(e) else 0.0)
    return Comparison(name=name, max_abs_error=float(diff.max()) if diff.size else 0.0,
                      rmse=float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0, cosine=cosine,
                      top1_agree=bool(a.size == 0 or int(np.argmax(a)) == int(np.argmax(e))),
                      mismatches=int(bad.size), first_mismatches=[int(i) for i in bad[:8]], size=int(e.size))
