/* The local transport's internals, shared by transports/local_*.c only.
 *
 * On disk, under the configured dir:
 *   topics/<topic>/<partition>/<base offset, 20 digits>.log   segments
 *   topics/<topic>/<partition>/append.lock                    appenders' flock
 *   topics/<topic>/topic.conf                                 settings it was created with (retention)
 *   groups/<group>/members/<member id>.member                 held (flock) by a live member
 *   groups/<group>/owners/<topic>.<partition>.lock            held (flock) by the partition's owner, naming it
 *   groups/<group>/offsets/<topic>.<partition>                committed offset + metadata
 *   tmp/                                                      staging for atomic creates
 *
 * A segment is a sequence of records: u32 body length, u32 crc32 of the
 * body, then the body (big-endian): u8 magic 1, u8 attributes 0, i64
 * offset, i64 timestamp ms, i32 key length (-1 = null), key, i32 value
 * length (-1 = null), value, u16 header count, then per header u16 name
 * length, name, i32 value length (-1 = null), value. */
#ifndef ALTAR_TRANSPORTS_LOCAL_INT_H
#define ALTAR_TRANSPORTS_LOCAL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "altar/buf.h"
#include "altar/clock.h"
#include "altar/plugin/transport.h"

#define LOCAL_FSYNC_ALWAYS 0
#define LOCAL_FSYNC_GROUP 1
#define LOCAL_FSYNC_NEVER 2

#define LREC_FRAME 8     /* u32 length + u32 crc */
#define LREC_BODY_MIN 28 /* magic, attrs, offset, ts, klen, vlen, nheaders */
#define LREC_MAGIC 1
#define LSEG_NAME_LEN 24 /* 20 digits + ".log" */

typedef struct local_cfg {
  char *dir;
  int fsync_policy;
  int group_commit_ms;
  size_t group_commit_bytes;
  int64_t retention_bytes; /* -1 = unlimited */
  int64_t retention_ms;    /* -1 = unlimited */
  int32_t num_partitions;
  size_t segment_bytes;
  size_t max_record_bytes;
  size_t queue_max_records;
  bool auto_create;
  bool reset_earliest;
  int rebalance_check_ms;
} local_cfg_t;

/* ---- local_config.c ---- */
int altar__local_cfg_parse(altar_transport_t *t, local_cfg_t *cfg, const altar_strmap_t *config, altar_error_t *err);
void altar__local_cfg_clear(local_cfg_t *cfg);
/* The local transport's keys (transport_ops.config_keys). */
extern const altar_plugin_key_t altar__local_cfg_keys[];

/* ---- local_segment.c: record format ---- */
typedef struct lrec_view {
  int64_t offset;
  int64_t timestamp_ms;
  const uint8_t *key; /* NULL = null key */
  size_t key_len;
  const uint8_t *value; /* NULL = null value */
  size_t value_len;
  const uint8_t *headers; /* raw header block */
  size_t headers_len;
  uint16_t n_headers;
  size_t total_len; /* frame + body */
} lrec_view_t;

enum { LREC_OK = 0, LREC_INCOMPLETE = 1, LREC_CORRUPT = 2 };

/* Encoded size of rec, or 0 when a field is out of bounds (err set). */
size_t altar__local_rec_size(const altar_produce_rec_t *rec, size_t max_record, altar_error_t *err);
/* Appends rec framed with offset 0 and no crc (patched at append time by
 * altar__local_rec_seal). */
int altar__local_rec_encode(altar_buf_t *out, const altar_produce_rec_t *rec, int64_t ts);
/* Writes offset into the encoded record at p and computes its crc. */
void altar__local_rec_seal(uint8_t *p, int64_t offset);
/* Parses one record at p (avail bytes). LREC_OK fills v; LREC_INCOMPLETE
 * when more bytes are needed; LREC_CORRUPT with a reason in why. */
int altar__local_rec_parse(const uint8_t *p, size_t avail, size_t max_record, lrec_view_t *v, const char **why);
/* A heap altar_msg_t holding copies of everything in v. NULL on ENOMEM. */
altar_msg_t *altar__local_rec_to_msg(const lrec_view_t *v, const char *topic, int32_t partition);

