/**
 * Loads the native addon (a prebuilt binary from `prebuilds/`, or a local build) and registers
 * {@link GearError} with it so that native argument checks throw the same error class.
 *
 * @internal
 * @module
 */
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GearError } from './errors.js';

/** Package root: this file sits in `ts/` (sources) or `dist/` (compiled), one level below it. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const require = createRequire(import.meta.url);

/** The addon's raw functions. Each wrapper in `ts/ops` documents and validates the arguments. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type NativeFn = (...args: any[]) => any;
export interface NativeAddon {
  setErrorClass(cls: unknown): void;
  backend(): { variant: string; isa: string; detectedIsa: string; threads: number; version: string };
  setNumThreads(n: number): void;
  setIsa(isa: string): string;
  [name: string]: NativeFn;
}

function load(): NativeAddon {
  let addon: NativeAddon;
  try {
    const gypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
    addon = gypBuild(PACKAGE_ROOT);
  } catch (e) {
    throw new GearError(
      'ERR_NATIVE',
      `gear-rl native addon: expected a prebuilt binary for ${process.platform}-${process.arch} or a local build, ` +
        `got none that loads (${(e as Error).message}). Rebuild with \`npm rebuild gear-rl\` (needs a C++17 compiler).`,
    );
  }
  addon.setErrorClass(GearError);
  return addon;
}

/** The loaded addon (loaded once, at import). */
export const native: NativeAddon = load();

/**
 * Runs an abortable native call: creates the shared abort flag the kernel polls between row blocks and
 * sets it when `signal` fires. Rejects with `ERR_ABORTED` at once if the signal already fired.
 */
export async function abortable<T>(signal: AbortSignal | undefined, call: (flag: Int32Array | null) => Promise<T>): Promise<T> {
  if (signal === undefined) return call(null);
  if (!(signal instanceof AbortSignal)) {
    throw new GearError('ERR_OPTION', `signal: expected an AbortSignal, got ${typeof signal}`);
  }
  if (signal.aborted) throw new GearError('ERR_ABORTED', 'aborted: the AbortSignal had already fired');
  const flag = new Int32Array(1);
  const onAbort = () => Atomics.store(flag, 0, 1);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(flag);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
