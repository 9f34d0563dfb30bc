/* The one growth rule for the codebase's arrays: geometric, overflow-safe. */
#include "altar/grow.h"

#include "altar/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int altar_grow(void *pv, size_t *pcap, size_t need, size_t elsize) {
  if (need <= *pcap) return ALTAR_OK;
  size_t cap = *pcap ? *pcap : 8;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return ALTAR_ENOMEM;
    cap *= 2;
  }
  if (elsize && cap > SIZE_MAX / elsize) return ALTAR_ENOMEM;
  void *old;
  memcpy(&old, pv, sizeof old); /* pv points at some T *: read it without aliasing it as void * */
  void *grown = realloc(old, cap * elsize);
  if (!grown) return ALTAR_ENOMEM;
  memcpy(pv, &grown, sizeof grown);
  *pcap = cap;
  return ALTAR_OK;
}
