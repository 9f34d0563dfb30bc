/* Nodes as capacity sees them: reading Node objects, resource quantities,
 * and how many pods of a pool a set of nodes can still take. */
#include "k8s_int.h"
#include "core/unconst.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void altar__k8s_node_infos_free(altar_k8s_node_info_t *nodes, size_t n) {
  for (size_t i = 0; nodes && i < n; i++) {
    free(nodes[i].name);
    altar_strmap_clear(&nodes[i].labels);
    altar_strmap_clear(&nodes[i].allocatable);
  }
  free(nodes);
}

/* Copies the string members of obj into m; other members are skipped. */
static int strings_into(const json_t *obj, altar_strmap_t *m) {
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)ALTAR__UNCONST(obj), key, v) {
    if (json_is_string(v) && altar_strmap_set(m, key, json_string_value(v))) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

static bool condition_ready(const json_t *status) {
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(status, "conditions"), i, c) {
    const char *type = json_string_value(json_object_get(c, "type"));
    if (type && !strcmp(type, "Ready")) {
      const char *st = json_string_value(json_object_get(c, "status"));
      return st && !strcmp(st, "True");
    }
  }
  return false;
}

int altar__k8s_node_info_from_json(const json_t *node, altar_k8s_node_info_t *info, altar_error_t *err) {
  memset(info, 0, sizeof *info);
  const json_t *meta = json_object_get(node, "metadata");
  const char *name = json_string_value(json_object_get(meta, "name"));
  if (!name) return altar_error_set(err, ALTAR_EDECODE, "node: metadata.name is missing");
  const json_t *status = json_object_get(node, "status");
  info->name = strdup(name);
  if (!info->name || strings_into(json_object_get(meta, "labels"), &info->labels) ||
      strings_into(json_object_get(status, "allocatable"), &info->allocatable)) {
    free(info->name);
    altar_strmap_clear(&info->labels);
    altar_strmap_clear(&info->allocatable);
    memset(info, 0, sizeof *info);
    return altar_error_set(err, ALTAR_ENOMEM, "node %s: out of memory", name);
  }
  json_t *unsched = json_object_get(json_object_get(node, "spec"), "unschedulable");
  info->schedulable = condition_ready(status) && !json_is_true(unsched);
  return ALTAR_OK;
}

/* Suffixes of Kubernetes quantities and the factor each stands for; "m"
 * (milli) is handled apart because it divides. */
static const struct {
  const char *suffix;
  int64_t factor;
} SUFFIXES[] = {
    {"", 1},
    {"k", 1000LL},
    {"M", 1000LL * 1000},
    {"G", 1000LL * 1000 * 1000},
    {"T", 1000LL * 1000 * 1000 * 1000},
    {"Ki", 1LL << 10},
    {"Mi", 1LL << 20},
    {"Gi", 1LL << 30},
    {"Ti", 1LL << 40},
};

bool altar__k8s_quantity_count(const char *q, int64_t *pcount) {
  if (!q || *q < '0' || *q > '9') return false;
  errno = 0;
  char *end;
  long long v = strtoll(q, &end, 10);
  if (errno || v < 0) return false;
  if (!strcmp(end, "m")) {
    *pcount = v / 1000;
    return true;
  }
  for (size_t i = 0; i < sizeof SUFFIXES / sizeof SUFFIXES[0]; i++)
    if (!strcmp(end, SUFFIXES[i].suffix)) {
      *pcount = v > INT64_MAX / SUFFIXES[i].factor ? INT64_MAX : v * SUFFIXES[i].factor;
      return true;
    }
  return false; /* decimals and exponents never describe a count of pods or GPUs */
}

static bool selector_matches(const altar_strmap_t *selector, const altar_strmap_t *labels) {
  for (size_t i = 0; i < selector->n; i++) {
    const char *v = altar_strmap_get(labels, selector->keys[i]);
    if (!v || strcmp(v, selector->vals[i])) return false;
  }
  return true;
}

int64_t altar__k8s_pool_node_slots(const altar_k8s_pool_t *p, const altar_k8s_node_info_t *nodes, size_t n,
                                   size_t *pnodes) {
  bool gpu = strcmp(p->name, ALTAR_POOL_CPU) != 0;
  const char *resource = gpu ? (p->gpu_resource ? p->gpu_resource : "nvidia.com/gpu") : "pods";
  int64_t total = 0;
  size_t offering = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t c;
    if (!selector_matches(&p->node_selector, &nodes[i].labels) ||
        !altar__k8s_quantity_count(altar_strmap_get(&nodes[i].allocatable, resource), &c) || c <= 0)
      continue;
    offering++;
    if (nodes[i].schedulable) total = c > INT64_MAX - total ? INT64_MAX : total + c;
  }
  if (pnodes) *pnodes = offering;
  return total;
}
