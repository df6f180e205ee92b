// Seeded packed-row layouts shared by the benches: rows of 1..2047 tokens (mean ~1024) until `tokens`
// tokens, with the generator returned so each bench draws its own per-token data from the same stream.
export function packedRows(tokens, seed = 1) {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const lens = [];
  let n = 0;
  while (n < tokens) {
    const l = Math.min(tokens - n, 1 + Math.floor(rnd() * 2047));
    lens.push(l);
    n += l;
  }
  const offsets = new Int32Array(lens.length + 1);
  lens.forEach((l, i) => (offsets[i + 1] = offsets[i] + l));
  return { offsets, rows: lens.length, n, rnd };
}
