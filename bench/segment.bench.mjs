// segmentBroadcast / segmentReduce over packed rows: pure streaming ops, so they should run at memory
// speed. Rows of 1..2047 tokens (mean ~1024), 70 % of tokens unmasked.
import { packedRows } from './lib/packed.mjs';
export const name = 'segment';

function batch(tokens, seed = 1) {
  const { offsets, rows, n, rnd } = packedRows(tokens, seed);
  const mask = new Uint8Array(n);
  for (let i = 0; i < n; i++) mask[i] = rnd() < 0.7 ? 1 : 0;
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) values[i] = rnd() * 2 - 1;
  const rowValues = Float64Array.from({ length: rows }, () => rnd() * 2 - 1);
  return { offsets, mask, values, rowValues, rows, n };
}

export default async function run({ rl, quick, h }) {
  const N = quick ? 1_000_000 : 10_000_000;
  const { offsets, mask, values, rowValues, rows, n } = batch(N);
  const reps = quick ? 3 : 9;
  const shape = [n];
  const note = `${rows} rows`;

  // The same broadcast written as a plain JS loop, for scale.
  let t = await h.time(() => {
    const out = new Float32Array(n);
    for (let r = 0; r < rows; r++) {
      const v = rowValues[r];
      for (let i = offsets[r]; i < offsets[r + 1]; i++) out[i] = mask[i] ? v : 0;
    }
    return out;
  }, { reps });
  const jsMs = t.ms;
  // Broadcast: reads the mask (1 B/token), writes float32 (4 B/token).
  t = await h.time(() => rl.segmentBroadcast(rowValues, offsets, mask), { reps });
  h.row({ op: 'segmentBroadcast', dtype: 'float32', shape, ms: t.ms, bytes: n * 5, peer: 'plain JS loop', peerMs: jsMs, note, floorKind: 'copy' });
  // The same into a reused output (a training loop's buffer): no allocation or first-touch page faults.
  const out = new Float32Array(n);
  t = await h.time(() => rl.segmentBroadcast(rowValues, offsets, mask, { out }), { reps });
  h.row({ op: 'segmentBroadcast(out)', dtype: 'float32', shape, ms: t.ms, bytes: n * 5, note: `${note}, reused output`, floorKind: 'copy' });

  for (const op of ['sum', 'mean', 'max']) {
    t = await h.time(() => rl.segmentReduce(values, offsets, op, mask), { reps });
    h.row({ op: `segmentReduce(${op})`, dtype: 'float32', shape, ms: t.ms, bytes: n * 5, note });
  }
  const v64 = Float64Array.from(values);
  t = await h.time(() => rl.segmentReduce(v64, offsets, 'sum', mask), { reps });
  h.row({ op: 'segmentReduce(sum)', dtype: 'float64', shape, ms: t.ms, bytes: n * 9, note });
  t = await h.time(() => rl.segmentReduceAsync(v64, offsets, 'sum', mask), { reps });
  h.row({ op: 'segmentReduceAsync(sum)', dtype: 'float64', shape, ms: t.ms, bytes: n * 9, note });
}
