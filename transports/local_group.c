/* Consumer groups of the local log. Members announce themselves with a
 * file in groups/<g>/members they hold an flock on for their lifetime (the
 * kernel drops it when the process dies, so a kill -9 is seen on the next
 * check); a file whose lock can be taken belongs to a dead member. A member
 * owns a partition only while holding the flock of
 * groups/<g>/owners/<topic>.<partition>.lock, whose content names it, so
 * two members never consume one partition at once.
 *
 * Every member computes the same assignment from the same shared state: the
 * live members (ids sort by start time, then pid), the topics each one
 * subscribes (members may subscribe different topics: a topic's partitions
 * are shared by the members that subscribe it), and who owns what now. It
 * is sticky: per topic each member's share is n/m, the oldest members
 * taking the remainder; an owner keeps what it holds up to its share, and
 * only the rest moves, to the members short of theirs. So a join moves
 * just the new member's share, a leave or death just the leaver's, and the
 * members whose partitions stay never see a rebalance. Checks run every
 * rebalance.check.ms (100 ms), and every 10 ms while a wanted partition is
 * still held by its previous owner. */
#include "transports/local_int.h"
#include "altar/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define MEMBER_FILE_MAX 65536

typedef struct member {
  char *id;
  char **topics;
  size_t n_topics;
} member_t;

static void member_clear(member_t *m) {
  free(m->id);
  altar__local_names_free(m->topics, m->n_topics);
}

static int split_lines(const char *s, char ***pout, size_t *pn) {
  *pout = NULL;
  *pn = 0;
  size_t cap = 0;
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t l = nl ? (size_t)(nl - s) : strlen(s);
    if (l) {
      char *x = strndup(s, l);
      if (!x || altar_transport_check_name("topic", x, NULL) != 0) {
        free(x);
        if (!x) return ALTAR_ENOMEM;
      } else {
        if (*pn == cap) {
          cap = cap ? cap * 2 : 4;
          char **nv = realloc(*pout, cap * sizeof *nv);
          if (!nv) {
            free(x);
            return ALTAR_ENOMEM;
          }
          *pout = nv;
        }
        (*pout)[(*pn)++] = x;
      }
    }
    if (!nl) break;
    s = nl + 1;
  }
  return 0;
}

int altar__local_group_join(altar_transport_t *t, const local_cfg_t *cfg, const char *group, const char *const *topics,
                            size_t n, altar_rebalance_cb cb, void *ctx, lgroup_t **pg, altar_error_t *err) {
  (void)t;
  *pg = NULL;
  int rc = altar_transport_check_name("group", group, err);
  if (rc) return rc;
  if (n == 0) return altar_error_set(err, ALTAR_EINVAL, "subscribe: no topics");
  for (size_t i = 0; i < n; i++)
    if ((rc = altar_transport_check_name("topic", topics[i], err)) != 0) return rc;
  lgroup_t *g = calloc(1, sizeof *g);
  if (!g) return altar_error_set(err, ALTAR_ENOMEM, "subscribe: out of memory");
  g->member_fd = -1;
  g->cb = cb;
  g->cb_ctx = ctx;
  g->group = strdup(group);
  g->dir = altar__local_pathf("%s/groups/%s", cfg->dir, group);
  g->topics = calloc(n, sizeof *g->topics);
  static unsigned counter;
  /* Start time first, so ids sort oldest first (the oldest members take a
   * topic's remainder, and a joiner takes its share from the others). */
  g->member_id = altar__local_pathf("%013lld-%010ld-%u", (long long)altar_mono_ms(), (long)getpid(), ++counter);
  if (!g->group || !g->dir || !g->topics || !g->member_id) goto nomem;
  for (size_t i = 0; i < n; i++) {
    if (!(g->topics[i] = strdup(topics[i]))) goto nomem;
    g->n_topics++;
  }
  static const char *const subs[] = {"members", "owners", "offsets"};
  for (size_t i = 0; i < 3; i++) {
    char *p = altar__local_path(g->dir, subs[i]);
    if (!p) goto nomem;
    rc = altar__local_mkdirs(p, err);
    free(p);
    if (rc) goto fail;
  }
  /* Staged outside members/, so no one sees it before it is locked. */
  char *tmp = altar__local_pathf("%s/tmp/member-%s-%s.tmp", cfg->dir, group, g->member_id);
  char *fin = altar__local_pathf("%s/members/%s.member", g->dir, g->member_id);
  if (!tmp || !fin) {
    free(tmp);
    free(fin);
    goto nomem;
  }
  /* Lock before the file becomes visible, so nobody mistakes it for dead. */
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    rc = altar_error_set(err, ALTAR_EIO, "group %s: member file: %s", group, strerror(errno));
  } else {
    for (size_t i = 0; i < n && !rc; i++)
      if (altar__local_write_all(fd, topics[i], strlen(topics[i])) != 0 || altar__local_write_all(fd, "\n", 1) != 0)
        rc = altar_error_set(err, ALTAR_EIO, "group %s: member file: %s", group, strerror(errno));
    if (!rc && rename(tmp, fin) != 0)
      rc = altar_error_set(err, ALTAR_EIO, "group %s: member file: %s", group, strerror(errno));
  }
  if (rc) {
    if (fd >= 0) close(fd);
    unlink(tmp);
  } else {
    g->member_fd = fd;
  }
  free(tmp);
  free(fin);
  if (rc) goto fail;
  *pg = g;
  return 0;
