#!/usr/bin/env bash
# Set up everything (scripts/setup.sh) and run the test suite. Extra arguments go to pytest.
# The shared TVM fixtures, CMSIS-NN trees and original .tflite models are found through
# MLFBUILD_FIXTURES, MLFBUILD_THIRD_PARTY and MLFBUILD_MODELS (defaults ../shared/fixtures,
# ../shared/third_party, ../shared/models); with CI=true their
# absence is a failure, not a skip. Elsewhere the tests that need them are skipped and the run ends
# with a note saying how many (tests/conftest.py).
# The tests run in one pytest-xdist worker per core, each test file on one worker (its module
# fixtures are then made once); `-n 0` among the extra arguments runs them in this one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
fixtures="${MLFBUILD_FIXTURES:-../shared/fixtures}"
third_party="${MLFBUILD_THIRD_PARTY:-../shared/third_party}"
if [ "${CI:-}" = "true" ] && [ ! -d "$fixtures" ]; then
  echo "test: the shared MLF fixtures are missing at $fixtures (set MLFBUILD_FIXTURES)" >&2
  exit 1
fi
if [ "${CI:-}" = "true" ] && [ ! -d "$third_party" ]; then
  echo "test: the shared third-party libraries (CMSIS-NN) are missing at $third_party (set MLFBUILD_THIRD_PARTY)" >&2
  exit 1
fi
models="${MLFBUILD_MODELS:-../shared/models}"
if [ "${CI:-}" = "true" ] && [ ! -d "$models" ]; then
  echo "test: the original .tflite models are missing at $models (set MLFBUILD_MODELS)" >&2
  exit 1
fi
exec .venv/bin/python -m pytest -q -n auto --dist loadfile "$@"
