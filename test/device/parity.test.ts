// The CPU-vs-CUDA parity checks (test/cuda/parity_cases.ts) on the host device: every device-tensor path
// they take (uploads, staged host arrays with `device: 'cuda'`, async calls, device outputs, in place,
// errors and NaN-filled outputs, aborts, lifetimes, two devices, out of memory) runs here, on every
// machine. The host device runs the CPU kernels, so the numbers compare the CPU with itself: the GPU's
// numerics stay for a GPU machine (npm run test:cuda).
//
// Each host device holds 1.5 GiB: the out-of-memory check fills it with 1 GiB uploads (the second one
// fails), and the largest checks fit. One check is left out: staged host arrays over several chunks
// (1024 x 151,936) tests the CUDA module's staging ring; on the host device it repeats the staged calls
// of the other checks at 2.5 GB and 20 s.
import { describe, it } from 'vitest';
import { importHostDevice } from '../helpers/host_device.js';

await importHostDevice(1.5 * 2 ** 30);
const { parityChecks } = await import('../cuda/parity_cases.js');

const LEFT_OUT = /^staged host arrays over several chunks equal the device tensor/;

describe('the CUDA parity checks on the host device', () => {
  for (const c of parityChecks().filter((x) => !LEFT_OUT.test(x.name))) {
    it(c.name, () => c.run(), 120_000);
  }
});
