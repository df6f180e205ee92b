// The device-tensor table (native/src/core/device_tensors.cc) on its own: a C++ driver with host memory
// in place of device memory (test/native/device_tensors_test.cc), built with AddressSanitizer and UBSan,
// so a use after free, a double free or a leak of a claim fails here on any machine, GPU or not.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'gear-rl-tensors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('ids are never reused; claims, busy tensors, deferred and per-environment disposal hold under ASan', () => {
  const exe = join(dir, 'device_tensors_test');
  const cc = spawnSync('g++', ['-std=c++17', '-O1', '-g', '-fsanitize=address,undefined', '-fno-sanitize-recover=all',
    '-pthread', `-I${join(ROOT, 'native/include')}`, join(ROOT, 'test/native/device_tensors_test.cc'),
    join(ROOT, 'native/src/core/device_tensors.cc'), '-o', exe], { encoding: 'utf8' });
  expect(cc.status, cc.stderr).toBe(0);
  const r = spawnSync(exe, [], { encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('ok: 0 failures');
  expect(r.status).toBe(0);
}, 120_000);
