#!/usr/bin/env bash
# Screenshots of the running UIs for the README, with headless Chromium (Debian package `chromium`).
# Needs `stsreg servers start`, `stsreg deploy` and one retrain run (so there is a model version to show).
# Usage: bash docs/screenshots.sh [out_dir]      (default docs/img)
set -euo pipefail
out=${1:-docs/img}
mkdir -p "$out"
urls=$(cat .stsreg/servers.json)
prefect=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prefect"])' "$urls")
mlflow=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["mlflow"])' "$urls")
# the deployment's id, for its page
dep=$(curl -sf -X POST "$prefect/api/deployments/filter" -H 'content-type: application/json' \
  -d '{"deployments": {"name": {"any_": ["weekly"]}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
shot() {  # url file
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d)" \
    --window-size=1600,1000 --virtual-time-budget=20000 --screenshot="$2" "$1" 2>/dev/null
  echo "wrote $2"
}
shot "$prefect/deployments" "$out/prefect-deployments.png"
shot "$prefect/deployments/deployment/$dep" "$out/prefect-deployment-weekly.png"
shot "$mlflow/#/models/sts-regression" "$out/mlflow-model.png"
# the last retrain's flow run: its phases as task runs with their times (docs/operations.md, "The loop's clock")
run=$(curl -sf -X POST "$prefect/api/flow_runs/filter" -H 'content-type: application/json' \
  -d '{"flows": {"name": {"any_": ["stsreg-retrain"]}}, "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}},
       "sort": "START_TIME_DESC", "limit": 1}' \
  | python3 -c 'import json,sys; runs = json.load(sys.stdin); print(runs[0]["id"] if runs else "")')
if [ -n "$run" ]; then shot "$prefect/runs/flow-run/$run" "$out/prefect-retrain-run.png"; fi
