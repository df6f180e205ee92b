// The thread pool (native/src/cpu/thread_pool.cc) on its own: a C++ driver (test/native/thread_pool_test.cc)
// runs jobs of every size back to back, after idle gaps, from several callers, through resizes and with
// spinning off, built once with ThreadSanitizer and once with AddressSanitizer and UBSan, so a data race,
// a lost wake-up (a hang: the timeout) or a worker touching a returned job's frame fails here.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'gear-rl-pool-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

for (const [name, sanitize] of [['ThreadSanitizer', 'thread'], ['AddressSanitizer and UBSan', 'address,undefined']] as const) {
  it(`every task runs once and every job is complete on return, under ${name}`, () => {
    const exe = join(dir, `thread_pool_test_${sanitize.replace(',', '_')}`);
    const cc = spawnSync('g++', ['-std=c++17', '-O1', '-g', `-fsanitize=${sanitize}`, '-fno-sanitize-recover=all',
      '-pthread', `-I${join(ROOT, 'native/include')}`, join(ROOT, 'test/native/thread_pool_test.cc'),
      join(ROOT, 'native/src/cpu/thread_pool.cc'), '-o', exe], { encoding: 'utf8' });
    expect(cc.status, cc.stderr).toBe(0);
    const r = spawnSync(exe, [], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, TSAN_OPTIONS: 'halt_on_error=1' } });
    expect(r.error, 'the driver hung (a lost wake-up?)').toBeUndefined();
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('ok: 0 failures');
    expect(r.status).toBe(0);
  }, 180_000);
}