nomem:
  rc = altar_error_set(err, ALTAR_ENOMEM, "subscribe: out of memory");
fail:
  g->member_fd = -1;
  altar__local_group_leave(NULL, g);
  return rc;
}

static int cmp_member(const void *a, const void *b) {
  return strcmp(((const member_t *)a)->id, ((const member_t *)b)->id);
}

/* Live members, sorted by id; dead members' files are removed. */
static int live_members(altar_transport_t *t, lgroup_t *g, member_t **pm, size_t *pn, altar_error_t *err) {
  *pm = NULL;
  *pn = 0;
  char *md = altar__local_path(g->dir, "members");
  if (!md) return altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
  DIR *d = opendir(md);
  if (!d) {
    int e = errno;
    free(md);
    return altar_error_set(err, ALTAR_EIO, "group %s: members: %s", g->group, strerror(e));
  }
  member_t *ms = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  char *buf = malloc(MEMBER_FILE_MAX + 1);
  if (!buf) rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
  while (!rc && (de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    size_t l = strlen(nm);
    if (l <= 7 || strcmp(nm + l - 7, ".member") != 0) continue;
    char *p = altar__local_path(md, nm);
    if (!p) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
      break;
    }
    bool mine = l - 7 == strlen(g->member_id) && !strncmp(nm, g->member_id, l - 7);
    member_t m = {0};
    if (!mine) {
      int fd = open(p, O_RDONLY | O_CLOEXEC);
      if (fd < 0) { /* gone meanwhile */
        free(p);
        continue;
      }
      if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        /* Nobody holds it: its member died. */
        altar_transport_log(t, 6, "group %s: member %.*s is gone", g->group, (int)(l - 7), nm);
        unlink(p);
        close(fd);
        free(p);
        continue;
      }
      ssize_t got = altar__local_pread_full(fd, buf, MEMBER_FILE_MAX, 0);
      close(fd);
      buf[got > 0 ? got : 0] = '\0';
      if (split_lines(buf, &m.topics, &m.n_topics) != 0)
        rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
    } else {
      for (size_t i = 0; i < g->n_topics && !rc; i++) {
        char **nv = realloc(m.topics, (i + 1) * sizeof *nv);
        if (!nv || !(nv[i] = strdup(g->topics[i]))) {
          if (nv) m.topics = nv;
          rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
          break;
        }
        m.topics = nv;
        m.n_topics++;
      }
    }
    free(p);
    m.id = strndup(nm, l - 7);
    if (!m.id && !rc) rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
    if (!rc && n == cap) {
      size_t nc = cap ? cap * 2 : 4;
      member_t *nv = realloc(ms, nc * sizeof *nv);
      if (!nv) rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
      else {
        ms = nv;
        cap = nc;
      }
    }
    if (rc) {
      member_clear(&m);
      break;
    }
    ms[n++] = m;
  }
  free(buf);
  closedir(d);
  free(md);
  if (rc) {
    for (size_t i = 0; i < n; i++) member_clear(&ms[i]);
    free(ms);
    return rc;
  }
  if (n) qsort(ms, n, sizeof *ms, cmp_member);
  *pm = ms;
  *pn = n;
  return 0;
}