/* Segment file name for base. */
void altar__local_seg_name(char out[LSEG_NAME_LEN + 1], int64_t base);

/* ---- local_partition.c: segments of one partition ---- */

/* Sorted segment base offsets of the partition at dir. Stray entries are
 * logged once per call when warn is set. *pbases malloc'd (caller frees). */
int altar__local_part_segments(altar_transport_t *t, const char *dir, bool warn, int64_t **pbases, size_t *pn,
                               altar_error_t *err);

/* Where a scan of a segment stopped. */
typedef struct lscan {
  off_t valid_end;     /* bytes of whole valid records from the start */
  int64_t next_offset; /* offset after the last valid record */
  int status;          /* LREC_OK = clean end of file, LREC_INCOMPLETE = torn tail, LREC_CORRUPT */
  const char *why;
  off_t file_size;
} lscan_t;

/* Scans fd from `from` (a record boundary whose record has offset
 * expect). */
int altar__local_seg_scan(int fd, off_t from, int64_t expect, size_t max_record, lscan_t *ps, altar_error_t *err);

/* The appender of one partition (used by the flusher thread, and by
 * altar__local_part_recover on a producer's first record to the partition). */
typedef struct lappender {
  char *topic;
  int32_t partition;
  char *dir;
  int lock_fd;
  int seg_fd;
  int64_t seg_base;
  off_t seg_size;
  int64_t next_offset;
  struct lsegwatch *segwatch; /* the producer's (local_seg_watch.c); NULL: list at every lock */
  int wd;                     /* inotify watch of dir in segwatch, -1 when none */
  bool listed;                /* no segment created or removed since the last listing */
  /* Written by altar__local_appender_write with the sync deferred and not
   * yet synced: from byte unsynced_from of the segment, records from offset
   * unsynced_offset on; unsynced_from is -1 when there are none. */
  off_t unsynced_from;
  int64_t unsynced_offset;
} lappender_t;

/* ---- local_seg_watch.c: whether a partition's segments changed since an
 * appender last listed them, so an append need not list the directory ---- */
typedef struct lsegwatch {
  bool open; /* inotify tried */
  int fd;    /* -1 when unavailable: every lock lists */
  struct lsegwatch_reg {
    int wd;
    lappender_t *a;
  } * regs;
  size_t n_regs, cap_regs;
} lsegwatch_t;

void altar__local_segwatch_init(lsegwatch_t *w);
void altar__local_segwatch_close(lsegwatch_t *w);
/* Call holding a's append lock, before deciding to list: reads what the
 * kernel reported (for every appender of w), starts watching a's directory
 * if it is not yet watched, and answers whether a's last listing is still
 * the directory's list of segments. */
bool altar__local_segwatch_unchanged(lappender_t *a);
/* a has just listed its directory under its append lock. */
void altar__local_segwatch_listed(lappender_t *a);
void altar__local_segwatch_forget(lappender_t *a);

lappender_t *altar__local_appender_new(const char *root, const char *topic, int32_t partition);
void altar__local_appender_free(lappender_t *a);
/* Takes the partition's append lock and learns the true end (truncating a
 * torn or corrupt tail, reported through the log). */
int altar__local_appender_lock(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a, altar_error_t *err);
void altar__local_appender_unlock(lappender_t *a);
/* Appends n encoded records laid end to end in data (lens[i] bytes each),
 * sealing each with its offset; fills poffsets (callers preset -1: records
 * left at -1 were not written). Call locked. Rolls segments, fsyncs per
 * policy; with defer_sync and fsync by group commit, the fsync of the last
 * segment written is left to altar__local_appender_sync, so a flush that
 * writes to many partitions writes them all before it waits on any. */
int altar__local_appender_write(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a, uint8_t *data,
                                const size_t *lens, size_t n, bool defer_sync, int64_t *poffsets, bool *prolled,
                                altar_error_t *err);
