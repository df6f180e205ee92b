// `npm run test:fuzz [-- minutes [seed]]`: the hostile-argument fuzzer of test/hostile/fuzz.test.ts for
// longer than `npm test` gives it (default 10 minutes) and with any seed.
import { spawnSync } from 'node:child_process';

const minutes = Number(process.argv[2] ?? 10);
const seed = process.argv[3] ?? String(Date.now() % 2 ** 31);
if (!(minutes > 0)) throw new Error(`minutes: expected a positive number, got ${process.argv[2]}`);
console.log(`fuzzing for ${minutes} min with seed ${seed}`);
const r = spawnSync('npx', ['vitest', 'run', 'test/hostile/fuzz.test.ts'], {
  stdio: 'inherit',
  shell: process.platform === 'win32',
  env: { ...process.env, GEAR_RL_FUZZ_MS: String(Math.round(minutes * 60_000)), GEAR_RL_FUZZ_SEED: seed },
});
process.exit(r.status ?? 1);
