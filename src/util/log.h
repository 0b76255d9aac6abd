#pragma once
// Logging goes through spdlog; this header keeps the include in one place.
#include <spdlog/spdlog.h>
