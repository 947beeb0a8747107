#!/usr/bin/env bash
# Services the test suite uses, installed before `make test` (idempotent, Debian/Ubuntu).
#
# - PostgreSQL (server binaries only; no cluster is started here): tests/test_sweep_postgres.py
#   creates a throwaway cluster on 127.0.0.1 behind `mlflow server`, as a team's setup would.
# - Chromium and its matching chromedriver (Debian's `chromium`, `chromium-driver`):
#   tests/test_ui_browser.py drives the MLflow UI served by `isolab ui` in headless Chromium.
#
# Each test installs its package itself when it is missing; running this first keeps the
# installs (and their network access) out of the timed test run.
set -euo pipefail

have_postgres() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

have_chromium() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1
}

missing=()
if have_postgres; then
    echo "ci_services: PostgreSQL present"
else
    missing+=(postgresql)
fi
if have_chromium; then
    echo "ci_services: Chromium and chromedriver present"
else
    missing+=(chromium chromium-driver)
fi
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ci_services: missing ${missing[*]} and apt-get (as root) unavailable;" \
         "the tests that need them will skip" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q "${missing[@]}"
echo "ci_services: installed ${missing[*]}"
