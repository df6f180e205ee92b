// The addon's source lists, derived from the directory layout so that a new source file needs no edit
// anywhere: every build (binding.gyp, CMakeLists.txt, scripts/build-win32.mjs, scripts/cross-build.mjs,
// scripts/build-with.mjs through binding.gyp) reads them from here.
//
//   cpu       every .cc of native/src/{addon,core,cpu,compat}: the CPU module (a file for another
//             platform compiles to nothing elsewhere, as compat/glibc_compat.cc and
//             addon/win32_delay_load_hook.cc do)
//   cuda      every .cu and .cc of native/src/cuda: added to `cpu` for the CUDA module (CMakeLists.txt)
//   linuxWrap glibc symbols whose references Linux builds bind to their old versions
//             (native/linux-ldflags.mjs, native/src/compat/glibc_compat.cc); linuxWrapCuda, the CUDA
//             module's extra ones
//
// Paths are relative to the package root, with "/" separators, sorted (a stable order on every file
// system). As a command: `node native/sources.mjs cpu` prints a list separated by spaces (binding.gyp's
// `<!@(...)`), `node native/sources.mjs cpu cuda` the two lists together.
import { readdirSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The files of native/src/`dir` whose names end with one of `exts`, as sorted package-relative paths. */
function sourcesIn(dir, exts) {
  return readdirSync(join(ROOT, 'native', 'src', dir), { withFileTypes: true })
    .filter((e) => e.isFile() && exts.some((x) => e.name.endsWith(x)))
    .map((e) => `native/src/${dir}/${e.name}`)
    .sort();
}

export const cpu = ['addon', 'core', 'cpu', 'compat'].flatMap((d) => sourcesIn(d, ['.cc']));
export const cuda = sourcesIn('cuda', ['.cu', '.cc']);
// The CUDA module's extra glibc references (the static CUDA runtime's): [name, x86-64 version before the
// libpthread / libdl / librt move into libc in 2.34]. Bound to those by native/src/compat/glibc_compat.cc.
export const linuxWrapCuda = [
  ...['dlclose', 'dlerror', 'dlopen', 'dlsym', 'dlvsym', 'pthread_condattr_setpshared', 'pthread_kill',
    'pthread_mutex_trylock', 'pthread_mutexattr_destroy', 'pthread_mutexattr_init', 'pthread_mutexattr_setpshared',
    'pthread_mutexattr_settype', 'pthread_rwlock_destroy', 'pthread_rwlock_init', 'pthread_rwlock_rdlock',
    'pthread_rwlock_timedrdlock', 'pthread_rwlock_timedwrlock', 'pthread_rwlock_tryrdlock', 'pthread_rwlock_trywrlock',
    'pthread_rwlock_unlock', 'pthread_rwlock_wrlock', 'pthread_rwlockattr_destroy', 'pthread_rwlockattr_init',
    'pthread_rwlockattr_setpshared', 'pthread_spin_destroy', 'pthread_spin_init', 'pthread_spin_lock',
    'pthread_spin_trylock', 'pthread_spin_unlock', 'sem_destroy', 'sem_init', 'sem_post', 'sem_timedwait',
    'sem_trywait', 'sem_wait', 'shm_open', 'shm_unlink'].map((n) => [n, 'GLIBC_2.2.5']),
  ['dlmopen', 'GLIBC_2.3.4'],
];
export const linuxWrap = [
  'exp', 'exp2', 'log', 'log2', 'pow',
  'pthread_create', 'pthread_join', 'pthread_detach', 'pthread_once',
  'pthread_key_create', '__pthread_key_create', 'pthread_key_delete',
  'pthread_getspecific', 'pthread_setspecific',
];

// Run as a command (compared as real paths: the aarch64 build runs it through a linked native/ folder).
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) {
  const lists = { cpu, cuda, linuxWrap, linuxWrapCuda: linuxWrapCuda.map(([n, v]) => `${n}@${v}`) };
  const names = process.argv.slice(2);
  const unknown = names.filter((n) => !Object.hasOwn(lists, n));
  if (names.length === 0 || unknown.length) {
    console.error(`usage: node native/sources.mjs <${Object.keys(lists).join('|')}>...${unknown.length ? ` (unknown: ${unknown.join(' ')})` : ''}`);
    process.exit(2);
  }
  console.log(names.flatMap((n) => lists[n]).join(' '));
}
