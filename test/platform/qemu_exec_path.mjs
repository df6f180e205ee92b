// Preloaded (NODE_OPTIONS=--import) into every arm64 Node of the emulated test run: an emulated process
// cannot exec a foreign-architecture binary itself, so process.execPath (what vitest's fork pool and the
// tests start children with) becomes a host script that runs the same Node through qemu-user.
if (process.env.GEAR_RL_QEMU_NODE) process.execPath = process.env.GEAR_RL_QEMU_NODE;
