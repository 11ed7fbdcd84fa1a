#!/usr/bin/env bash
# Makes docs/report.png: a bank of ten tasks on three chips (two versions of ResNet-50, a subgraph
# tune, a colleague's bank merged in, an AOE result file imported, VGG-19 and ResNet-50 on a second
# chip, SqueezeNet alone on a third), its `bank report`, and a headless Chromium screenshot of the
# page's top in a 1400 px window. Usage: bash docs/report.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export ASCEND_WORK_PATH=$work
models=$root/fixtures/models
python -c "import sys; sys.path.insert(0, '$root'); from pathlib import Path
from fixtures.model_versions import dilated; dilated(Path('$models/resnet50.onnx'), Path('resnet50_v2.onnx'))"
quiet() { "$@" --progress-bar off > /dev/null; }
quiet bank tune "$models/resnet50.onnx" --soc-version Ascend310P3 --db bank.db
quiet bank tune resnet50_v2.onnx --soc-version Ascend310P3 --db bank.db --tuning-name resnet50_v2_Ascend310P3
quiet bank tune "$models/resnet50.onnx" --soc-version Ascend310P3 --db bank.db --job-type subgraph
quiet bank tune "$models/squeezenet.onnx" --soc-version Ascend310P3 --db colleague.db
bank merge colleague.db --db bank.db > /dev/null
bank import "$root/fixtures/aoe/aoe_result_opat_20240315_14300512_4713.json" --soc-version Ascend310P3 --db bank.db > /dev/null
quiet bank tune "$models/vgg19.onnx" --soc-version Ascend910B2 --db bank.db
quiet bank tune "$models/resnet50.onnx" --soc-version Ascend910B2 --db bank.db
quiet bank tune "$models/squeezenet.onnx" --soc-version Ascend310 --db bank.db
bank report --out report.html --db bank.db
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1400,2000 --screenshot="$root/docs/report.png" "file://$work/report.html" 2> /dev/null
echo "docs/report.png from $(bank tasks --db bank.db --json | python -c 'import json,sys; print(len(json.load(sys.stdin)))') tasks"
