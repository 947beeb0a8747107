#!/usr/bin/env bash
# GPU check, kept for old notes: `isolab gpu-check` does it all (docs/gpu.md): GRPO steps of a
# SmolLM2-135M- and a Qwen2.5-0.5B-shaped model, HF generate and vLLM, MFU, the nstar spec's
# smoke, gpu-check.json and snapshots. Usage: scripts/gpu_check.sh [DATA_DIR] [gpu-check options]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-../shared/data}
shift || true
ISOLAB=isolab
[ -x .venv/bin/isolab ] && ISOLAB=.venv/bin/isolab
exec "$ISOLAB" gpu-check --data-dir "$DATA_DIR" "$@"
