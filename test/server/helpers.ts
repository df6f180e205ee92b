// Shared helpers for the server-parser tests: fixture loading and float32 rounding of hand-written values.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'vitest';
import { GearError } from '../../ts/index.js';

const DIR = resolve(import.meta.dirname, '../fixtures/server');

/** A fresh parsed copy of a fixture (tests may mutate it). */
export function fixture(path: string): any {
  return JSON.parse(readFileSync(resolve(DIR, path), 'utf8'));
}

/** Hand-written log-probs as the float32 values a parser must store. */
export function f32(xs: number[]): number[] {
  return Array.from(new Float32Array(xs));
}

/** Runs `fn` and checks it throws a GearError with `code` whose message matches `msg`. */
export function throwsCode(fn: () => unknown, code: string, msg?: RegExp | string): GearError {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err, 'expected a GearError').toBeInstanceOf(GearError);
  const g = err as GearError;
  expect(g.code, g.message).toBe(code);
  if (msg !== undefined) expect(g.message).toMatch(msg);
  return g;
}
