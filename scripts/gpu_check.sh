#!/usr/bin/env bash
# GPU check (see scripts/gpu_check.py): short GRPO of SmolLM2-135M on GSM8K, vLLM vs HF generate,
# completion tokens/s and the ledger's MFU; with several GPUs, HF on all of them too (scaling). Usage: scripts/gpu_check.sh [DATA_DIR] [extra args]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-../shared/data}
shift || true
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" scripts/gpu_check.py --data-dir "$DATA_DIR" "$@"
