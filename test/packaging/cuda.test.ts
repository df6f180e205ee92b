// The optional CUDA module: its sources compile and link in the prebuild's configuration (sm_80 and sm_90
// machine code plus sm_90 PTX, shared with pack.test.ts under build-cuda/prebuild), its surface and errors
// without a device, and the loader's variant choice on this GPU-less machine: `auto` falls back to the
// CPU addon, `cuda` forced is a clear ERR_NATIVE, and CMake configures without nvcc.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUDA_MODULE, NVCC, buildCudaModule, fatbinEntries } from '../helpers/cuda_build.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODULE = CUDA_MODULE;
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;
const scratch = mkdtempSync(join(tmpdir(), 'gear-rl-cuda-'));

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env, cwd = ROOT) {
  return spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
}

/** Runs `code` (ESM) in a child with `env` added; returns its exit status, stdout and stderr. */
function child(code: string, env: Record<string, string>) {
  const clean = { ...process.env };
  for (const k of ['GEAR_RL_VARIANT', 'GEAR_RL_CUDA_ADDON', 'GEAR_RL_ADDON']) delete clean[k];
  return run(process.execPath, ['--input-type=module', '-e', code], { ...clean, ...env });
}

beforeAll(() => {
  expect(NVCC, 'nvcc in /usr/local/cuda/bin or on PATH').toBeDefined();
  expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/index.js (npm run build:ts)').toBe(true);
  buildCudaModule();  // incremental: only changed sources recompile
}, 900_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('CUDA module build', () => {
  it('compiles every .cu of native/sources.mjs to sm_80 and sm_90 machine code plus sm_90 PTX and links gear_rl_cuda.node', async () => {
    expect(existsSync(MODULE)).toBe(true);
    const sources = await import(pathToFileURL(join(ROOT, 'native/sources.mjs')).href) as { cuda: string[] };
    const cu = sources.cuda.filter((s) => s.endsWith('.cu'));
    expect(cu.map((s) => s.split('/').pop()).sort()).toEqual(['divergence.cu', 'token_stats.cu']);
    // device code is embedded (fat binary section) and every kernel has its host launch stub
    const sections = run('readelf', ['-S', '-W', MODULE]).stdout;
    expect(sections).toContain('.nv_fatbin');
    const syms = run('strings', [MODULE]).stdout;
    for (const k of ['stats_kernel', 'grad_kernel', 'pair_kernel', 'pair_kernel_cs', 'pair_kernel_ct', 'jsd_kernel']) {
      expect(syms, k).toContain(k);
    }
    // the fat binaries: machine code for both architectures and PTX for newer GPUs, nothing else
    expect(fatbinEntries(MODULE)).toEqual(['ptx sm_90', 'sass sm_80', 'sass sm_90']);
  });

  it('loads with every symbol resolved (RTLD_NOW) and reports no device here', () => {
    const code = `
      import { constants } from 'node:os';
      const m = { exports: {} };
      process.dlopen(m, ${JSON.stringify(MODULE)}, constants.dlopen.RTLD_NOW);
      const a = m.exports;
      console.log(JSON.stringify({ names: Object.keys(a).sort(), dev: a.cudaDevices(), backend: a.backend() }));`;
    const r = child(code, {});
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.dev.count).toBe(0);
    expect(out.dev.error).toMatch(/^cudaError\w+ \(.+\)$/);
    expect(out.dev.runtimeVersion).toBeGreaterThanOrEqual(12000);
    expect(out.dev.devices).toEqual([]);
    // backend(): the CPU kernels' instruction sets (host arrays run on them) and the device count
    expect(out.backend.variant).toBe('cuda');
    expect(out.backend.devices).toBe(0);
    expect(out.backend.isas[0]).toBe('baseline');
    expect(out.backend.isas).toContain(out.backend.isa);
    // the same op surface as the CPU addon (less its host-device switch), plus the device functions
    const cpu = child(`import { native } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'core', 'addon.js')).href)};
      console.log(JSON.stringify(Object.keys(native).sort()));`, { GEAR_RL_VARIANT: 'cpu' });
    expect(cpu.status, cpu.stderr).toBe(0);
    const cpuNames = JSON.parse(cpu.stdout.trim().split('\n').pop()!) as string[];
    expect(cpuNames).toContain('installHostDevice');
    expect(out.names).toEqual([...cpuNames.filter((n) => n !== 'installHostDevice'), 'cudaAllocHost', 'cudaBandwidth', 'cudaDevices', 'cudaDispose', 'cudaDownload',
      'cudaKernelMs', 'cudaMemory', 'cudaTrim', 'cudaUpload'].sort());
  });

  it('host arrays run on the CPU kernels inside the CUDA module: the same bits as the CPU module', () => {
    const code = (module: string) => `
      const m = { exports: {} };
      process.dlopen(m, ${JSON.stringify(module)});
      const a = m.exports;
      const V = 3001, R = 5, z = new Float32Array(R * V);
      for (let i = 0; i < z.length; i++) z[i] = Math.sin(i * 0.37) * 4;
      const s = a.tokenStats({ logits: { data: z, rows: R, vocab: V, dtype: 0 }, targets: new Int32Array([0, 7, 99, 3000, 12]), temperature: 0.7 });
      const g = a.tokenStatsBackward({ logits: { data: z, rows: R, vocab: V, dtype: 0 }, targets: new Int32Array([0, 7, 99, 3000, 12]),
        grad: { logprob: new Float32Array(R).fill(1) }, temperature: 0.7 }).gradLogits;
      console.log(JSON.stringify([...s.logprob, ...s.entropy, ...s.logsumexp, ...g.subarray(0, 50)]));`;
    const cpuModule = join(ROOT, 'build', 'Release', 'gear_rl.node');
    const viaCuda = child(code(MODULE), {}), viaCpu = child(code(cpuModule), {});
    expect(viaCuda.status, viaCuda.stderr).toBe(0);
    expect(viaCpu.status, viaCpu.stderr).toBe(0);
    expect(viaCuda.stdout).toBe(viaCpu.stdout);
  });

  it('device calls without a device are GearErrors naming why: ERR_DEVICE, ERR_STATE for unknown tensors, never a crash', () => {
    const code = `
      const m = { exports: {} };
      process.dlopen(m, ${JSON.stringify(MODULE)});
      const { GearError } = await import(${JSON.stringify(DIST)});
      const a = m.exports;
      a.setErrorClass({ errorClass: GearError });
      const host = { data: new Float32Array(6), rows: 2, vocab: 3, dtype: 0 };
      const attempt = (f) => { try { f(); return { ok: true }; } catch (e) { return { isGear: e instanceof GearError, code: e.code, message: e.message }; } };
      console.log(JSON.stringify({
        stats: attempt(() => a.tokenStats({ logits: host, targets: new Int32Array(2), temperature: 1, device: 0 })),
        upload: attempt(() => a.cudaUpload({ logits: host, device: 0 })),
        stale: attempt(() => a.tokenStats({ logits: { tensor: 5 }, targets: new Int32Array(2), temperature: 1 })),
        mixed: attempt(() => a.divergence({ student: host, teacher: { tensor: 5 }, kind: 0, beta: 0.5, temperature: 1, klCap: Infinity })),
        dispose: attempt(() => a.cudaDispose({ tensor: 5 })),
        download: attempt(() => a.cudaDownload({ tensor: 5 })),
      }));`;
    const r = child(code, {});
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.stats).toMatchObject({ isGear: true, code: 'ERR_DEVICE' });
    expect(out.stats.message).toMatch(/^device: expected a CUDA device ordinal in \[0, 0\), got 0 \(cudaError\w+/);
    expect(out.upload).toMatchObject({ isGear: true, code: 'ERR_DEVICE' });
    expect(out.stale).toEqual({ isGear: true, code: 'ERR_STATE', message: 'logits.tensor: expected a live device tensor, got one that was disposed' });
    expect(out.mixed).toMatchObject({ isGear: true, code: 'ERR_STATE' });  // the teacher is read (and refused) first
    expect(out.dispose).toEqual({ ok: true });  // disposing what is not live is a no-op
    expect(out.download).toMatchObject({ isGear: true, code: 'ERR_STATE' });
  });

});

