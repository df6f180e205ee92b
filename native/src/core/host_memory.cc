#include "host_memory.h"

#include <cstdio>
#include <string>

#if defined(_WIN32)
#include <windows.h>
#elif defined(__linux__)
#include <sys/sysinfo.h>
#else
#include <unistd.h>
#endif

namespace gear {

void host_memory(int64_t* available, int64_t* total) {
  *available = -1;
  *total = -1;
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) *available = kb * 1024;
      else if (std::sscanf(line, "MemTotal: %lld kB", &kb) == 1) *total = kb * 1024;
    }
    std::fclose(f);
  }
  // without /proc (a sandbox): the kernel's counters, free memory only
  struct sysinfo si;
  if ((*available < 0 || *total < 0) && sysinfo(&si) == 0) {
    if (*available < 0) *available = static_cast<int64_t>(si.freeram) * si.mem_unit;
    if (*total < 0) *total = static_cast<int64_t>(si.totalram) * si.mem_unit;
  }
#elif defined(_WIN32)
  MEMORYSTATUSEX m;
  m.dwLength = sizeof m;
  if (GlobalMemoryStatusEx(&m)) {
    *available = static_cast<int64_t>(m.ullAvailPhys);
    *total = static_cast<int64_t>(m.ullTotalPhys);
  }
#elif defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) *total = static_cast<int64_t>(pages) * size;
#endif
}

Status host_oom(int64_t bytes, const char* what) {
  int64_t available = -1, total = -1;
  host_memory(&available, &total);
  const auto n = [](int64_t x) { return x < 0 ? std::string("unknown") : std::to_string(x); };
  return error(Code::OutOfMemory, std::string("host memory: expected ") + std::to_string(bytes) +
                                      " bytes of page-locked memory (" + what + "), got " + n(available) +
                                      " bytes available of " + n(total));
}

}  // namespace gear