/* Syncs what a deferred write left unsynced. On failure the unsynced
 * records are cut off again (still locked: no one appended after them) and
 * *pfailed_from is the first offset no longer written; else -1. */
int altar__local_appender_sync(const local_cfg_t *cfg, lappender_t *a, int64_t *pfailed_from, altar_error_t *err);
/* Deletes whole old segments beyond retention. Call locked. */
void altar__local_appender_retain(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a);
/* Recovery of one partition, run by a producer on the caller's thread before
 * its first append there: takes the append lock (finding the true end, a
 * torn or corrupt tail truncated and reported through t's log), applies
 * retention, lets go. Failures are logged; ALTAR_ENOMEM is returned. */
int altar__local_part_recover(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partition);

/* Beginning and end offsets of a partition (readers' view, no repair). */
/* Deletes the partition's whole segments holding only records before
 * `before` (the newest segment stays); *pbeginning = the oldest offset left. */
int altar__local_part_delete_records(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partition,
                                     int64_t before, int64_t *pbeginning, altar_error_t *err);
int altar__local_part_offsets(altar_transport_t *t, const local_cfg_t *cfg, const char *dir, int64_t *pbegin,
                              int64_t *pend, altar_error_t *err);

/* ---- local_reader.c ---- */
typedef struct lreader {
  char *topic;
  int32_t partition;
  char *dir;
  int fd;
  int64_t seg_base;
  off_t pos;           /* file position of the record with next_offset */
  int64_t next_offset; /* the position: next offset to return */
  bool paused;
  int watch;    /* inotify watch of dir (local_watch.c), -1 when none */
  bool changed; /* written to (or not watched) since the last empty read */
  uint8_t *buf;
  size_t buf_cap;
} lreader_t;

lreader_t *altar__local_reader_new(const char *root, const char *topic, int32_t partition);
void altar__local_reader_free(lreader_t *r);
/* Positions r at offset (or ALTAR_OFFSET_BEGINNING / _END), clamping to the
 * partition's range with a warning. */
int altar__local_reader_seek(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, int64_t offset,
                             altar_error_t *err);
/* Marks r as written to since its last empty read (local_watch.c). */
void altar__local_reader_changed(lreader_t *r);
/* The same, for a change that may have added an entry to r's directory (a
 * new segment): the next look for a roll really looks. */
void altar__local_reader_created(lreader_t *r);
/* 1 with *pmsg, 0 when nothing is available yet, or an error (a corrupt
 * record, skipped afterwards). */
int altar__local_reader_next(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, altar_msg_t **pmsg,
                             altar_error_t *err);

/* ---- local_topic_conf.c: per-topic settings ---- */
#define LOCAL_TOPIC_CONF "topic.conf"
typedef struct local_topic_conf {
  int64_t retention_ms;    /* -1 = unlimited */
  int64_t retention_bytes; /* per partition; -1 = unlimited */
} local_topic_conf_t;
/* Reads create_topic_config's settings (retention.ms, retention.bytes,
 * cleanup.policy=delete; absent: -1); ALTAR_ECONFIG naming the setting for
 * anything else. */
int altar__local_topic_conf_parse(const altar_strmap_t *conf, local_topic_conf_t *pc, altar_error_t *err);
/* Writes c into topic_dir/topic.conf (new file; fsync'd when sync). */
int altar__local_topic_conf_write(const char *topic_dir, const local_topic_conf_t *c, bool sync, altar_error_t *err);
/* What applies to topic: the shorter of its own settings and the
 * transport's (-1: none). Never fails. */
void altar__local_topic_conf_read(const local_cfg_t *cfg, const char *topic, local_topic_conf_t *pc);

/* ---- local_retention.c: what retention deletes ---- */
/* Why retention deletes a partition's oldest segment left (its last write
 * at mtime_ms) while the partition holds total bytes: "retention.bytes",
 * "retention.ms", or NULL: it stays, and every newer one with it. The one
 * rule of the pass and of what it is said to free. */
