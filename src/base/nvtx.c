/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges in the "kdag" domain (base/nvtx.h). */
#include "base/nvtx.h"

#include <pthread.h>

#ifndef KDAG_NO_NVTX
#include <nvtx3/nvToolsExt.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;

static void domain_create(void) {
  /* Without a tool, NVTX's entry points are no-ops that return NULL. */
  domain = nvtxDomainCreateA("kdag");
  if (!domain) return;
  nvtxDomainNameCategoryA(domain, KD_NVTX_SUBMIT, "submit");
  nvtxDomainNameCategoryA(domain, KD_NVTX_NODE, "node");
  nvtxDomainNameCategoryA(domain, KD_NVTX_WAIT, "wait");
}

int kd_nvtx_on(void) {
  pthread_once(&once, domain_create);
  return domain != NULL;
}

kd_nvtx_string kd_nvtx_register(const char *text) {
  if (!text || !kd_nvtx_on()) return NULL;
  return (kd_nvtx_string)nvtxDomainRegisterStringA(domain, text);
}

void kd_nvtx_push(kd_nvtx_string name, const char *text, uint32_t category) {
  if (!kd_nvtx_on()) return;
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = category;
  if (name) {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = (nvtxStringHandle_t)name;
  } else {
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text ? text : "";
  }
  nvtxDomainRangePushEx(domain, &a);
}

void kd_nvtx_pop(void) {
  if (domain) nvtxDomainRangePop(domain);
}

#else /* built without NVTX (-DKDAG_NVTX=OFF) */

int kd_nvtx_on(void) { return 0; }
kd_nvtx_string kd_nvtx_register(const char *text) { (void)text; return NULL; }
void kd_nvtx_push(kd_nvtx_string name, const char *text, uint32_t category) { (void)name; (void)text; (void)category; }
void kd_nvtx_pop(void) {}

#endif
