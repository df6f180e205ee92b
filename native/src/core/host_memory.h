// The host's memory, as the device runtimes report it in their out-of-memory messages and as the host
// device sizes its default capacity.
#pragma once

#include <cstdint>

#include "gear/types.h"

namespace gear {

// Host memory available (free plus reclaimable: Linux's MemAvailable) and in all, bytes; -1 where unknown.
void host_memory(int64_t* available, int64_t* total);

// ERR_OUT_OF_MEMORY for page-locked host memory, one wording for every device runtime: the bytes asked
// (for `what`) and the host memory available.
Status host_oom(int64_t bytes, const char* what);

}  // namespace gear
