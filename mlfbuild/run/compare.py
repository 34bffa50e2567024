"""Compare firmware outputs with a reference over every sample of a run: the numbers a CI log should show."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The pass rule against a reference computed from the original model by another runtime (LiteRT).
# TVM and TFLite round intermediate results differently, and a softmax turns one LSB of difference in
# its logits into many LSB of probability, so bit-exactness is not the test: a classifier-shaped
# output passes when its top-1 class agrees on at least TOP1_SHARE of the samples (a sample whose
# chosen class LiteRT scores within MODEL_DERIVED_LSB of its top is a near-tie and agrees); any other
# integer output when every value is within MODEL_DERIVED_LSB. docs/references.md has the measurements.
MODEL_DERIVED_LSB = 8
TOP1_SHARE = 0.9
EXACT, WITHIN, TOP1 = "exact", "within tolerance", "top-1"


@dataclass
class Comparison:
    name: str
    max_abs_error: float  # in LSB for integer outputs
    rmse: float
    cosine: float
    top1_agree: bool  # on every sample
    mismatches: int  # values outside the tolerance, over all samples
    first_mismatches: list[int]  # flat indices into [samples, *shape]
    size: int  # values per sample
    samples: int = 1
    exact_samples: int = 0  # samples whose every value equals the reference
    top1_agreement: int | None = None  # samples whose top-1 class agrees; None: not a classifier-shaped output
    atol: float = 0.0
    rtol: float = 0.0
    rule: str = EXACT  # exact, within tolerance, top-1 (see TOP1_SHARE)
    integer: bool = True  # differences are in LSB

    @property
    def top1_needed(self) -> int:
        return math.ceil(TOP1_SHARE * self.samples)

    @property
    def ok(self) -> bool:
        if self.rule == TOP1:
            return (self.top1_agreement or 0) >= self.top1_needed
        return self.mismatches == 0

    def failure(self) -> str:
        """Why it failed, in one phrase."""
        if self.rule == TOP1:
            return f"top-1 agrees on {self.top1_agreement} of {self.samples} samples (needs {self.top1_needed})"
        return f"{self.mismatches} of {self.size * self.samples} values differ"

    def to_json(self) -> dict:
        return {"name": self.name, "max_abs_error": self.max_abs_error, "rmse": self.rmse, "cosine": self.cosine,
                "top1_agree": self.top1_agree, "mismatches": self.mismatches,
                "first_mismatches": self.first_mismatches, "size": self.size, "ok": self.ok,
                "samples": self.samples, "exact_samples": self.exact_samples,
                "top1_agreement": self.top1_agreement, "atol": self.atol, "rtol": self.rtol, "rule": self.rule}


def default_tolerances(dtype: np.dtype, model_derived: bool = False) -> tuple[float, float]:
    """(atol, rtol): integer outputs bit for bit against a tensor file, within MODEL_DERIVED_LSB
    against the original model run by another runtime; floats within 1e-5."""
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        return (float(MODEL_DERIVED_LSB) if model_derived else 0.0), 0.0
    return 1e-5, 1e-5


def is_classifier(shape, input_elements: int) -> bool:
    """A vector of class scores: one axis of 2..1000 entries, fewer than the model reads (an
    autoencoder's output is as large as its input)."""
    axes = [d for d in shape if d != 1]
    return len(axes) == 1 and 2 <= axes[0] <= 1000 and axes[0] < input_elements


def compare(name: str, actual: np.ndarray, expected: np.ndarray, atol: float | None = None,
            rtol: float | None = None, *, model_derived: bool = False, classifier: bool = False) -> Comparison:
    """`actual` and `expected` are [samples, *shape]. A tolerance given replaces the model-derived rule."""
    integer = np.issubdtype(expected.dtype, np.integer) or expected.dtype == np.bool_
    rule = TOP1 if model_derived and classifier and integer and atol is None and rtol is None else \
        WITHIN if (atol or rtol or model_derived or not integer) else EXACT
    default_atol, default_rtol = default_tolerances(expected.dtype, model_derived)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    samples = expected.shape[0]
    a = actual.astype(np.float64).reshape(samples, -1)
    e = expected.astype(np.float64).reshape(samples, -1)
    diff = np.abs(a - e)
    bad = np.flatnonzero(~(diff <= atol + rtol * np.abs(e)) | (np.isnan(a) != np.isnan(e)))
    flat_a, flat_e = a.reshape(-1), e.reshape(-1)
    norm = float(np.linalg.norm(flat_a) * np.linalg.norm(flat_e))
    cosine = float(np.dot(flat_a, flat_e) / norm) if norm > 0 else (1.0 if not np.any(a) and not np.any(e) else 0.0)
    agree = _top1_agreement(a, e, atol if rule == TOP1 else 0.0)
    exact = int(np.sum(np.all((a == e) | (np.isnan(a) & np.isnan(e)), axis=1)))
    return Comparison(name=name, max_abs_error=float(diff.max()) if diff.size else 0.0,
                      rmse=float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0, cosine=cosine,
                      top1_agree=agree == samples, mismatches=int(bad.size),
                      first_mismatches=[int(i) for i in bad[:8]], size=int(e.shape[1]), samples=samples,
                      exact_samples=exact, top1_agreement=agree if classifier else None, atol=atol, rtol=rtol,
                      rule=rule, integer=integer)


def _top1_agreement(actual: np.ndarray, expected: np.ndarray, near: float) -> int:
    """Samples whose top class agrees: the same class, or one the reference scores within `near` of its top."""
    if not actual.shape[1]:
        return actual.shape[0]
    chosen = np.argmax(actual, axis=1)
    scored = expected[np.arange(len(chosen)), chosen]
    return int(np.sum((chosen == np.argmax(expected, axis=1)) | (scored >= expected.max(axis=1) - near)))
