/* SPDX-License-Identifier: Apache-2.0 */
/* A recording NVTX tool (tests/nvtx_inject.h). It fills the slots of NVTX's
 * callback tables (the injection interface of nvtx3's nvtxDetail headers:
 * InitializeInjectionNvtx2, the CORE2 and CUDA modules) with functions
 * that append to one array under a lock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>

#include "nvtx_inject.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT const kdt_nvtx_event *kdt_nvtx_events(uint32_t *out_count);
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table);
#define MAX_EVENTS 65536

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kdt_nvtx_event events[MAX_EVENTS];
static uint32_t count;

/* A domain handle is the address of one of these. */
struct nvtxDomainRegistration_st {
  char name[64];
};
static struct nvtxDomainRegistration_st domains[16];
static uint32_t domain_count;

/* A registered string's handle is its copy, in a pool that lives as long
 * as the process (a tool's registrations do). */
struct nvtxStringRegistration_st {
  char text[96];
};
static struct nvtxStringRegistration_st strings[4096];
static uint32_t string_count;

static void record(kdt_nvtx_kind kind, nvtxDomainHandle_t d, uint32_t category, int registered, const char *text) {
  pthread_mutex_lock(&mu);
  if (count < MAX_EVENTS) {
    kdt_nvtx_event *e = &events[count++];
    e->kind = kind;
    e->category = category;
    e->registered = registered;
    e->in_kdag = d && strcmp(d->name, "kdag") == 0;
    snprintf(e->text, sizeof e->text, "%s", text ? text : "");
  }
  pthread_mutex_unlock(&mu);
}

static nvtxDomainHandle_t domain_create(const char *name) {
  pthread_mutex_lock(&mu);
  nvtxDomainHandle_t d = domain_count < 16 ? &domains[domain_count++] : NULL;
  if (d) snprintf(d->name, sizeof d->name, "%s", name);
  pthread_mutex_unlock(&mu);
  record(KDT_NVTX_DOMAIN, d, 0, 0, name);
  return d;
}

static void name_category(nvtxDomainHandle_t d, uint32_t category, const char *name) {
  record(KDT_NVTX_CATEGORY, d, category, 0, name);
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *text) {
  pthread_mutex_lock(&mu);
  nvtxStringHandle_t s = string_count < 4096 ? &strings[string_count++] : NULL;
  pthread_mutex_unlock(&mu);
  if (s) snprintf(s->text, sizeof s->text, "%s", text);
  record(KDT_NVTX_STRING, d, 0, 0, text);
  return s;
}

static int range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  int reg = a->messageType == NVTX_MESSAGE_TYPE_REGISTERED;
  const char *text = reg ? (a->message.registered ? a->message.registered->text : "(null registration)")
                         : a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "(other message type)";
  record(KDT_NVTX_PUSH, d, a->category, reg, text);
  return 0;
}

static int range_pop(nvtxDomainHandle_t d) {
  record(KDT_NVTX_POP, d, 0, 0, NULL);
  return 0;
}

static void name_stream(CUstream stream, const char *name) {
  (void)stream;
  record(KDT_NVTX_STREAM, NULL, 0, 0, name);
}

EXPORT const kdt_nvtx_event *kdt_nvtx_events(uint32_t *out_count) {
  pthread_mutex_lock(&mu);
  *out_count = count;
  pthread_mutex_unlock(&mu);
  return events;
}

static int set_slot(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
  if (!table || id > size || !table[id]) return 0;
  *table[id] = fn;
  return 1;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get_table(NVTX_ETID_CALLBACKS);
  if (!cb || cb->struct_size < sizeof *cb) return 0;
  NvtxFunctionTable core2 = NULL, cuda = NULL;
  unsigned core2_size = 0, cuda_size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) ||
      !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &cuda, &cuda_size))
    return 0;
  return set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create) &&
         set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, (NvtxFunctionPointer)name_category) &&
         set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_string) &&
         set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)range_push) &&
         set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)range_pop) &&
         set_slot(cuda, cuda_size, NVTX_CBID_CUDA_NameCuStreamA, (NvtxFunctionPointer)name_stream);
}
