/* The one check of a plug-in's configuration keys, whatever its kind. */
#include "altar/plugin_keys.h"
#include "altar/suggest.h"

#include <stdio.h>
#include <string.h>

/* Keys offered as suggestions at most; a longer table's tail is not hinted. */
#define PLUGIN_KEYS_HINT_MAX 256

size_t altar_plugin_keys_count(const altar_plugin_key_t *keys) {
  size_t n = 0;
  while (keys && keys[n].name) n++;
  return n;
}

/* " (known: a, b, ...)", cut with "..." where it does not fit. */
static void known_list(const altar_plugin_key_t *keys, size_t n, char *out, size_t size) {
  size_t at = (size_t)snprintf(out, size, " (known: ");
  for (size_t i = 0; i < n && at < size; i++) {
    size_t need = strlen(keys[i].name) + (i ? 2 : 0);
    if (at + need + 6 > size) { /* room for ", ...)" */
      snprintf(out + at, size - at, ", ...)");
      return;
    }
    at += (size_t)snprintf(out + at, size - at, "%s%s", i ? ", " : "", keys[i].name);
  }
  if (at < size) snprintf(out + at, size - at, ")");
}

bool altar_plugin_keys_allow(const altar_plugin_key_t *keys, const char *key, char *hint, size_t hint_size) {
  if (hint_size) hint[0] = '\0';
  if (!keys || !strcmp(key, "name")) return true;
  size_t n = altar_plugin_keys_count(keys);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(key, keys[i].name)) return true;
  if (!hint_size) return false;
  if (!n) {
    snprintf(hint, hint_size, " (it takes none)");
    return false;
  }
  const char *names[PLUGIN_KEYS_HINT_MAX + 1];
  size_t m = n < PLUGIN_KEYS_HINT_MAX ? n : PLUGIN_KEYS_HINT_MAX;
  for (size_t i = 0; i < m; i++) names[i] = keys[i].name;
  names[m] = NULL;
  altar_suggest_hint(key, names, hint, hint_size);
  if (!hint[0]) known_list(keys, n, hint, hint_size);
  return false;
}

int altar_plugin_keys_refuse(const altar_plugin_key_t *keys, const char *where, const char *kind, const char *plugin,
                             const char *key, altar_error_t *err) {
  char hint[400];
  altar_plugin_keys_allow(keys, key, hint, sizeof hint);
  return altar_error_set(err, ALTAR_ECONFIG, "%s%s.%.64s: unknown key for the %s %s%s", where ? where : "", kind, key,
                         plugin, kind, hint);
}

int altar_plugin_keys_check(const altar_plugin_key_t *keys, const char *kind, const char *plugin,
                            const altar_strmap_t *cfg, altar_error_t *err) {
  for (size_t i = 0; cfg && i < cfg->n; i++)
    if (!altar_plugin_keys_allow(keys, cfg->keys[i], NULL, 0))
      return altar_plugin_keys_refuse(keys, NULL, kind, plugin, cfg->keys[i], err);
  return ALTAR_OK;
}
