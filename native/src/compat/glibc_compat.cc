// Linux link compatibility: lets one linux-x64 (or linux-arm64) binary built on a new glibc load on every
// glibc >= 2.28 (x86-64) / 2.17 (aarch64), with libstdc++ and libgcc linked in statically.
//
// The Linux link (native/linux-ldflags.mjs, used by binding.gyp, CMakeLists.txt and scripts/build-with.mjs)
// passes `-Wl,--wrap=<name>` for each name in native/sources.mjs `linuxWrap`: every reference to <name>
// (the library's own and those inside the static libstdc++.a / libgcc_eh.a) goes to __wrap_<name> below.
//  * glibc on x86-64 / aarch64: __wrap_<name> tail-calls the architecture's base symbol version
//    (GLIBC_2.2.5 / GLIBC_2.17). That is the same function under its old name: exp/log/pow/exp2/log2@2.29
//    only dropped the SVID error wrapper (which sets errno; the library builds with -fno-math-errno and
//    never reads it; the values are the same), and pthread_*@2.34 is the libpthread -> libc move.
//  * any other Linux libc or architecture: __wrap_<name> calls the default version (no floor promised).
// Symbols that do not exist at all before 2.28 get a local (hidden) definition instead, which the static
// link binds to: __libc_single_threaded (2.32), _dl_find_object (2.35), arc4random (2.36).
// test/packaging/glibc_floor.test.ts and pack.test.ts read the binaries' symbol versions and fail above
// the floor.
#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEAR_HIDDEN __attribute__((visibility("hidden")))

#if defined(__GLIBC__) && defined(__x86_64__)
#define GEAR_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__GLIBC__) && defined(__aarch64__)
#define GEAR_GLIBC_BASE "GLIBC_2.17"
#endif

