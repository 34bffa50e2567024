#!/usr/bin/env bash
# Set up everything (scripts/setup.sh) and run the test suite. Extra arguments go to pytest.
# The shared TVM fixtures are found through MLFBUILD_FIXTURES (default ../shared/fixtures);
# with CI=true their absence is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
fixtures="${MLFBUILD_FIXTURES:-../shared/fixtures}"
if [ "${CI:-}" = "true" ] && [ ! -d "$fixtures" ]; then
  echo "test: the shared MLF fixtures are missing at $fixtures (set MLFBUILD_FIXTURES)" >&2
  exit 1
fi
exec .venv/bin/python -m pytest -q "$@"
