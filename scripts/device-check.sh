#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU (prepared by scripts/device-prepare.mjs: .device/ and
# dist/ beside this checkout). Within 5 minutes in the worst case (every step has a time limit, and the
# later ones get at most what is left of 280 s): the driver first (stops at once without a usable GPU),
# the CPU-vs-CUDA parity suite, compute-sanitizer memcheck and racecheck on its small checks, and
# bench:cuda. Always runs the carried Node (.device/node.xz, unpacked to /tmp/gear-rl-node). Results go to
# $OUT (default .device/out):
#   parity.json, parity.log, memcheck.log, memcheck-split.log, racecheck.log, bench/cuda.{json,md}, bench.log,
#   summary.txt
# The summary lines are printed as they come. Exit status: 0 when the parity suite passed and both
# sanitizers report no error; 3 when nothing could run (no GPU or driver, .device incomplete).
set -u
cd "$(dirname "$0")/.."
DEADLINE=$((SECONDS + 280))
OUT=${OUT:-.device/out}
mkdir -p "$OUT/bench"
S="$OUT/summary.txt"
: > "$S"
note() { echo "$*" | tee -a "$S"; }
stop() {
  note "STOP: $*"
  exit 3
}
# The limit of a step: at most $1 seconds, and no more than is left before the deadline (at least 1:
# `timeout 0` would mean none). The sanitizers are skipped with under 15 s left, the bench under 20.
limit() {
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 1 ]; then echo 1; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
stopped() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ] && echo " (stopped at its limit of $2 s)"; }
status=0
export GEAR_RL_VARIANT=cuda GEAR_RL_CUDA_ADDON="$PWD/.device/gear_rl_cuda.node"

# 0. The driver, first: the module links the CUDA runtime statically (CUDA 13 needs driver R580 or newer).
if command -v nvidia-smi > /dev/null 2>&1; then
  smi=$(timeout -k 2 15 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)
  rc=$?
  note "gpu (name, driver, memory): $(echo "$smi" | head -n 8 | paste -sd ';' -)"
  [ $rc -eq 0 ] && [ -n "$smi" ] || stop "nvidia-smi exit $rc: no usable GPU or driver, nothing run"
else
  note "gpu: nvidia-smi not found (the module's own device query decides)"
fi

M=.device/manifest.json
for f in "$M" .device/gear_rl_cuda.node .device/node.xz .device/js/test/cuda/run_parity.js dist/index.js; do
  [ -f "$f" ] || stop "$f missing: run npm run device:prepare, then carry .device and dist"
done

# 1. The carried Node, always (a system Node of another version may lack what the addon needs); unpacked
#    again when /tmp holds another version. xz, else python3's lzma module.
WANT=$(sed -n 's/^ *"node": *"\([^"]*\)".*/\1/p' "$M" | head -n 1)
NODE=/tmp/gear-rl-node
if [ "$("$NODE" --version 2> /dev/null)" != "$WANT" ]; then
  rm -f "$NODE.part"
  if command -v xz > /dev/null 2>&1; then
    timeout -k 2 30 xz -dc .device/node.xz > "$NODE.part"
  else
    timeout -k 2 30 python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      .device/node.xz "$NODE.part"
  fi && chmod +x "$NODE.part" && mv -f "$NODE.part" "$NODE"
fi
GOT=$("$NODE" --version 2> /dev/null)
[ -n "$WANT" ] && [ "$GOT" = "$WANT" ] ||
  stop "the carried Node $WANT did not unpack to $NODE (it runs as '${GOT:-nothing}'; xz: $(command -v xz || echo none), python3: $(command -v python3 || echo none))"

# What was carried: the commit, whether the tree had uncommitted changes, the module's hash.
timeout -k 2 15 "$NODE" -e '
  const fs = require("fs"), crypto = require("crypto");
  const m = JSON.parse(fs.readFileSync(".device/manifest.json", "utf8"));
  const sha = crypto.createHash("sha256").update(fs.readFileSync(".device/gear_rl_cuda.node")).digest("hex");
  console.log(`node ${process.version} (carried); commit ${m.commit}${m.dirty === true ? `, DIRTY tree (${m.dirtyFiles} files changed)` : m.dirty === false ? ", clean tree" : ", tree state not recorded"}; ` +
    `archs ${m.archs}; nvcc ${m.nvcc ?? "?"}; made ${m.made}`);
  const same = sha === m.moduleSha256;
  console.log(`module sha256 ${sha} ${same ? "(matches the manifest)" : `(MISMATCH: the manifest has ${m.moduleSha256 ?? "none"})`}`);
  process.exit(same ? 0 : 5);' 2>&1 | tee -a "$S"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# The module's own view: devices, runtime and driver versions (cudaErrorInsufficientDriver: driver too old).
