// The instruction-set paths of this machine, for tests that run every kernel on every path. Never a
// hard-coded list: an AVX2-only CPU has no 'avx512', an aarch64 one has 'neon' instead of both.
import { afterAll } from 'vitest';
import * as rl from '../../ts/index.js';

/** Every ISA this CPU runs, lowest first ('baseline' always first). */
export const ISAS: readonly rl.Isa[] = rl.backend().isas;
/** The best ISA this CPU runs. */
export const BEST: rl.Isa = ISAS[ISAS.length - 1]!;
/** The ISA selected at load (GEAR_RL_ISA honoured): what the rest of the suite runs on. */
export const LOADED: rl.Isa = rl.backend().isa as rl.Isa;
const loadedThreads = rl.backend().threads;

/** Puts the ISA (and thread count) back to what was selected at load once the file's tests end. */
export function restoreBackendAfterAll(): void {
  afterAll(() => {
    rl.setIsa(LOADED);
    rl.setNumThreads(loadedThreads);
  });
}

/** Runs `fn` on every ISA of this CPU, then restores the load-time ISA. */
export function eachIsa(fn: (isa: rl.Isa) => void): void {
  try {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      fn(isa);
    }
  } finally {
    rl.setIsa(LOADED);
  }
}