describe('variant selection (GEAR_RL_VARIANT)', () => {
  const probe = `
    const rl = await import(${JSON.stringify(DIST)});
    const sums = Array.from(rl.segmentReduce(new Float64Array([1, 2, 3, 4]), new Int32Array([0, 1, 4]), 'sum'));
    console.log(JSON.stringify({ backend: rl.backend(), sums }));`;

  it('auto (the default) falls back to the CPU addon when the CUDA module finds no device', () => {
    for (const env of [{ GEAR_RL_CUDA_ADDON: MODULE }, { GEAR_RL_CUDA_ADDON: MODULE, GEAR_RL_VARIANT: 'auto' }]) {
      const r = child(probe, env);
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(out.backend.variant).toBe('cpu');
      expect(out.sums).toEqual([1, 2 + 3 + 4]);
    }
  });

  it('cuda forced without a device is a GearError ERR_NATIVE saying why', () => {
    const code = `
      try { await import(${JSON.stringify(DIST)}); console.log(JSON.stringify({ loaded: true })); }
      catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }`;
    const r = child(code, { GEAR_RL_VARIANT: 'cuda', GEAR_RL_CUDA_ADDON: MODULE });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.name).toBe('GearError');
    expect(out.code).toBe('ERR_NATIVE');
    expect(out.message).toMatch(/^GEAR_RL_VARIANT=cuda: expected a CUDA module that loads and reports a device, got no CUDA device \(cudaError\w+/);
  });

  it('cuda forced with no CUDA module at all names the paths it looked at', () => {
    const missing = join(scratch, 'nope.node');
    const code = `
      try { await import(${JSON.stringify(DIST)}); console.log(JSON.stringify({ loaded: true })); }
      catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
    // a copy of dist without a build-cuda/ beside it is not needed: point the default path away by cwd-independent env
    const r = child(code, { GEAR_RL_VARIANT: 'cuda', GEAR_RL_CUDA_ADDON: missing });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.code).toBe('ERR_NATIVE');
    expect(out.message).toContain('GEAR_RL_VARIANT=cuda');
  });

  it('cpu never loads the CUDA module; an unknown value is ERR_OPTION', () => {
    const r = child(probe, { GEAR_RL_VARIANT: 'cpu', GEAR_RL_CUDA_ADDON: MODULE });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!).backend.variant).toBe('cpu');
    const bad = child(`try { await import(${JSON.stringify(DIST)}) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`,
      { GEAR_RL_VARIANT: 'gpu' });
    const out = JSON.parse(bad.stdout.trim().split('\n').pop()!);
    expect(out.code).toBe('ERR_OPTION');
    expect(out.message).toBe(`GEAR_RL_VARIANT: expected 'cpu', 'cuda', 'auto' or 'host-device', got "gpu"`);
  });
});

describe('CMake without nvcc', () => {
  it('configures the CPU module and skips the CUDA one', () => {
    const dir = join(scratch, 'nocuda');
    // PATH without any CUDA directory and a CUDA compiler that does not exist
    const env = { ...process.env, PATH: '/usr/bin:/bin', CUDACXX: join(scratch, 'no-nvcc') };
    const r = run('npx', ['cmake-js', 'configure', '--out', dir], env);
    const log = r.stdout + r.stderr;
    expect(r.status, log.slice(-3000)).toBe(0);
    expect(log).toContain('gear-rl: no CUDA compiler found');
  }, 120_000);
});
