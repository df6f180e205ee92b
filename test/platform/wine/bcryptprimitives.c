// Stand-in for Windows' bcryptprimitives.dll, which Wine 8 (Debian 12) lacks. Rust-built Node addons
// (the win32 builds of rolldown and lightningcss that vitest loads) import ProcessPrng from it; the real
// function fills the buffer from the system CSPRNG and always succeeds. Installed only into the private
// Wine prefix that scripts/wine-node.mjs sets up for the win32 test run; never shipped.
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T n) {
  while (n) {
    ULONG k = n > 0x40000000 ? 0x40000000 : (ULONG)n;  // RtlGenRandom takes a ULONG length
    if (!RtlGenRandom(data, k)) return FALSE;
    data += k;
    n -= k;
  }
  return TRUE;
}
