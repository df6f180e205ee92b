// The fuzzer's worker: calls every export of the built package with fast-check-generated hostile
// arguments and prints one JSON line of findings. Run by fuzz.test.ts in a child process, so that a crash
// or a hang is a failing test rather than a dead runner.
//
//   node test/hostile/fuzz_child.mjs <entry URL>[,<entry URL>...] <seed> <milliseconds> [export,...]
//
// The entry URLs are the package's entry points in dist/ (index.js and each subpath's module): their
// exports are fuzzed together, and GearError is the first one's.
//
// A call passes when it returns, or throws a GearError with an `ERR_` code; an `…Async` function must
// return a Promise (never throw) that resolves or rejects with such a GearError. Anything else (TypeError,
// RangeError, a plain Error, a synchronous throw from an …Async function) is a finding. The export being
// called is written to stderr first, so a crash or a hang names it.
import fc from 'fast-check';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [distUrl, seedArg, msArg, onlyArg] = process.argv.slice(2);
const entries = await Promise.all(distUrl.split(',').map((u) => import(u)));
const rl = Object.assign({}, ...entries.slice(1), entries[0]);
const seed = Number(seedArg);
const budgetMs = Number(msArg);
// Files the report/batch writers create land in a scratch directory.
process.chdir(mkdtempSync(join(tmpdir(), 'gear-rl-fuzz-')));

// Process-wide settings that some exports change; restored after every call.
const isa0 = rl.backend().isa;
const threads0 = rl.backend().threads;

// Option and field names the API reads, so that generated objects often get past the first check.
const KEYS = [
  'data', 'rows', 'vocab', 'dtype', 'temperature', 'out', 'signal', 'offsets', 'mask', 'values', 'targets',
  'logprob', 'oldLogprob', 'refLogprob', 'rolloutLogprob', 'advantages', 'rewards', 'kind', 'agg', 'mode',
  'entropy', 'logsumexp', 'stats', 'inPlace', 'vocabStart', 'max', 'sumExp', 'sumExpX', 'targetLogit',
  'epsilon', 'beta', 'coef', 'groups', 'group', 'lengths', 'tokens', 'weights', 'level', 'semantics',
  'lr', 'betas', 'weightDecay', 'momentum', 'threshold', 'scale', 'gamma', 'trajectories', 'reward',
  'prompt', 'observation', 'anchor', 'id', 'title', 'steps', 'numGenerations', 'bytes', 'reps', 'threads',
];

/** Typed arrays on every backing JS allows: plain, shared, resizable, offset views, Proxies. */
const typedArray = fc
  .tuple(
    fc.constantFrom('f32', 'f64', 'i32', 'u8', 'u16'),
    fc.array(fc.oneof(fc.integer({ min: -3, max: 12 }), fc.double(), fc.constantFrom(0, 1, -1, NaN)), { maxLength: 24 }),
    fc.constantFrom('plain', 'plain', 'plain', 'shared', 'resizable', 'view', 'proxy'),
  )
  .map(([t, xs, backing]) => {
    const C = { f32: Float32Array, f64: Float64Array, i32: Int32Array, u8: Uint8Array, u16: Uint16Array }[t];
    const n = xs.length;
    let a;
    if (backing === 'shared') a = new C(new SharedArrayBuffer((n + 1) * C.BYTES_PER_ELEMENT), 0, n);
    else if (backing === 'resizable') a = new C(new ArrayBuffer(n * C.BYTES_PER_ELEMENT, { maxByteLength: 4 * (n + 1) * C.BYTES_PER_ELEMENT }));
    else if (backing === 'view') a = new C(n + 2).subarray(1, n + 1);
    else a = new C(n);
    for (let i = 0; i < n; i++) a[i] = xs[i];
    return backing === 'proxy' ? new Proxy(a, {}) : a;
  });

