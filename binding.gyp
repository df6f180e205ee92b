{
  # Canonical CPU build (node-gyp): used by prebuildify for shipped binaries and by node-gyp-build when
  # no prebuild matches. The source list comes from the directory layout through native/sources.mjs (as
  # in CMakeLists.txt and the scripts/ builds): a new source file needs no edit here.
  "targets": [
    {
      "target_name": "gear_rl",
      "sources": ["<!@(node native/sources.mjs cpu)"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/include"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "GEAR_RL_VERSION=\"<!(node -p \"require('./package.json').version\")\""
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      # -ffp-contract=off on every build (here, in xcode_settings and in CMakeLists.txt): the compiler never
      # fuses a*b + c into an FMA on its own (g++ does by default for aarch64, and for x86-64 wherever FMA is
      # enabled), so results depend only on the kernels' explicit FMAs, not on the target or the compiler:
      # the baseline paths of x86-64 and aarch64 agree bit for bit (test/platform/aarch64.test.ts).
      "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"],
      "cflags": ["-O3", "-ffp-contract=off"],
      "conditions": [
        ["OS=='linux'", {
          # One binary for every glibc >= 2.28 (x86-64): libstdc++/libgcc linked in and kept private (no
          # GLIBCXX version needed at load) where the compiler has libstdc++.a, and references to glibc
          # symbols newer than the floor bound to their old versions (native/src/compat/glibc_compat.cc).
          "ldflags": ["<!@(node native/linux-ldflags.mjs)"]
        }]
      ],
      # MSVC (a source build on Windows; the shipped win32-x64 binary is built with MinGW-w64): C++17,
      # exceptions, no FP contraction. Its target regions are empty (gear/isa_target.h): MSVC compiles the
      # AVX2 / AVX-512 intrinsics without target attributes.
      "msvs_settings": {
        "VCCLCompilerTool": {
          "ExceptionHandling": 1,
          "AdditionalOptions": ["/std:c++17", "/O2", "/fp:precise", "/Zc:__cplusplus", "/utf-8"]
        }
      },
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "MACOSX_DEPLOYMENT_TARGET": "11.0",
        "OTHER_CPLUSPLUSFLAGS": ["-O3", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"]
      }
    }
  ]
}
