// The C++ drivers' check: a failed condition is printed with its line and counted (from any thread);
// each driver's main prints "ok: 0 failures" (or the count) and exits 1 on any.
#pragma once
#include <atomic>
#include <cstdio>

static std::atomic<int> failures{0};
#define CHECK(cond)                                        \
  do {                                                     \
    if (!(cond)) {                                         \
      failures.fetch_add(1);                               \
      std::printf("FAIL line %d: %s\n", __LINE__, #cond);  \
    }                                                      \
  } while (0)
