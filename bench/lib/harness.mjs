// Benchmark harness: timing, the same-run memory-bandwidth floor, peer baselines and result rows.
// Every bench (bench/<name>.bench.mjs) receives one harness object `h`; see bench/README.md.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '..', '..');
export const PEER_DIR = resolve(ROOT, 'bench', 'peers');
// Debian's interpreter carries python3-torch; a pyenv python3 earlier on PATH usually does not.
export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Parses the last line of `text` that is a JSON object. */
function lastJsonLine(text) {
  const lines = String(text).trim().split('\n').reverse();
  for (const l of lines) {
    const t = l.trim();
    if (t.startsWith('{') || t.startsWith('[')) {
      try {
        return JSON.parse(t);
      } catch {
        /* keep looking */
      }
    }
  }
  return undefined;
}

function runJson(cmd, args, { timeoutMs, cwd, env } = {}) {
  const r = spawnSync(cmd, args, {
    cwd, env: { ...process.env, ...env }, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 2 ** 20,
  });
  if (r.error) return { error: `${cmd}: ${r.error.message}` };
  if (r.status !== 0) {
    const err = (r.stderr || '').trim().split('\n').slice(-3).join(' | ');
    return { error: `${cmd} exited with ${r.status ?? r.signal}: ${err}` };
  }
  const parsed = lastJsonLine(r.stdout);
  if (parsed === undefined) return { error: `${cmd}: no JSON line in its output` };
  return parsed;
}

/**
 * Measures the floor with the package's native probe: read bandwidth (one and two streams per thread,
 * the higher median is the floor) and copy bandwidth with non-temporal stores.
 */
export function measureFloor(rl, { threads = 2, quick = false } = {}) {
  const bytes = (quick ? 256 : 1024) * 2 ** 20;
  const reps = quick ? 3 : 7;
  const read1 = rl.memoryBandwidth({ mode: 'read', bytes, threads, reps });
  const read2 = rl.memoryBandwidth({ mode: 'read2', bytes, threads, reps });
  const copy = rl.memoryBandwidth({ mode: 'copy', bytes: bytes / 2, threads, reps });
  const round = (x) => +x.toFixed(2);
  return {
    readGBs: round(Math.max(read1.gbs, read2.gbs)),
    copyGBs: round(copy.gbs),
    threads,
    read1GBs: round(read1.gbs),
    read2GBs: round(read2.gbs),
    bytes,
    reps,
    samples: { read: read1.samples.map(round), read2: read2.samples.map(round), copy: copy.samples.map(round) },
  };
}

/**
 * A short read-bandwidth probe (one sample, one stream per thread, 512 MiB) for `h.time`'s `localFloor`:
 * the bandwidth of this moment, not of the run's start.
 */
export function floorProbe(rl, threads) {
  return () => rl.memoryBandwidth({ mode: 'read', bytes: 512 * 2 ** 20, threads, reps: 1 }).gbs;
}

/**
 * Creates the harness handed to every bench.
 * @param {{ floor: object, threads: number, quick: boolean, peers?: boolean, log?: (s: string) => void,
 *   probe?: () => number }} cfg
 */
