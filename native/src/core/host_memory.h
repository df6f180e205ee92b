// The host's memory, as the device runtimes report it in their out-of-memory messages and as the host
// device sizes its default capacity.
#pragma once

#include <cstdint>

namespace gear {

// Host memory available (free plus reclaimable: Linux's MemAvailable) and in all, bytes; -1 where unknown.
void host_memory(int64_t* available, int64_t* total);

}  // namespace gear
