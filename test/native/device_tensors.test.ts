// The device-tensor table (native/src/core/device_tensors.cc) on its own: a C++ driver with host memory
// in place of device memory (test/native/device_tensors_test.cc), built with AddressSanitizer and UBSan,
// so a use after free, a double free or a leak of a claim fails here on any machine, GPU or not. The
// host device's runtime (native/src/core/host_device.cc) with the table, likewise
// (test/native/host_device_test.cc).
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

const execFileP = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'gear-rl-tensors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Compiles `sources` side by side with ASan and UBSan, links them into `name` and runs it: no report, no failure. */
async function sanitized(name: string, sources: string[]): Promise<void> {
  const flags = ['-std=c++17', '-O1', '-g', '-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-pthread',
    `-I${join(ROOT, 'native/include')}`];
  const objects = sources.map((_, i) => join(dir, `${name}_${i}.o`));
  const compiled = await Promise.all(sources.map((s, i) => execFileP('g++', [...flags, '-c', join(ROOT, s), '-o', objects[i]!])
    .then(() => '', (e: { stderr?: string }) => `${s}: ${e.stderr ?? String(e)}`)));
  expect(compiled.join(''), 'compile').toBe('');
  const exe = join(dir, name);
  const cc = spawnSync('g++', [...flags, ...objects, '-o', exe], { encoding: 'utf8' });
  expect(cc.status, cc.stderr).toBe(0);
  const r = spawnSync(exe, [], { encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('ok: 0 failures');
  expect(r.status).toBe(0);
}

it('ids are never reused; claims, busy tensors, deferred and per-environment disposal hold under ASan', async () => {
  await sanitized('device_tensors_test', ['test/native/device_tensors_test.cc', 'native/src/core/device_tensors.cc']);
}, 120_000);

it("the host device's runtime (GEAR_RL_VARIANT=host-device) holds its allocations, accounting and aborts under ASan", async () => {
  await sanitized('host_device_test', ['test/native/host_device_test.cc', 'native/src/core/host_device.cc',
    'native/src/core/host_memory.cc', 'native/src/core/device_tensors.cc', 'native/src/cpu/thread_pool.cc']);
}, 120_000);