static bool has_topic(const member_t *m, const char *topic) {
  for (size_t i = 0; i < m->n_topics; i++)
    if (!strcmp(m->topics[i], topic)) return true;
  return false;
}

typedef struct want {
  const char *topic;
  int32_t partition;
} want_t;

#define OWNER_RECORD_MAX 128

static char *owner_path(const lgroup_t *g, const char *topic, int32_t partition) {
  return altar__local_pathf("%s/owners/%s.%d.lock", g->dir, topic, (int)partition);
}

/* The member named in a partition's owner file ("" when none or unreadable). */
static void recorded_owner(const lgroup_t *g, const char *topic, int32_t partition, char out[OWNER_RECORD_MAX]) {
  out[0] = '\0';
  char *lp = owner_path(g, topic, partition);
  int fd = lp ? open(lp, O_RDONLY | O_CLOEXEC) : -1;
  free(lp);
  if (fd < 0) return;
  ssize_t got = altar__local_pread_full(fd, out, OWNER_RECORD_MAX - 1, 0);
  close(fd);
  if (got <= 0) {
    out[0] = '\0';
    return;
  }
  out[got] = '\0';
  char *nl = strchr(out, '\n');
  if (nl) *nl = '\0';
  else out[0] = '\0'; /* torn: a record is written whole with its newline */
}

static bool owns_now(const lgroup_t *g, const char *topic, int32_t partition) {
  for (size_t i = 0; i < g->n_owned; i++)
    if (g->owned[i].partition == partition && !strcmp(g->owned[i].topic, topic)) return true;
  return false;
}

/* The partitions this member should own, given the live members and who
 * owns what (see the comment at the top). Only this member's topics matter
 * to it; every member runs the same computation per topic. */
static int desired(altar_transport_t *t, const local_cfg_t *cfg, lgroup_t *g, member_t *ms, size_t nm, want_t **pw,
                   size_t *pnw, altar_error_t *err) {
  *pw = NULL;
  *pnw = 0;
  want_t *w = NULL;
  size_t nw = 0, cap = 0;
  const member_t **elig = nm ? calloc(nm, sizeof *elig) : NULL;
  size_t *quota = nm ? calloc(nm, sizeof *quota) : NULL;
  size_t *kept = nm ? calloc(nm, sizeof *kept) : NULL;
  int rc = 0;
  if (nm && (!elig || !quota || !kept)) rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
  for (size_t ti = 0; ti < g->n_topics && !rc; ti++) {
    const char *topic = g->topics[ti];
    bool dup = false;
    for (size_t tj = 0; tj < ti && !dup; tj++) dup = !strcmp(g->topics[tj], topic);
    if (dup) continue;
    int32_t np = 0;
    altar_error_t e = {0};
    if (altar__local_topic_partitions(t, cfg, topic, &np, &e) != 0 || np <= 0) continue; /* not created yet */
    size_t ne = 0, me = SIZE_MAX;
    for (size_t m = 0; m < nm; m++) {
      if (!has_topic(&ms[m], topic)) continue;
      if (!strcmp(ms[m].id, g->member_id)) me = ne;
      elig[ne++] = &ms[m];
    }
    if (me == SIZE_MAX || ne == 0) continue;
    int32_t *target = calloc((size_t)np, sizeof *target);
    if (!target) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
      break;
    }
    for (size_t i = 0; i < ne; i++) {
      quota[i] = (size_t)np / ne + (i < (size_t)np % ne ? 1 : 0);
      kept[i] = 0;
    }
    /* Owners keep what they hold, up to their share. */
    for (int32_t p = 0; p < np; p++) {
      target[p] = -1;
      size_t o = SIZE_MAX;
      if (owns_now(g, topic, p)) {
        o = me;
      } else {
        char rec[OWNER_RECORD_MAX];
        recorded_owner(g, topic, p, rec);
        for (size_t i = 0; rec[0] && i < ne && o == SIZE_MAX; i++)
          if (i != me && !strcmp(elig[i]->id, rec)) o = i;
      }
      if (o != SIZE_MAX && kept[o] < quota[o]) {
        target[p] = (int32_t)o;
        kept[o]++;
      }
    }
    /* The rest, in partition order, to the members short of their share. */
    size_t i = 0;
    for (int32_t p = 0; p < np; p++) {
      if (target[p] >= 0) continue;
      while (i < ne && kept[i] >= quota[i]) i++;
      if (i == ne) break;
      target[p] = (int32_t)i;
      kept[i]++;
    }
    for (int32_t p = 0; p < np && !rc; p++) {
      if (target[p] != (int32_t)me) continue;
      if (ALTAR_GROW(w, cap, nw + 1)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
        break;
      }
      w[nw++] = (want_t){topic, p}; /* topic points into g, which outlives w */
    }
    free(target);
  }
  free(elig);
  free(quota);
  free(kept);
  if (rc) {
    free(w);
    return rc;
  }
  *pw = w;
  *pnw = nw;
  return 0;
}

