// MinGW-w64 builds for Windows (scripts/build-win32.mjs): the addon imports the Node-API functions from
// "node.exe" through a delay-load table, and this hook hands the delay-load helper the module of the
// running executable instead, so the addon binds to whichever program loaded it (node.exe under another
// name, Electron). node-gyp compiles its own copy of this hook into MSVC builds, hence MinGW only.
#if defined(_WIN32) && defined(__MINGW32__)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <delayimp.h>
#include <string.h>

static FARPROC WINAPI gear_load_exe_hook(unsigned event, PDelayLoadInfo info) {
  if (event != dliNotePreLoadLibrary || _stricmp(info->szDll, "node.exe") != 0) return nullptr;
  return reinterpret_cast<FARPROC>(GetModuleHandleW(nullptr));
}

decltype(__pfnDliNotifyHook2) __pfnDliNotifyHook2 = gear_load_exe_hook;
#endif