const leaf = fc.oneof(
  fc.constantFrom(undefined, null, 0, -0, 1, 2, 3, 4, -1, 0.5, NaN, Infinity, -Infinity, 2 ** 31 - 1, 2 ** 31, 2 ** 53,
    true, false, '', 'sum', 'mean', 'max', 'ppo', 'grpo', 'float32', 'bfloat16', 'float16', 'token-mean', 'verl',
    'reverse_kl', 'low_var_kl', 'k3'),
  fc.integer({ min: -5, max: 40 }),
  fc.double(),
  fc.string({ maxLength: 8 }),
  fc.bigInt({ min: -10n, max: 10n }),
  fc.constant('symbol').map(() => Symbol('s')),
  fc.constant('aborted').map(() => AbortSignal.abort()),
  typedArray,
);

const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom(...KEYS), tie('value'), { maxKeys: 6 }),
    // an object whose getter hands out a different value on each read
    fc.tuple(fc.constantFrom(...KEYS), tie('value'), tie('value')).map(([k, a, b]) => {
      let n = 0;
      return Object.defineProperty({}, k, { enumerable: true, get: () => (n++ % 2 ? b : a) });
    }),
  ),
}));
const argsArb = fc.array(value, { maxLength: 4 });

const isGearError = (e) => e instanceof rl.GearError && typeof e.code === 'string' && e.code.startsWith('ERR_');
const describeError = (e) => (e instanceof Error ? `${e.constructor.name}${e.code ? ` ${e.code}` : ''}: ${e.message.slice(0, 200)}` : `non-Error ${typeof e}: ${String(e).slice(0, 100)}`);

function restore() {
  try {
    rl.setIsa(isa0);
    rl.setNumThreads(threads0);
  } catch {
    /* restore is best effort: the next call sees the same state either way */
  }
}

/** One call: undefined when it behaved, else what went wrong. */
async function callOnce(name, fn, args) {
  const isClass = /^class\s/.test(Function.prototype.toString.call(fn));
  const isAsync = name.endsWith('Async');
  let r;
  try {
    r = isClass ? new fn(...args) : fn(...args);
  } catch (e) {
    if (isAsync) return `threw synchronously: ${describeError(e)}`;
    return isGearError(e) ? undefined : describeError(e);
  } finally {
    restore();
  }
  if (isAsync && !(r instanceof Promise)) return `returned ${typeof r}, not a Promise`;
  if (r instanceof Promise) {
    try {
      await r;
    } catch (e) {
      return isGearError(e) ? undefined : `rejected with ${describeError(e)}`;
    } finally {
      restore();
    }
  }
  // Optimizers: a step with hostile gradients too.
  if (isClass && r && typeof r.step === 'function') {
    for (const g of [args[1], args[0], []]) {
      try {
        r.step(g);
      } catch (e) {
        if (!isGearError(e)) return `step(): ${describeError(e)}`;
      }
    }
  }
  return undefined;
}

// Exports that are not functions, and those whose every input is a file system path or that only
// measure the machine (memoryBandwidth runs for seconds at legal sizes), are not fuzzed here.
const SKIP = new Set(['memoryBandwidth']);
const names = Object.keys(rl)
  .filter((k) => typeof rl[k] === 'function' && !SKIP.has(k) && k !== 'GearError')
  .filter((k) => !onlyArg || onlyArg.split(',').includes(k))
  .sort();

const findings = [];
let calls = 0;
const perExport = Math.max(50, Math.floor(budgetMs / names.length));
for (const [i, name] of names.entries()) {
  process.stderr.write(`fuzz: ${name}\n`);
  const fn = rl[name];
  const res = await fc.check(
    fc.asyncProperty(argsArb, async (args) => {
      calls++;
      const bad = await callOnce(name, fn, args);
      if (bad) throw new Error(bad);
    }),
    { seed: seed + i, numRuns: 1e6, interruptAfterTimeLimit: perExport, markInterruptAsFailure: false, endOnFailure: true },
  );
  if (res.failed) {
    let shown;
    try {
      shown = fc.stringify(res.counterexample).slice(0, 400);
    } catch {
      shown = '(unprintable)';
    }
    findings.push({ export: name, args: shown, error: String(res.errorInstance?.message ?? res.error).slice(0, 300) });
  }
}
console.log(JSON.stringify({ exports: names.length, calls, findings }));
