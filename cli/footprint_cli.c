/* Which directories a daemon's footprint gauges cover (footprint_cli.h). */
#include "footprint_cli.h"

#include "altar/strmap.h"

#include <stdio.h>
#include <string.h>

altar_footprint_sampler_t *altar_cli_footprint_start(const char *who, altar_metrics_t *reg, const altar_config_t *cfg,
                                                     bool worker, altar_transport_t *transport) {
  if (!reg) return NULL;
  altar_footprint_dir_t dirs[2];
  size_t n = 0;
  if (worker) {
    /* The process backend's default; other backends keep less or nothing here. */
    const char *root = altar_strmap_get(&cfg->backend_props, "data_root");
    dirs[n++] = (altar_footprint_dir_t){"data_root", root ? root : "./var/data"};
  } else {
    dirs[n++] = (altar_footprint_dir_t){"ledger", cfg->ledger_path};
  }
  const char *log = altar_strmap_get(&cfg->transport_props, "dir");
  if (!strcmp(cfg->transport_name, "local") && log) dirs[n++] = (altar_footprint_dir_t){"log", log};
  altar_error_t err = {0};
  altar_footprint_sampler_t *s = altar_footprint_sampler_start(reg, dirs, n, &err);
  if (!s) fprintf(stderr, "%s: footprint gauges off: %s\n", who, err.msg);
  /* The embedded log's retention decides from the files the sampler's
   * thread already lists each minute; a broker's is the broker's
   * (ALTAR_ENOTSUP: no gauges). */
  if (s && transport) {
    int rc = altar_footprint_sampler_add_retention(s, transport, &err);
    if (rc && rc != ALTAR_ENOTSUP) fprintf(stderr, "%s: log retention gauges off: %s\n", who, err.msg);
  }
  return s;
}
