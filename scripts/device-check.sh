#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU (prepared by scripts/device-prepare.mjs: .device/ and
# dist/ beside this checkout). Within about 5 minutes: the CPU-vs-CUDA parity suite, compute-sanitizer
# memcheck and racecheck on its small checks, and bench:cuda. Results go to $OUT (default .device/out):
#   parity.json, parity.log, memcheck.log, racecheck.log, bench/cuda.{json,md}, bench.log, summary.txt
# Exit status: 0 when the parity suite passed and both sanitizers report no error.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-.device/out}
mkdir -p "$OUT/bench"
export GEAR_RL_VARIANT=cuda GEAR_RL_CUDA_ADDON="$PWD/.device/gear_rl_cuda.node"

NODE=$(command -v node || true)
if [ ! -x "${NODE:-}" ] || [ "$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" != "$(sed -n 's/.*"node": "v\([0-9]*\).*/\1/p' .device/manifest.json)" ]; then
  NODE=/tmp/gear-rl-node
  [ -x "$NODE" ] || { xz -dc .device/node.xz > "$NODE" && chmod +x "$NODE"; }
fi
RUNNER=.device/js/test/cuda/run_parity.js
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
status=0
{
  echo "node $("$NODE" --version); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  cat .device/manifest.json | tr -d '\n'; echo
} > "$OUT/summary.txt"

# 1. parity, every check (about a minute)
timeout 150 "$NODE" --expose-gc "$RUNNER" --out "$OUT/parity.json" > "$OUT/parity.log" 2>&1 || status=1
tail -n 1 "$OUT/parity.log" >> "$OUT/summary.txt"

# 2. compute-sanitizer on the small checks: memcheck (out-of-bounds, misaligned, leaks) and racecheck
#    (shared memory) on a subset, each with a time limit
if [ -n "$SAN" ]; then
  timeout 60 "$SAN" --tool memcheck --leak-check full --error-exitcode 9 "$NODE" "$RUNNER" --small \
    --filter '^(tokenStats|tokenStatsBackward|divergence reverse_kl|divergenceBackward jsd) (float32|bfloat16) ' > "$OUT/memcheck.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  echo "memcheck exit $rc: $(grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$OUT/memcheck.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
  timeout 45 "$SAN" --tool racecheck --error-exitcode 9 "$NODE" "$RUNNER" --small \
    --filter '^(tokenStats|divergence jsd) float32 (5x2049|7x3001|9x4099) T=1$' > "$OUT/racecheck.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  echo "racecheck exit $rc: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
else
  echo "compute-sanitizer: not found" >> "$OUT/summary.txt"
fi

# 3. bench:cuda (floors, uploads, kernels, end to end, per-call cost, CPU, PyTorch)
timeout 150 "$NODE" --expose-gc bench/cuda.mjs --out "$OUT/bench" > "$OUT/bench.log" 2>&1 || echo "bench exit $?" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $status