const char *altar__local_retention_why(const local_topic_conf_t *tc, int64_t total, int64_t mtime_ms, int64_t now_ms);
/* A segment file's last write, as retention reads it. */
struct stat;
int64_t altar__local_mtime_ms(const struct stat *st);
/* The retention_due operation (altar/plugin/transport.h): every topic's
 * partitions, read from the disk and the handle's settings only. */
int altar__local_retention_due(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err);

/* ---- local_topics.c ---- */
int altar__local_dirs_init(const local_cfg_t *cfg, altar_error_t *err);
char *altar__local_part_dir(const char *root, const char *topic, int32_t partition);
/* Creates topic whole (partitions and, when conf is not NULL, its
 * settings file) or not at all; ALTAR_EEXIST when it exists. */
int altar__local_topic_create(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partitions,
                              const struct local_topic_conf *conf, altar_error_t *err);
/* Partition count of topic, ALTAR_ENOTFOUND when absent. */
int altar__local_topic_partitions(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t *pn,
                                  altar_error_t *err);
/* Sorted topic names (malloc'd array of malloc'd strings). */
int altar__local_topic_names(altar_transport_t *t, const local_cfg_t *cfg, char ***pnames, size_t *pn,
                             altar_error_t *err);
void altar__local_names_free(char **names, size_t n);
int altar__local_list_topics(altar_transport_t *t, const local_cfg_t *cfg, const char *topic,
                             altar_topic_list_t **plist, altar_error_t *err);

/* ---- local_offsets.c ---- */
/* <dir>/groups/<group>/offsets, malloc'd (NULL when out of memory). */
char *altar__local_offsets_dir(const local_cfg_t *cfg, const char *group);
/* Whether a commit's offset and metadata are acceptable (bounds). */
int altar__local_offset_check(int64_t offset, const char *metadata, altar_error_t *err);
/* Writes the commit file whole; without sync_dir the caller fsyncs the
 * offsets directory after (once for a batch). */
int altar__local_offset_write(const local_cfg_t *cfg, const char *group, const char *topic, int32_t partition,
                              int64_t offset, const char *metadata, bool sync_dir, altar_error_t *err);
int altar__local_offset_read(const local_cfg_t *cfg, const char *group, const char *topic, int32_t partition,
                             int64_t *poffset, char **pmetadata, altar_error_t *err);

/* ---- local_committer.c: a group member's commits, written by a thread ---- */
typedef struct lcommitter lcommitter_t;
int altar__local_committer_new(const local_cfg_t *cfg, const char *group, lcommitter_t **pc, altar_error_t *err);
/* Records the partition's newest commit for the thread to write; the
 * error, if any, is a bound or the previous write of that partition. */
int altar__local_committer_put(lcommitter_t *c, const char *topic, int32_t partition, int64_t offset,
                               const char *metadata, altar_error_t *err);
/* Returns once every recorded commit is written or has failed (NULL is fine). */
void altar__local_committer_drain(lcommitter_t *c);
/* Logs and forgets the partition's failed write, if any: for a partition
 * let go, whose failure no later commit will tell. */
void altar__local_committer_tell_failure(altar_transport_t *t, lcommitter_t *c, const char *topic, int32_t partition);
/* Drains, tells what failed, stops the thread and frees c (NULL is fine). */
void altar__local_committer_free(altar_transport_t *t, lcommitter_t *c);

/* ---- local_fs.c: small file helpers ---- */
int altar__local_mkdirs(const char *path, altar_error_t *err);
int altar__local_fsync_dir(const char *path);
char *altar__local_path(const char *a, const char *b); /* a/b, malloc'd */
char *altar__local_pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int altar__local_write_all(int fd, const void *p, size_t n);
ssize_t altar__local_pread_full(int fd, void *p, size_t n, off_t at);

/* ---- local_group.c: membership and partition ownership ---- */
typedef struct lowned {
  char *topic;
  int32_t partition;
  int lock_fd;
  lreader_t *reader;
} lowned_t;

typedef struct lgroup {
  char *group;
  char *dir;
  char **topics;
  size_t n_topics;
  char *member_id;
  int member_fd;
  lowned_t *owned;
  size_t n_owned;
  int64_t next_check_ms;
  altar_rebalance_cb cb;
  void *cb_ctx;
  lcommitter_t *commits; /* made by the first commit */
} lgroup_t;