probe=$(timeout -k 2 30 "$NODE" -e '
  const m = { exports: {} };
  process.dlopen(m, process.env.GEAR_RL_CUDA_ADDON);
  const d = m.exports.cudaDevices();
  const v = (x) => (x > 0 ? `${Math.floor(x / 1000)}.${(x % 1000) / 10}` : "none");
  console.log(`${d.count} device(s)${d.count ? ": " + d.devices.map((x) => `${x.name} ${x.arch}`).join(", ") : ""}; ` +
    `CUDA runtime ${v(d.runtimeVersion)}, the driver supports up to ${v(d.driverVersion)}${d.error ? "; " + d.error : ""}` +
    `${!/InsufficientDriver/.test(d.error) ? "" : d.driverVersion > 0 ? " (the CUDA runtime linked into the module needs a newer driver: CUDA 13 needs R580 or later)" : " (no CUDA driver found)"}`);
  process.exit(d.count > 0 ? 0 : 4);' 2>&1)
rc=$?
note "module: $(echo "$probe" | tail -n 3 | paste -sd '|' -)"
[ $rc -eq 0 ] || stop "the module sees no usable CUDA device (exit $rc), nothing run"

RUNNER=.device/js/test/cuda/run_parity.js

# 2. Parity, every check (about a minute).
t=$(limit 110)
timeout -k 3 "$t" "$NODE" --expose-gc "$RUNNER" --out "$OUT/parity.json" > "$OUT/parity.log" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
line=$(grep 'CUDA parity:' "$OUT/parity.log" | tail -n 1)
[ -n "$line" ] || line="parity exit $rc, no 'CUDA parity:' line; it ended: $(grep -v '^ *$' "$OUT/parity.log" | tail -n 3 | cut -c1-200 | paste -sd '|' -)"
note "$line$(stopped $rc "$t")"

# 3. compute-sanitizer on the small checks: memcheck (out-of-bounds, misaligned, leaks: what the library
#    caches, the staging ring included, is freed by rl.cuda.trim() and at exit) and racecheck (shared
#    memory) on a subset, each with a time limit.
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
if [ -n "$SAN" ] && [ $((DEADLINE - SECONDS)) -lt 15 ]; then
  note "compute-sanitizer: not run ($((DEADLINE - SECONDS)) s left)"
elif [ -n "$SAN" ]; then
  note "compute-sanitizer: $SAN, $(timeout -k 2 10 "$SAN" --version 2>&1 | grep -i version | tail -n 1)"
  t=$(limit 45)
  timeout -k 3 "$t" "$SAN" --tool memcheck --leak-check full --error-exitcode 9 "$NODE" "$RUNNER" --small \
    --filter '^((tokenStats|tokenStatsBackward|divergence reverse_kl|divergenceBackward jsd) (float32|bfloat16) |finite masks|both sides bad|tokenStatsBackward in place|uploads and downloads of pageable)' > "$OUT/memcheck.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  note "memcheck exit $rc$(stopped $rc "$t"): $(grep -E 'ERROR SUMMARY|LEAK SUMMARY|CUDA parity:' "$OUT/memcheck.log" | tr '\n' ' ')"
  # rows split in pieces (few rows, long vocabularies): each pass's last piece merges the row, through a
  # per-row counter and a shared flag; memcheck on their reads and writes, racecheck on the flag
  t=$(limit 30)
  timeout -k 3 "$t" "$SAN" --tool memcheck --error-exitcode 9 "$NODE" "$RUNNER" \
    --filter '^(tokenStats|divergence (reverse_kl|jsd)) (float32|bfloat16) 3x32000 T=1$' > "$OUT/memcheck-split.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  note "memcheck (split rows) exit $rc$(stopped $rc "$t"): $(grep -E 'ERROR SUMMARY|CUDA parity:' "$OUT/memcheck-split.log" | tr '\n' ' ')"
  t=$(limit 30)
  timeout -k 3 "$t" "$SAN" --tool racecheck --error-exitcode 9 "$NODE" "$RUNNER" \
    --filter '^(tokenStats|divergence jsd) float32 (5x2049|7x3001|9x4099|3x32000) T=1$' > "$OUT/racecheck.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  note "racecheck exit $rc$(stopped $rc "$t"): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|CUDA parity:' "$OUT/racecheck.log" | tr '\n' ' ')"
else
  note "compute-sanitizer: not found"
fi

# 4. bench:cuda (floors, uploads, kernels, end to end, per-call cost, CPU, then PyTorch with what is left
#    of its limit): everything left before the deadline. It writes its results after every row, so a
#    bench stopped at its limit keeps them.
t=$(limit 280)
if [ "$t" -ge 20 ]; then
  timeout -k 3 "$t" "$NODE" --expose-gc bench/cuda.mjs --out "$OUT/bench" --budget $((t - 2)) --torch-timeout $((t - 2)) \
    > "$OUT/bench.log" 2>&1
  rc=$?
  rows=$(timeout -k 2 10 "$NODE" -e 'const r = require(require("path").resolve(process.argv[1])); console.log(`${r.rows.length} rows${r.complete ? "" : ", incomplete"}; torch: ${r.torch ? (r.torch.error ?? `${Object.keys(r.torch).filter((k) => k.endsWith("_ms")).length} timings${r.torch.timedOut ? ", stopped at its limit" : ""}`) : "not run"}`)' \
    "$OUT/bench/cuda.json" 2> /dev/null || echo "no cuda.json")
  note "bench exit $rc$(stopped $rc "$t"): $rows; it ended: $(grep -v '^ *$' "$OUT/bench.log" | tail -n 3 | cut -c1-200 | paste -sd '|' -)"
else
  note "bench: not run (${t} s left)"
fi
exit $status
