/* The forwarding worker of a forwarded job record. Topics hold no '/', and
 * the partition and offset are numbers, so the worker id is everything
 * before the third '/' from the end (a worker id may itself hold '/'). */
#include "altar/forward_origin.h"
#include "altar/fleet.h"

#include <string.h>

#define WORKER_ID_MAX 255
#define HEADER_MAX 1024

bool altar_forward_origin(const altar_msg_t *m, char *worker, size_t cap) {
  for (size_t i = 0; m && i < m->n_headers; i++) {
    const altar_header_t *h = &m->headers[i];
    if (!h->name || strcmp(h->name, ALTAR_FORWARD_FROM_HEADER) || !h->value) continue;
    const char *val = h->value;
    size_t n = h->value_len, cut = n;
    if (n > HEADER_MAX) return false;
    for (size_t k = 0; k < n; k++)
      if ((unsigned char)val[k] < 0x20 || (unsigned char)val[k] >= 0x7f) return false;
    int slashes = 0;
    while (cut > 0 && slashes < 3)
      if (val[--cut] == '/') slashes++;
    if (slashes < 3 || cut == 0 || cut > WORKER_ID_MAX || cut >= cap) return false;
    memcpy(worker, val, cut);
    worker[cut] = '\0';
    return true;
  }
  return false;
}
