{
  # Canonical CPU build (node-gyp): used by prebuildify for shipped binaries and by node-gyp-build when
  # no prebuild matches. The source list is shared with CMakeLists.txt through native/sources.json.
  "targets": [
    {
      "target_name": "gear_rl",
      "sources": ["<!@(node -p \"require('./native/sources.json').cpu.join(' ')\")"],
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
      "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"],
      "cflags": ["-O3", "-ffp-contract=off"],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "MACOSX_DEPLOYMENT_TARGET": "11.0",
        "OTHER_CPLUSPLUSFLAGS": ["-O3", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"]
      }
    }
  ]
}
