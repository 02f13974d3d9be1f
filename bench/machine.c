/* SPDX-License-Identifier: Apache-2.0 */
/* The host half of the machine description. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench/harness.h"

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
  size_t lead = strspn(s, " \t");
  if (lead) memmove(s, s + lead, strlen(s + lead) + 1);
}

void kb_machine_fill_host(kb_machine *m) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      /* x86 says "model name", arm64 kernels often only "CPU part". */
      if (!strncmp(line, "model name", 10)) {
        const char *colon = strchr(line, ':');
        if (colon) {
          snprintf(m->host_cpu, sizeof m->host_cpu, "%s", colon + 1);
          trim(m->host_cpu);
        }
        break;
      }
    }
    fclose(f);
  }
  if (!m->host_cpu[0]) snprintf(m->host_cpu, sizeof m->host_cpu, "unknown");
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  m->host_threads = n > 0 ? (int)n : 0;
  if (gethostname(m->hostname, sizeof m->hostname) != 0) m->hostname[0] = '\0';
  m->hostname[sizeof m->hostname - 1] = '\0';
  struct utsname u;
  if (uname(&u) == 0) snprintf(m->os, sizeof m->os, "%.60s %.120s %.60s", u.sysname, u.release, u.machine);
}
