/* The dashboard's shard order and names (dashboard/shard_order.h). */
#include "dashboard/shard_order.h"

#include <stdlib.h>
#include <string.h>

static int isdig(char c) { return c >= '0' && c <= '9'; }

int altar__natural_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  size_t i = 0, j = 0;
  int zeros = 0; /* at equal numbers, the one written with fewer leading zeros first */
  while (i < alen && j < blen) {
    if (isdig(a[i]) && isdig(b[j])) {
      size_t za = 0, zb = 0;
      while (i + za < alen && a[i + za] == '0') za++;
      while (j + zb < blen && b[j + zb] == '0') zb++;
      size_t sa = i + za, sb = j + zb, ea = sa, eb = sb;
      while (ea < alen && isdig(a[ea])) ea++;
      while (eb < blen && isdig(b[eb])) eb++;
      if (ea - sa != eb - sb) return ea - sa < eb - sb ? -1 : 1;
      int c = memcmp(a + sa, b + sb, ea - sa);
      if (c) return c < 0 ? -1 : 1;
      if (!zeros && za != zb) zeros = za < zb ? -1 : 1;
      i = ea, j = eb;
      continue;
    }
    if (a[i] != b[j]) return (unsigned char)a[i] < (unsigned char)b[j] ? -1 : 1;
    i++, j++;
  }
  if (i < alen || j < blen) return i < alen ? 1 : -1;
  return zeros;
}

static int natural_str(const char *a, const char *b) {
  a = a ? a : "";
  b = b ? b : "";
  return altar__natural_cmp(a, strlen(a), b, strlen(b));
}

/* One "KEY=VALUE" line of labels text: key [k, k+kl), value [v, v+vl); the
 * next line's start. NULL at the end. */
static const char *next_label(const char *p, const char **k, size_t *kl, const char **v, size_t *vl) {
  if (!p || !*p) return NULL;
  size_t n = strcspn(p, "\n");
  const char *eq = memchr(p, '=', n);
  *k = p;
  *kl = eq ? (size_t)(eq - p) : n;
  *v = eq ? eq + 1 : p + n;
  *vl = eq ? n - *kl - 1 : 0;
  return p[n] ? p + n + 1 : p + n;
}

static int labels_cmp(const char *a, const char *b) {
  const char *ka = NULL, *va = NULL, *kb = NULL, *vb = NULL;
  size_t kla = 0, vla = 0, klb = 0, vlb = 0;
  const char *na = next_label(a, &ka, &kla, &va, &vla), *nb = next_label(b, &kb, &klb, &vb, &vlb);
  while (na && nb) {
    size_t m = kla < klb ? kla : klb;
    int kc = memcmp(ka, kb, m);
    if (!kc && kla != klb) kc = kla < klb ? -1 : 1;
    if (kc) return kc < 0 ? -1 : 1; /* the shard that has the earlier key (the other lacks it) first */
    int c = altar__natural_cmp(va, vla, vb, vlb);
    if (c) return c;
    na = next_label(na, &ka, &kla, &va, &vla);
    nb = next_label(nb, &kb, &klb, &vb, &vlb);
  }
  return na ? -1 : nb ? 1 : 0;
}

int altar__shard_order_cmp(const altar_shard_sort_key_t *a, const altar_shard_sort_key_t *b) {
  int c = strcmp(a->kind ? a->kind : "", b->kind ? b->kind : "");
  if (!c) c = natural_str(a->group_key, b->group_key);
  if (!c) c = labels_cmp(a->labels, b->labels);
  if (!c) c = strcmp(a->task_key ? a->task_key : "", b->task_key ? b->task_key : "");
  return c < 0 ? -1 : c > 0;
}

char *altar__shard_name(const char *labels) {
  char *out = malloc(ALTAR_SHARD_NAME_MAX + 1);
  if (!out) return NULL;
  size_t n = 0;
  const char *k, *v;
  size_t kl, vl;
  for (const char *p = next_label(labels, &k, &kl, &v, &vl); p; p = next_label(p, &k, &kl, &v, &vl)) {
    if (kl == 6 && !memcmp(k, "job_id", 6)) continue;
    size_t need = (n ? 1 : 0) + kl + 1 + vl;
    if (n + need > ALTAR_SHARD_NAME_MAX) break;
    if (n) out[n++] = ' ';
    memcpy(out + n, k, kl);
    n += kl;
    out[n++] = '=';
    memcpy(out + n, v, vl);
    n += vl;
  }
  out[n] = '\0';
  return out;
}