static void release(lowned_t *o) {
  if (o->lock_fd >= 0) {
    /* Cleared while still locked, so nobody reads us as its owner after;
     * should that fail, the name is ignored once this member is gone. */
    if (ftruncate(o->lock_fd, 0) != 0) errno = 0;
    close(o->lock_fd);
  }
  altar__local_reader_free(o->reader);
  free(o->topic);
  memset(o, 0, sizeof *o);
  o->lock_fd = -1;
}

static void revoke_where(altar_transport_t *t, lgroup_t *g, const bool *drop) {
  size_t nd = 0;
  for (size_t i = 0; i < g->n_owned; i++) nd += drop[i];
  if (!nd) return;
  altar_tp_t *tps = calloc(nd, sizeof *tps);
  size_t k = 0;
  for (size_t i = 0; tps && i < g->n_owned; i++)
    if (drop[i])
      tps[k++] = (altar_tp_t){g->owned[i].topic, g->owned[i].partition,
                              g->owned[i].reader ? g->owned[i].reader->next_offset : ALTAR_OFFSET_INVALID};
  /* Commits are still allowed during the callback: owned is unchanged. */
  if (g->cb && tps && t) g->cb(t, ALTAR_REBALANCE_REVOKE, tps, nd, g->cb_ctx);
  free(tps);
  /* The next owner reads the commits made above: written before letting go. */
  altar__local_committer_drain(g->commits);
  size_t w = 0;
  for (size_t i = 0; i < g->n_owned; i++) {
    if (drop[i]) {
      altar__local_committer_tell_failure(t, g->commits, g->owned[i].topic, g->owned[i].partition);
      release(&g->owned[i]);
    } else g->owned[w++] = g->owned[i];
  }
  g->n_owned = w;
}