export function createHarness({ floor, threads, quick, peers = true, log = (s) => console.log(s), probe }) {
  const rows = [];
  const peerCache = new Map();
  let current = '';

  const h = {
    floor,
    quick,
    threads,
    rows,
    /** Sets the bench name attached to the following rows (done by run.mjs). */
    setBench(name) {
      current = name;
    },

    /**
     * Median wall time of `fn` over `reps` runs after `warmup` untimed runs. Collects garbage before
     * each run when node runs with --expose-gc, so a previous run's garbage is not billed to the next.
     * With `localFloor`, a short bandwidth probe runs before each run and after the last (`floors[i]`, the
     * higher of the two probes around run i): the machine's bandwidth drifts by tens of percent within
     * minutes, and a row given this timing also reports its % of the floor of its own moment (`h.row`).
     */
    async time(fn, { reps = 5, warmup = 1, gc = true, localFloor = false } = {}) {
      for (let i = 0; i < warmup; i++) await fn();
      const samples = [];
      const probes = [];
      const sample = localFloor && probe ? probe : undefined;
      for (let i = 0; i < reps; i++) {
        if (gc && globalThis.gc) globalThis.gc();
        if (sample) probes.push(sample());
        const t0 = process.hrtime.bigint();
        await fn();
        samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      if (sample) probes.push(sample());
      const floors = sample ? samples.map((_, i) => Math.max(probes[i], probes[i + 1])) : undefined;
      return { ms: median(samples), min: Math.min(...samples), samples, floors };
    },

    /**
     * Runs a peer baseline from bench/peers once per distinct configuration and returns
     * its parsed JSON line, or `{ error }` when the peer is unavailable or fails. Never throws.
     * @param {'torch'|'naive'} tool
     * @param {{ op: string, n: number, v: number, threads?: number, reps?: number, extra?: string[] }} o
     */
    peer(tool, { op, n, v, threads: t = threads, reps, extra = [] } = {}) {
      if (!peers) return { error: 'peers disabled (--no-peers)' };
      const key = JSON.stringify([tool, op, n, v, t, reps, extra]);
      if (peerCache.has(key)) return peerCache.get(key);
      const args = ['--op', String(op), '--n', String(n), '--v', String(v), '--threads', String(t)];
      if (reps !== undefined) args.push('--reps', String(reps));
      args.push(...extra);
      let res;
      if (tool === 'torch') {
        const script = resolve(PEER_DIR, 'torch_bench.py');
        res = existsSync(script)
          ? runJson(PYTHON, [script, ...args], { timeoutMs: 30 * 60_000 })
          : { error: `missing ${script}` };
      } else if (tool === 'naive') {
        const script = resolve(PEER_DIR, 'naive.mjs');
        res = existsSync(script)
          ? runJson(process.execPath, [script, ...args], { timeoutMs: 30 * 60_000 })
          : { error: `missing ${script}` };
      } else {
        res = { error: `unknown peer '${tool}' (known: torch, naive)` };
      }
      if (res.error) log(`  [peer ${tool} ${op}] unavailable: ${res.error}`);
      peerCache.set(key, res);
      return res;
    },

    /**
     * Runs a python3 snippet (`/usr/bin/python3 -c code ...args`) and returns the JSON it prints (last
     * JSON line of stdout), or `{ error }`. Never throws.
     */
    python(code, args = [], { timeoutMs = 30 * 60_000 } = {}) {
      return runJson(PYTHON, ['-c', code, ...args.map(String)], { timeoutMs });
    },

    /**
     * Records one result row. `bytes` = bytes the op must move (read + written); the harness adds GB/s,
     * % of the floor (read bandwidth, or copy bandwidth with `floorKind: 'copy'`), ns per element (from
     * a numeric `shape` or `elems`), and the peer ratio (peerMs / ms: how many times faster we are).
     */
    row({ op, dtype, shape, ms, bytes, peerMs, peer, note, elems, floorKind = 'read', time, ...extra }) {
      const shapeArr = Array.isArray(shape) ? shape : undefined;
      const n = elems ?? (shapeArr && shapeArr.every((x) => typeof x === 'number') ? shapeArr.reduce((a, b) => a * b, 1) : undefined);
      const f = floorKind === 'copy' ? floor.copyGBs : floor.readGBs;
      const gbs = bytes && ms > 0 ? bytes / ms / 1e6 : undefined;
      const r = {
        bench: current,
        op,
        dtype,
        shape: shapeArr ? shapeArr.join('x') : shape,
        ms: ms === undefined ? undefined : +ms.toFixed(3),
        nsPerElem: n && ms ? +((ms * 1e6) / n).toFixed(4) : undefined,
        bytes,
        gbs: gbs === undefined ? undefined : +gbs.toFixed(2),
        pctFloor: gbs === undefined || !f ? undefined : +((100 * gbs) / f).toFixed(1),
        floorKind,
        // each run's GB/s over the bandwidth probed around it, the median over the runs (h.time's localFloor)
        pctLocalFloor: bytes && time?.floors && floorKind === 'read'
          ? +median(time.samples.map((t, i) => (100 * bytes) / t / 1e6 / time.floors[i])).toFixed(1) : undefined,
        localFloorGBs: time?.floors ? +median(time.floors).toFixed(2) : undefined,
        peer,
        peerMs: peerMs === undefined ? undefined : +Number(peerMs).toFixed(3),
        speedup: peerMs && ms ? +(peerMs / ms).toFixed(2) : undefined,
        note,
        ...extra,
      };
      rows.push(r);
      const parts = [`  ${op}`, dtype, r.shape, `${r.ms} ms`];
      if (r.gbs !== undefined) parts.push(`${r.gbs} GB/s`, `${r.pctFloor}% of floor`);
      if (r.pctLocalFloor !== undefined) parts.push(`${r.pctLocalFloor}% of the local floor (${r.localFloorGBs} GB/s)`);
      if (r.speedup !== undefined) parts.push(`${r.speedup}x vs ${peer}`);
      if (note) parts.push(`(${note})`);
      log(parts.filter((x) => x !== undefined).join('  '));
      return r;
    },
  };
  return h;
}
