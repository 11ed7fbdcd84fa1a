#!/usr/bin/env bash
# Prints the README's tour: every command run for real in a fresh temporary folder.
# Usage: bash docs/tour.sh > /tmp/tour.txt   (progress lines of the first tune go to stderr)
#        bash docs/tour.sh real > /tmp/real.txt   (the real AOE banks of ../shared/aoe-banks)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ln -s "$root/fixtures" fixtures
show() { echo "\$ $*"; "$@" | sed "s|$work/||g"; echo; }
if [ "${1:-}" = real ]; then
  samples=$root/../shared/aoe-banks
  [ -d "$samples" ] || samples=/work/shared/aoe-banks
  ln -s "$samples" aoe-banks
  show bank import aoe-banks/Ascend910B2 aoe-banks/Ascend910_9382 aoe-banks/FUSE --db aoe.db
  show bank query --db aoe.db --soc-version Ascend910B2 --op-type MatMulV3 --where m=8192 --where 'k>=20000'
  releases=$(cd aoe-banks/releases && ls | sort -n)
  echo "\$ for r in $(echo $releases | tr '\n' ' '); do bank import aoe-banks/releases/\$r --db releases.db | grep entries; done"
  for r in $releases; do bank import "aoe-banks/releases/$r" --db releases.db | grep entries; done
  echo
  first=$(echo "$releases" | head -1) last=$(echo "$releases" | tail -1)
  echo "\$ bank diff aoe-banks/releases/$first aoe-banks/releases/$last | tail -1"
  bank diff "aoe-banks/releases/$first" "aoe-banks/releases/$last" | tail -1
  echo
  show bank history --db releases.db --repo-key 2473661821538340217 --csv
  show bank merge releases.db --db aoe.db
  show bank export --format aoe-repo --out exported --db aoe.db
  echo "\$ bank import exported --db aoe.db | tail -1"
  bank import exported --db aoe.db | tail -1
  echo
  show bank verify --db aoe.db
  exit 0
fi
show bank tune fixtures/models/resnet50.onnx --soc-version Ascend910B2 --db tunebank.db
show bank tune fixtures/models/resnet50.onnx --soc-version Ascend910B2 --db tunebank.db --progress-bar off
show bank tasks --db tunebank.db
task=$(bank tasks --db tunebank.db --json | python -c "import json,sys; print(json.load(sys.stdin)[1]['task_id'][:6])")
show bank summary "$task" --db tunebank.db --json
show bank query --db tunebank.db --op-type Gemm
show bank history --db tunebank.db --op-name n0
echo "\$ python -m fixtures.model_versions fixtures/models/resnet50.onnx resnet50_v2.onnx   # every 3x3 conv dilated"
(cd "$root" && python -m fixtures.model_versions fixtures/models/resnet50.onnx "$work/resnet50_v2.onnx")
echo
echo "\$ bank plan resnet50_v2.onnx --soc-version Ascend910B2 --db tunebank.db | grep -E 'repo_key| new |keys:'"
bank plan resnet50_v2.onnx --soc-version Ascend910B2 --db tunebank.db | grep -E 'repo_key| new |keys:'

echo
show bank tune resnet50_v2.onnx --soc-version Ascend910B2 --db tunebank.db --progress-bar off
show bank import fixtures/aoe/aoe_result_opat_20240315_14300512_4713.json --soc-version Ascend910B2 --db tunebank.db
echo "\$ bank tune fixtures/models/vgg19.onnx --soc-version Ascend910B2 --db colleague.db --progress-bar off > /dev/null"
bank tune fixtures/models/vgg19.onnx --soc-version Ascend910B2 --db colleague.db --progress-bar off > /dev/null
echo "\$ bank diff colleague.db tunebank.db | tail -1"
bank diff colleague.db tunebank.db | tail -1
echo
show bank merge colleague.db --db tunebank.db
show bank tune fixtures/models/resnet50.onnx --soc-version Ascend910B2 --db tunebank.db --job-type subgraph --progress-bar off
show bank export --format aoe-repo --out banks --db tunebank.db
show bank verify --head --db tunebank.db
show bank report --out report.html --db tunebank.db
