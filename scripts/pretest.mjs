#!/usr/bin/env node
// Runs before `npm test`: makes sure what the suite needs is here — the native addon (built when no
// prebuild or local build loads), the compiled TypeScript (the packaging test and the demo run from
// dist/), and Debian's headless Chromium (the visualiser's browser test).
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const run = (cmd) => execSync(cmd, { stdio: 'inherit' });

try {
  require('node-gyp-build')(process.cwd());
} catch {
  console.log('[pretest] building the native addon from source');
  run('npx node-gyp rebuild');
}

console.log('[pretest] compiling TypeScript');
run('npx tsc -p tsconfig.json');
if (existsSync('tsconfig.examples.json')) run('npx tsc -p tsconfig.examples.json');

const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
if (!chromium) {
  if (process.getuid && process.getuid() === 0) {
    console.log('[pretest] installing Debian chromium for the browser test');
    run('apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null');
  } else {
    console.error('[pretest] the visualiser test needs Chromium: run `sudo apt-get install -y chromium`');
    process.exit(1);
  }
}