int altar__local_group_check(altar_transport_t *t, const local_cfg_t *cfg, lgroup_t *g, bool force,
                             altar_error_t *err) {
  int64_t now = altar_mono_ms();
  if (!force && now < g->next_check_ms) return 0;
  g->next_check_ms = now + cfg->rebalance_check_ms;
  member_t *ms = NULL;
  size_t nm = 0;
  int rc = live_members(t, g, &ms, &nm, err);
  if (rc) return rc;
  want_t *w = NULL;
  size_t nw = 0;
  rc = desired(t, cfg, g, ms, nm, &w, &nw, err);
  if (rc) goto out;

  bool *drop = g->n_owned ? calloc(g->n_owned, sizeof *drop) : NULL;
  if (g->n_owned && !drop) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
    goto out;
  }
  for (size_t i = 0; i < g->n_owned; i++) {
    bool keep = false;
    for (size_t j = 0; j < nw && !keep; j++)
      keep = w[j].partition == g->owned[i].partition && !strcmp(w[j].topic, g->owned[i].topic);
    drop[i] = !keep;
  }
  revoke_where(t, g, drop);
  free(drop);

  size_t first_new = g->n_owned;
  for (size_t j = 0; j < nw; j++) {
    bool have = false;
    for (size_t i = 0; i < g->n_owned && !have; i++)
      have = w[j].partition == g->owned[i].partition && !strcmp(w[j].topic, g->owned[i].topic);
    if (have) continue;
    char *lp = owner_path(g, w[j].topic, w[j].partition);
    int fd = lp ? open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : -1;
    free(lp);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      /* The previous owner has not let go yet: look again soon. */
      close(fd);
      g->next_check_ms = now + 10;
      continue;
    }
    /* Name ourselves, whole, in one write: the others' assignment reads it. */
    char rec[OWNER_RECORD_MAX];
    int rl = snprintf(rec, sizeof rec, "%s\n", g->member_id);
    if (ftruncate(fd, 0) != 0 || rl <= 0 || (size_t)rl >= sizeof rec || pwrite(fd, rec, (size_t)rl, 0) != rl)
      altar_transport_log(t, 4, "group %s: cannot record the owner of %s/%d: %s", g->group, w[j].topic,
                          (int)w[j].partition, strerror(errno));
    lowned_t *no = realloc(g->owned, (g->n_owned + 1) * sizeof *no);
    if (!no) {
      close(fd);
      rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
      break;
    }
    g->owned = no;
    lowned_t *o = &g->owned[g->n_owned];
    memset(o, 0, sizeof *o);
    o->lock_fd = fd;
    o->partition = w[j].partition;
    o->topic = strdup(w[j].topic);
    o->reader = o->topic ? altar__local_reader_new(cfg->dir, o->topic, o->partition) : NULL;
    if (!o->reader) {
      release(o);
      rc = altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
      break;
    }
    g->n_owned++;
    /* Start at the committed offset, read only now that the lock is ours. */
    int64_t off;
    char *md = NULL;
    altar_error_t e = {0};
    if (altar__local_offset_read(cfg, g->group, o->topic, o->partition, &off, &md, &e) != 0) {
      altar_transport_log(t, 4, "group %s: %s; starting from auto.offset.reset", g->group, e.msg);
      off = ALTAR_OFFSET_INVALID;
    }
    free(md);
    if (off == ALTAR_OFFSET_INVALID) off = cfg->reset_earliest ? ALTAR_OFFSET_BEGINNING : ALTAR_OFFSET_END;
    if (altar__local_reader_seek(t, cfg, o->reader, off, &e) != 0)
      altar_transport_log(t, 4, "group %s: %s", g->group, e.msg);
  }
  if (g->n_owned > first_new) {
    size_t na = g->n_owned - first_new;
    altar_tp_t *tps = calloc(na, sizeof *tps);
    /* Copy names: the callback may trigger changes to owned. */
    for (size_t i = 0; tps && i < na; i++) {
      lowned_t *o = &g->owned[first_new + i];
      tps[i] = (altar_tp_t){o->topic, o->partition, o->reader->next_offset};
    }
    if (g->cb && tps) g->cb(t, ALTAR_REBALANCE_ASSIGN, tps, na, g->cb_ctx);
    free(tps);
  }
out:
  free(w);
  for (size_t i = 0; i < nm; i++) member_clear(&ms[i]);
  free(ms);
  return rc;
}

void altar__local_group_leave(altar_transport_t *t, lgroup_t *g) {
  if (!g) return;
  if (g->n_owned) {
    bool *drop = calloc(g->n_owned, sizeof *drop);
    if (drop) {
      for (size_t i = 0; i < g->n_owned; i++) drop[i] = true;
      revoke_where(t, g, drop);
      free(drop);
    }
    for (size_t i = 0; i < g->n_owned; i++) release(&g->owned[i]);
  }
  altar__local_committer_free(t, g->commits);
  free(g->owned);
  if (g->member_fd >= 0) {
    char *fin = altar__local_pathf("%s/members/%s.member", g->dir, g->member_id);
    if (fin) unlink(fin);
    free(fin);
    close(g->member_fd);
  }
  altar__local_names_free(g->topics, g->n_topics);
  free(g->member_id);
  free(g->dir);
  free(g->group);
  free(g);
}