#if defined(GEAR_GLIBC_BASE)
// gear_glibc_old_<name> is <name>@BASE for the assembler; __wrap_<name> jumps to it.
#define GEAR_WRAP(ret, name, params, args)                                          \
  extern "C" ret gear_glibc_old_##name params;                                      \
  __asm__(".symver gear_glibc_old_" #name "," #name "@" GEAR_GLIBC_BASE);           \
  extern "C" GEAR_HIDDEN ret __wrap_##name params { return gear_glibc_old_##name args; }
#else
#define GEAR_WRAP(ret, name, params, args) \
  extern "C" ret __real_##name params;     \
  extern "C" GEAR_HIDDEN ret __wrap_##name params { return __real_##name args; }
#endif

GEAR_WRAP(double, exp, (double x), (x))
GEAR_WRAP(double, exp2, (double x), (x))
GEAR_WRAP(double, log, (double x), (x))
GEAR_WRAP(double, log2, (double x), (x))
GEAR_WRAP(double, pow, (double x, double y), (x, y))
GEAR_WRAP(int, pthread_create, (pthread_t * t, const pthread_attr_t* a, void* (*f)(void*), void* arg), (t, a, f, arg))
GEAR_WRAP(int, pthread_join, (pthread_t t, void** ret), (t, ret))
GEAR_WRAP(int, pthread_detach, (pthread_t t), (t))
GEAR_WRAP(int, pthread_once, (pthread_once_t * once, void (*f)(void)), (once, f))
GEAR_WRAP(int, pthread_key_create, (pthread_key_t * key, void (*dtor)(void*)), (key, dtor))
#if defined(__GLIBC__)
GEAR_WRAP(int, __pthread_key_create, (pthread_key_t * key, void (*dtor)(void*)), (key, dtor))
#else
// glibc's internal name (libgcc's "is the program threaded" probe on glibc); other libcs lack it.
extern "C" GEAR_HIDDEN int __wrap___pthread_key_create(pthread_key_t* key, void (*dtor)(void*)) {
  return pthread_key_create(key, dtor);
}
#endif
GEAR_WRAP(int, pthread_key_delete, (pthread_key_t key), (key))
GEAR_WRAP(void*, pthread_getspecific, (pthread_key_t key), (key))
GEAR_WRAP(int, pthread_setspecific, (pthread_key_t key, const void* v), (key, v))

// The CUDA module's static CUDA runtime (native/sources.mjs linuxWrapCuda): __wrap_<name> is a tail jump
// to <name>@<version>, whatever the signature. x86-64 only (the CUDA prebuild's platform).
#if defined(GEAR_RL_CUDA) && defined(__GLIBC__) && defined(__x86_64__)
#define GEAR_WRAP_JUMP(name, version)                                            \
  __asm__(".symver gear_glibc_old_" #name "," #name "@" version "\n"            \
          ".text\n.globl __wrap_" #name "\n.hidden __wrap_" #name "\n"        \
          ".type __wrap_" #name ",@function\n__wrap_" #name ":\n"              \
          "jmp gear_glibc_old_" #name "@PLT\n.size __wrap_" #name ",.-__wrap_" #name "\n");
#define GEAR_WRAP_BASE(name) GEAR_WRAP_JUMP(name, "GLIBC_2.2.5")
GEAR_WRAP_BASE(dlclose) GEAR_WRAP_BASE(dlerror) GEAR_WRAP_BASE(dlopen) GEAR_WRAP_BASE(dlsym) GEAR_WRAP_BASE(dlvsym)
GEAR_WRAP_JUMP(dlmopen, "GLIBC_2.3.4")
GEAR_WRAP_BASE(pthread_condattr_setpshared) GEAR_WRAP_BASE(pthread_kill) GEAR_WRAP_BASE(pthread_mutex_trylock)
GEAR_WRAP_BASE(pthread_mutexattr_destroy) GEAR_WRAP_BASE(pthread_mutexattr_init)
GEAR_WRAP_BASE(pthread_mutexattr_setpshared) GEAR_WRAP_BASE(pthread_mutexattr_settype)
GEAR_WRAP_BASE(pthread_rwlock_destroy) GEAR_WRAP_BASE(pthread_rwlock_init) GEAR_WRAP_BASE(pthread_rwlock_rdlock)
GEAR_WRAP_BASE(pthread_rwlock_timedrdlock) GEAR_WRAP_BASE(pthread_rwlock_timedwrlock)
GEAR_WRAP_BASE(pthread_rwlock_tryrdlock) GEAR_WRAP_BASE(pthread_rwlock_trywrlock) GEAR_WRAP_BASE(pthread_rwlock_unlock)
GEAR_WRAP_BASE(pthread_rwlock_wrlock) GEAR_WRAP_BASE(pthread_rwlockattr_destroy) GEAR_WRAP_BASE(pthread_rwlockattr_init)
GEAR_WRAP_BASE(pthread_rwlockattr_setpshared) GEAR_WRAP_BASE(pthread_spin_destroy) GEAR_WRAP_BASE(pthread_spin_init)
GEAR_WRAP_BASE(pthread_spin_lock) GEAR_WRAP_BASE(pthread_spin_trylock) GEAR_WRAP_BASE(pthread_spin_unlock)
GEAR_WRAP_BASE(sem_destroy) GEAR_WRAP_BASE(sem_init) GEAR_WRAP_BASE(sem_post) GEAR_WRAP_BASE(sem_timedwait)
GEAR_WRAP_BASE(sem_trywait) GEAR_WRAP_BASE(sem_wait) GEAR_WRAP_BASE(shm_open) GEAR_WRAP_BASE(shm_unlink)
#endif

#if defined(GEAR_GLIBC_BASE)
#if __GLIBC_PREREQ(2, 32)
// libstdc++ skips atomic reference counting while this is nonzero. Ours stays 0 ("maybe threaded"):
// always the atomic path, which is correct in every process.
extern "C" {
GEAR_HIDDEN char __libc_single_threaded = 0;
}
#endif

#if __GLIBC_PREREQ(2, 35)
#include <dlfcn.h>
#include <link.h>
#if !DLFO_STRUCT_HAS_EH_DBASE && !DLFO_STRUCT_HAS_EH_COUNT
// libgcc's unwinder (static libgcc_eh) finds a frame's unwind tables with _dl_find_object when built
// against glibc >= 2.35, and with dl_iterate_phdr before: the same lookup here, over dl_iterate_phdr.
namespace {
struct FindObject {
  uintptr_t pc;
  dl_find_object* out;
};

int find_object_cb(dl_phdr_info* info, size_t, void* data) {
  FindObject* f = static_cast<FindObject*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool inside = false;
  void* eh = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + p.p_vaddr;
    if (p.p_type == PT_LOAD) {
      const uintptr_t end = start + p.p_memsz;
      if (start < lo) lo = start;
      if (end > hi) hi = end;
      if (f->pc >= start && f->pc < end) inside = true;
    } else if (p.p_type == DLFO_EH_SEGMENT_TYPE) {
      eh = reinterpret_cast<void*>(start);
    }
  }
  if (!inside) return 0;
  memset(f->out, 0, sizeof *f->out);
  f->out->dlfo_map_start = reinterpret_cast<void*>(lo);
  f->out->dlfo_map_end = reinterpret_cast<void*>(hi);
  f->out->dlfo_eh_frame = eh;
  return 1;
}
}  // namespace

extern "C" GEAR_HIDDEN int _dl_find_object(void* pc, dl_find_object* out) noexcept {
  FindObject f{reinterpret_cast<uintptr_t>(pc), out};
  return dl_iterate_phdr(find_object_cb, &f) ? 0 : -1;
}
#endif
#endif

#if __GLIBC_PREREQ(2, 36)
#include <sys/random.h>
// Only std::random_device("arc4random") calls it (the library never does); same contract as glibc's:
// 32 bits from the kernel's CSPRNG, never failing (terminates when no randomness source exists).
extern "C" GEAR_HIDDEN uint32_t arc4random(void) noexcept {
  uint32_t v;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) break;  // ENOSYS: kernel < 3.17
  }
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    size_t got = 0;
    while (got < sizeof v) {
      const ssize_t n = read(fd, reinterpret_cast<char*>(&v) + got, sizeof v - got);
      if (n > 0) got += static_cast<size_t>(n);
      else if (n < 0 && errno == EINTR) continue;
      else break;
    }
    close(fd);
    if (got == sizeof v) return v;
  }
  abort();
}
#endif
#endif  // GEAR_GLIBC_BASE

#endif  // __linux__
