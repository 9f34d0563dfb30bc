/* ModalRuntime: the heap object around a vtable. */
#include "altar/modal.h"

#include <stdlib.h>

altar_modal_runtime_t *altar_modal_runtime_new(const altar_modal_runtime_ops_t *ops, void *impl) {
  altar_modal_runtime_t *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  rt->ops = ops;
  rt->impl = impl;
  return rt;
}

void altar_modal_runtime_free(altar_modal_runtime_t *rt) {
  if (!rt) return;
  if (rt->ops && rt->ops->destroy) rt->ops->destroy(rt->impl);
  free(rt);
}
