// The parity checks without a test runner, for a GPU machine that has Node but not the dev dependencies
// (scripts/device-check.sh runs the compiled form):
//   node run_parity.js [--small] [--filter <regex>] [--out <file.json>]
// --small: only the checks meant for compute-sanitizer (small shapes). Exit status 1 on any failure, 2
// when there is no device (or the package does not load). The last line starts "CUDA parity:".
import { writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
const opt = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const filter = opt('--filter') ? new RegExp(opt('--filter')!) : null;
const small = args.includes('--small');
const outFile = opt('--out');

// Imported here rather than statically: with GEAR_RL_VARIANT=cuda and no usable device the package's
// import itself throws (the checks import it too), and that must still end in one clear line.
let rl: typeof import('../../ts/index.js');
let parityChecks: typeof import('./parity_cases.js').parityChecks;
try {
  rl = await import('../../ts/index.js');
  ({ parityChecks } = await import('./parity_cases.js'));
} catch (e) {
  console.log(`CUDA parity: not run: the package did not load (${e instanceof Error ? e.message : String(e)})`);
  process.exit(2);
}
if (!rl.cuda.available()) {
  console.log(`CUDA parity: not run: no CUDA device (${rl.cuda.unavailableReason()})`);
  process.exit(2);
}
const checks = parityChecks().filter((c) => (!small || c.small) && (!filter || filter.test(c.name)));
const results: { name: string; ok: boolean; ms: number; error?: string }[] = [];
const t0 = performance.now();
for (const c of checks) {
  const t = performance.now();
  try {
    await c.run();
    results.push({ name: c.name, ok: true, ms: performance.now() - t });
  } catch (e) {
    const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    results.push({ name: c.name, ok: false, ms: performance.now() - t, error });
    console.log(`FAIL ${c.name}: ${error}`);
  }
}
// Every device the checks use (cuda:0, and cuda:1 where there are two) gives its call arena and cached
// pool memory back, so that compute-sanitizer's leak check sees only what a check leaked.
for (let d = 0; d < Math.min(2, rl.cuda.devices().length); d++) {
  try {
    rl.cuda.trim(d);
  } catch (e) {
    console.log(`FAIL rl.cuda.trim(${d}): ${e instanceof Error ? e.message : String(e)}`);
    results.push({ name: `rl.cuda.trim(${d})`, ok: false, ms: 0, error: String(e) });
  }
}
const failed = results.filter((r) => !r.ok).length;
const summary = {
  devices: rl.cuda.devices(), backend: rl.backend(), checks: results.length, passed: results.length - failed, failed,
  seconds: (performance.now() - t0) / 1000, small, filter: filter?.source ?? null, results,
};
if (outFile) writeFileSync(outFile, JSON.stringify(summary, null, 1));
console.log(`CUDA parity: ${summary.passed} of ${summary.checks} passed, ${failed} failed (${summary.seconds.toFixed(1)} s)`);
process.exit(failed ? 1 : 0);