int altar__local_group_join(altar_transport_t *t, const local_cfg_t *cfg, const char *group, const char *const *topics,
                            size_t n, altar_rebalance_cb cb, void *ctx, lgroup_t **pg, altar_error_t *err);
/* Rebalances when due (or always when force). */
int altar__local_group_check(altar_transport_t *t, const local_cfg_t *cfg, lgroup_t *g, bool force, altar_error_t *err);
/* Revokes everything and leaves; frees g. */
void altar__local_group_leave(altar_transport_t *t, lgroup_t *g);

/* ---- the transport instance (local_transport.c, local_producer.c,
 * local_consumer.c) ---- */
typedef struct lprec lprec_t;

struct lptopic {
  char *name;
  int32_t parts;
  bool *recovered; /* [parts] */
};

typedef struct local_producer {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* work for the flusher */
  pthread_cond_t done_cv; /* reports ready for poll */
  pthread_t thread;
  bool started, stop;
  int flushing;
  lprec_t *head, *tail; /* waiting to be written */
  lprec_t *done_head, *done_tail;
  size_t queued_records, queued_bytes;
  size_t outstanding; /* produced, report not yet served */
  /* topic -> partition count cache, with the partitions this transport
   * has recovered (altar__local_part_recover) before producing to them */
  struct lptopic *topics;
  size_t n_topics;
  uint64_t rng;
  /* flusher-thread only */
  lappender_t **apps;
  size_t n_apps;
  lsegwatch_t segwatch;
} local_producer_t;

typedef struct local_consumer {
  lgroup_t *group;
  lreader_t **assigned; /* assign() mode */
  size_t n_assigned;
  size_t rr;
  bool forced_check;
  bool left;             /* left the group (leave): consume returns nothing */
  bool watch_open;       /* inotify tried (local_watch.c) */
  int watch_fd;          /* its descriptor, -1 when unavailable */
  int64_t next_sweep_ms; /* when every reader counts as changed again */
  int64_t collected_ms;  /* when news was last collected (local_consumer.c) */
  bool pass_empty;       /* the last pass over the readers found nothing */
} local_consumer_t;

typedef struct local {
  local_cfg_t cfg;
  local_producer_t prod;
  local_consumer_t cons;
  struct lend_cache *ends; /* where end_offsets' scans stopped (local_end_offsets.c) */
} local_t;

int altar__local_producer_init(local_producer_t *p);
void altar__local_producer_shutdown(altar_transport_t *t);
int altar__local_produce(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err);
int altar__local_poll(altar_transport_t *t, int timeout_ms);
int altar__local_flush(altar_transport_t *t, int timeout_ms, altar_error_t *err);
void altar__local_producer_forget_topic(altar_transport_t *t, const char *topic);

int altar__local_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n,
                           altar_rebalance_cb cb, void *ctx, altar_error_t *err);
int altar__local_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__local_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err);
int altar__local_wait_fd(altar_transport_t *t);
int altar__local_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__local_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__local_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, altar_error_t *err);
int altar__local_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                        const char *metadata, altar_error_t *err);
int altar__local_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                           int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err);
int altar__local_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err);
int altar__local_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err);
int altar__local_leave(altar_transport_t *t, altar_error_t *err);
void altar__local_consumer_close(altar_transport_t *t);

/* ---- local_watch.c: which partitions changed, and waiting for a change ---- */
void altar__local_watch_collect(local_consumer_t *c, lreader_t *const *rs, size_t n);
bool altar__local_watch_active(const local_consumer_t *c);
void altar__local_watch_wait(local_consumer_t *c, int64_t ms);
void altar__local_watch_close(local_consumer_t *c);

/* transport op end_offsets, and freeing what it remembers (local_end_offsets.c). */
int altar__local_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                             int64_t *pends, altar_error_t *err);
void altar__local_end_cache_free(struct lend_cache *c);

/* transport op topic_members (local_members.c). */
int altar__local_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                               altar_error_t *err);

#endif
