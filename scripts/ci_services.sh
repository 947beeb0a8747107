#!/usr/bin/env bash
# Services the test suite uses, installed before `make test` (idempotent, Debian/Ubuntu).
#
# - PostgreSQL (server binaries only; no cluster is started here): tests/test_sweep_postgres.py
#   creates a throwaway cluster on 127.0.0.1 behind `mlflow server`, as a team's setup would.
#   The test installs the package itself when it is missing; running this first keeps the
#   install (and its network access) out of the timed test run.
set -euo pipefail

have_postgres() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if have_postgres; then
    echo "ci_services: PostgreSQL present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ci_services: PostgreSQL missing and apt-get (as root) unavailable;" \
         "tests/test_sweep_postgres.py will skip" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q postgresql
echo "ci_services: PostgreSQL installed"
