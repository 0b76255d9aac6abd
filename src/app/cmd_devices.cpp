// hearth devices: the Vulkan devices this machine offers (the N of a later `--device vulkan:N`), or why there are none.

#include <cstdio>

#include "app/commands.h"
#include "util/units.h"
#if HEARTH_VULKAN
#include "gpu/context.h"
#endif

namespace hearth::app {

Command add_devices(CLI::App& app) {
  return [] {
#if HEARTH_VULKAN
    auto devices = gpu::list_devices();
    if (!devices) {
      std::fprintf(stderr, "hearth devices: %s\n", devices.error().message.c_str());
      return 1;
    }
    if (devices->empty()) {
      std::printf("no Vulkan device (a Vulkan driver is installed, but it offers no device)\n");
      return 1;
    }
    std::printf("%-6s %-11s %-12s %s\n", "index", "type", "VRAM", "name");
    for (const gpu::DeviceInfo& d : *devices) {
      std::printf("%-6d %-11s %-12s %s%s\n", d.index, gpu::device_type_name(d.type), format_bytes(d.vram_bytes).c_str(),
                  d.name.c_str(), d.has_compute_queue ? "" : " (no compute queue)");
    }
    return 0;
#else
    std::printf("built without Vulkan (-DHEARTH_VULKAN=ON)\n");
    return 1;
#endif
  };
}

}  // namespace hearth::app
