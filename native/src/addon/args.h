// Forwarding header: the argument layer lives in native/src/core/args.h, the sync/async path in
// native/src/core/invoke.h.
#pragma once
#include "../core/args.h"
#include "../core/invoke.h"
