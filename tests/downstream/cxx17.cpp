// SPDX-License-Identifier: Apache-2.0
// Every public header from C++17 with -Wall -Wextra -pedantic -Werror: the
// umbrella header and each on its own, the inline helpers called.
#include <kdag/kdag.h>
#include <kdag/cache.h>
#include <kdag/compile.h>
#include <kdag/graph.h>
#include <kdag/kernel.h>
#include <kdag/mathdx.h>
#include <kdag/raw.h>
#include <kdag/session.h>
#include <kdag/status.h>
#include <kdag/tensor.h>
#include <kdag/version.h>

#include <cstdio>

int main() {
  kd_tensor none{};
  kd_garg args[] = {kd_g_in(kd_whole(none)), kd_g_value(kd_arg_f32(1.5f)), kd_g_value(kd_arg_i64(-2))};
  kd_launch_config config{};
  kd_status st = kd_launch_config_flat(1000, 128, 0, &config);
  if (st != KD_OK || args[0].is_tensor != 1 || args[1].is_tensor != 0) return 1;
  if (kd_version() != KD_VERSION) {
    std::printf("headers %u, library %u\n", KD_VERSION, kd_version());
    return 1;
  }
  std::printf("kdag %s from C++17: %s\n", kd_version_string(), kd_status_name(KD_ERR_ALIASING));
  return 0;
}
