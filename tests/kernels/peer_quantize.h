#pragma once
// Test-time access to the independent peer in ../shared/peers/llama.cpp-b4748: llama-quantize makes a real
// quantization mix from the shared synth-tiny-f16.gguf, and gguf-py (with Debian's python3-numpy) dequantizes it.
// Nothing large is committed: the files are made in the build's test-tmp folder when a test runs. Each returns
// a PeerFile: `absent` when the peer (or python3 with numpy) is not on this machine, so the caller can GTEST_SKIP
// with `message`; a non-empty `message` without `absent` is a real failure of the peer tool.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hearth::peer {

inline const std::string kPeerDir = std::string(HEARTH_SHARED_DIR) + "/peers/llama.cpp-b4748";
inline const std::string kSourceModel = std::string(HEARTH_SHARED_DIR) + "/models/synthetic/synth-tiny-f16.gguf";

struct PeerFile {
  std::string path;     // empty unless the tool succeeded
  std::string message;  // why there is no path
  bool absent = false;  // the peer or python is missing: skip, don't fail
};

inline std::string tmp_path(const std::string& name) {
  std::filesystem::create_directories(HEARTH_TEST_TMP_DIR);
  // The pid keeps parallel test processes (ctest -j) from writing the same file.
  return std::string(HEARTH_TEST_TMP_DIR) + "/" + name + "." + std::to_string(::getpid());
}

inline bool run(const std::string& command) {
  return std::system(command.c_str()) == 0;
}

// synth-tiny-f16.gguf quantized by llama-quantize to `mix` (e.g. "Q5_K_M").
inline PeerFile quantize(const std::string& mix) {
  const std::string tool = kPeerDir + "/llama-quantize";
  if (!std::filesystem::exists(tool) || !std::filesystem::exists(kSourceModel)) {
    return {{}, "peer llama-quantize or synth-tiny-f16.gguf not found under " + std::string(HEARTH_SHARED_DIR), true};
  }
  const std::string out = tmp_path("synth-tiny-" + mix + ".gguf");
  const std::string log = out + ".log";
  if (!run("LD_LIBRARY_PATH='" + kPeerDir + "' '" + tool + "' '" + kSourceModel + "' '" + out + "' " + mix + " >'" +
           log + "' 2>&1")) {
    return {{}, "llama-quantize " + mix + " failed; see " + log, false};
  }
  std::filesystem::remove(log);
  return {out, {}, false};
}

// Runs tests/kernels/gguf_py_dequant.py on `gguf`; the dump's format is described in that script.
inline PeerFile dequantize_with_gguf_py(const std::string& gguf) {
  if (!std::filesystem::exists(kPeerDir + "/gguf-py/gguf/quants.py")) {
    return {{}, "gguf-py not found in " + kPeerDir, true};
  }
  // Debian's interpreter first: python3-numpy installs there, and a pyenv python3 earlier on PATH may lack it.
  std::string python;
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    if (run(std::string(candidate) + " -c 'import numpy' >/dev/null 2>&1")) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) return {{}, "python3 with numpy is not installed (apt-get install python3-numpy)", true};
  const std::string out = gguf + ".gguf-py.bin";
  if (!run(python + " '" + std::string(HEARTH_TEST_SOURCE_DIR) + "/gguf_py_dequant.py' '" + kPeerDir + "/gguf-py' '" +
           gguf + "' '" + out + "'")) {
    return {{}, "gguf_py_dequant.py failed on " + gguf, false};
  }
  return {out, {}, false};
}

}  // namespace hearth::peer
