// One Register function per binding file (one file per op family, named like the op). addon.cc calls
// each at load; add a line here and in addon.cc when adding an op family.
#pragma once
#include <napi.h>

namespace gear::addon {
void RegisterBackend(Napi::Env env, Napi::Object exports);   // backend_binding.cc
void RegisterSegment(Napi::Env env, Napi::Object exports);   // segment_binding.cc
void RegisterBandwidth(Napi::Env env, Napi::Object exports);  // bandwidth_binding.cc
void RegisterGear(Napi::Env env, Napi::Object exports);       // gear_binding.cc
void RegisterOptim(Napi::Env env, Napi::Object exports);       // optim_binding.cc
void RegisterPolicyLoss(Napi::Env env, Napi::Object exports);  // policy_loss_binding.cc
void RegisterTokenStats(Napi::Env env, Napi::Object exports);  // token_stats_binding.cc
void RegisterDivergence(Napi::Env env, Napi::Object exports);  // divergence_binding.cc
void RegisterCuda(Napi::Env env, Napi::Object exports);        // cuda/cuda_binding.cc (CUDA module only)
}  // namespace gear::addon
