#!/usr/bin/env bash
# Incremental native build for development: configures when the source list changed, then builds.
# Serialised with a lock so parallel invocations never clobber build/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 9>/tmp/gear-rl-build.lock
flock 9
export npm_config_nodedir="${npm_config_nodedir:-/usr}"
if [ ! -f build/Makefile ] || [ native/sources.json -nt build/Makefile ] || [ binding.gyp -nt build/Makefile ]; then
  npx node-gyp configure >/dev/null 2>&1 || npx node-gyp configure
fi
npx node-gyp build -j 2 >/tmp/gear-rl-build.$$.log 2>&1 || { grep -E "error|Error" /tmp/gear-rl-build.$$.log; exit 1; }
grep -E "warning" /tmp/gear-rl-build.$$.log || true
test -f build/Release/gear_rl.node
