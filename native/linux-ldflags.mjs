// Prints the Linux link flags of binding.gyp (space-separated), for the compiler in $CXX (default g++):
//  * -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL when the compiler finds libstdc++.a: the
//    binary then needs no GLIBCXX/CXXABI version and keeps the C++ runtime's symbols private (the
//    shipped prebuild, built on Debian, is linked so). Where libstdc++.a is not installed (Fedora/RHEL
//    without libstdc++-static, for instance) a source build links the shared runtime of that machine.
//  * -Wl,-z,nodelete: the module is never unmapped. Node unloads an addon when the last environment that
//    loaded it (a worker) ends, but the addon's thread pool is process-wide and its idle threads still
//    run the module's code: unmapping it under them is a SIGSEGV (addon.cc pins it the same way on
//    macOS and Windows, which have no such link flag).
//  * -Wl,--wrap=<name> for each name of native/sources.mjs `linuxWrap`: references to glibc symbols newer
//    than the floor go through native/src/compat/glibc_compat.cc, which binds them to old versions.
import { execSync } from 'node:child_process';
import { linuxWrap, linuxWrapCuda } from './sources.mjs';

// --cuda: the CUDA module's link also wraps its static CUDA runtime's references (linuxWrapCuda) and names
// libpthread, libdl and librt, where glibc < 2.34 keeps those functions (stubs on later glibc).
const cudaModule = process.argv.includes('--cuda');

let staticRuntime = false;
try {
  // prints the full path when found, the bare name when not
  const lib = execSync(`${process.env.CXX || 'g++'} -print-file-name=libstdc++.a`, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  staticRuntime = lib.trim().includes('/');
} catch {
  // no usable compiler command here: node-gyp reports the real error when it compiles
}
const flags = [
  '-Wl,-z,nodelete',
  ...(staticRuntime ? ['-static-libstdc++', '-static-libgcc', '-Wl,--exclude-libs,ALL'] : []),
  ...linuxWrap.map((s) => `-Wl,--wrap=${s}`),
  ...(cudaModule ? [...linuxWrapCuda.map(([s]) => `-Wl,--wrap=${s}`), '-Wl,--no-as-needed', '-l:libpthread.so.0', '-l:libdl.so.2', '-l:librt.so.1', '-Wl,--as-needed'] : []),
];
console.log(flags.join(' '));
