#!/usr/bin/env bash
# The Python Array API standard's own test suite (data-apis/array-api-tests, vendored under
# tests/array_api/ at a pinned commit, see tests/array_api/VENDORED.md) against uops.array_api on
# the CPU device. Fetches nothing. A fixed hypothesis seed and a bounded example count keep runs
# repeatable; tests/array_api/xfails.txt lists the documented limits, each with its reason.
#   bash bench/array_api.sh                 # the whole suite
#   bash bench/array_api.sh -k test_sort    # extra pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/../tests/array_api"
PY="${PYTHON:-../../.venv/bin/python}"
export ARRAY_API_TESTS_MODULE=uops.array_api
export ARRAY_API_TESTS_VERSION=2024.12
export ARRAY_API_TESTS_SKIP_DTYPES=complex64,complex128  # uops has no complex dtypes
export UOPS_TEST_DEVICES="${UOPS_TEST_DEVICES:-CPU}"
exec "$PY" -m pytest -c pytest.ini -p no:cacheprovider -q -n 0 \
  --hypothesis-seed="${SEED:-0}" --max-examples="${MAX_EXAMPLES:-10}" --hypothesis-disable-deadline \
  -p no:warnings --disable-extension linalg fft --xfails-file=xfails.txt array_api_tests "$@"
