// CPU-vs-CUDA parity (test/cuda/parity_cases.ts) under vitest, where the CUDA module runs with a device.
// Elsewhere the checks are not run and not counted as passed: one line says so.
import { describe, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { parityChecks } from './parity_cases.js';

const checks = parityChecks();
const device = rl.cuda.available();
if (!device) {
  console.log(`CUDA parity: ${checks.length} checks not run here (${rl.cuda.unavailableReason()}); ` +
    'a GPU machine runs them with npm run test:cuda');
}

describe.skipIf(!device)('CPU-vs-CUDA parity', () => {
  for (const c of checks) it(c.name, () => c.run(), 120_000);
});
