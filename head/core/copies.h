/*
 * copies: the pure rules of the durable tier of the jobs' state copies (issue 15 §1, docs/
 * RELIABILITY.md "The durable tier"). The head keeps each job's newest copy in <data>/states/;
 * the durable tier is a second place outside the cluster (a directory on a shared file system, or
 * an object store reached by an upload and a download command) that the head fills from its own
 * copy every interval_s seconds. These are the decisions about it: which copy a resume loads, when
 * the next durable write is due, and the commands' templates (what placeholders they may hold and
 * how a value is quoted).
 *
 * Also the room a copy needs on the head's own disk (hv_copy_room: several jobs' copies at once
 * must not eat the free space the logs and the state database keep, issue 24).
 *
 * It is not the I/O (head/store/durable.c copies the files and runs the commands on its own
 * thread, head/store/statecopy.c writes the head's copies) nor the bookkeeping (store.c's durable_copies table, through the driver). No I/O, no
 * clock, no allocation; reentrant.
 */
#ifndef HV_HEAD_COPIES_H
#define HV_HEAD_COPIES_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Where a copy of a job's state is kept. The values are stored nowhere: the choice is made again
 * from the stored copies whenever it is needed. */
typedef enum hv_copy_tier {
    HV_COPY_TIER_NONE = 0,    /* no copy */
    HV_COPY_TIER_HEAD = 1,    /* the head's <data>/states/ */
    HV_COPY_TIER_DURABLE = 2, /* the durable tier (directory or object store) */
    HV_COPY_TIER_PEER = 3,    /* a peer agent's memory (issue 28 §3): only as what a resume
                                 loaded (hv_jm_job_t.resumed_from); hv_copy_choose never says it */
} hv_copy_tier_t;

/* "head", "durable", "peer" or "none". */
const char *hv_copy_tier_name(hv_copy_tier_t t);

/* One stored copy as the choice sees it. commit 0: none. */
typedef struct hv_copy_ref_s {
    uint32_t generation; /* the round it was committed in */
    uint64_t commit;     /* the sender's commit count */
    int missing;         /* the head's copy only: its row is stored but its file is gone (the
                            states directory was lost or emptied) */
} hv_copy_ref_t;

/* Is a newer than b (by generation, then commit)? */
int hv_copy_newer(const hv_copy_ref_t *a, const hv_copy_ref_t *b);

/* Pure: the copy a resume loads: the newest of the two that is there; the head's when both hold
 * the same commit (no download needed). A head copy marked missing is never chosen. */
hv_copy_tier_t hv_copy_choose(const hv_copy_ref_t *head, const hv_copy_ref_t *durable);

/* Pure: is a durable write of the job's head copy due? configured: the tier is set up;
 * busy: one is in flight for this job; head: the head's copy; durable: the durable one;
 * since_ms: time since the last durable write of this job began (UINT64_MAX: never);
 * interval_ms: the tier's interval. A copy already durable is never written again; the first one
 * is written at once. */
int hv_durable_due(int configured, int busy, const hv_copy_ref_t *head,
                   const hv_copy_ref_t *durable, uint64_t since_ms, uint64_t interval_ms);

/* Pure: is a restore of the durable copy into the head's place due? Only for a resume that loads
 * it: resume_gen is the job's resumed round (0: never resumed), and the durable copy (the newest,
 * hv_copy_choose) is older than that round. The resumed round may already have closed, and a
 * later one opened, while its members still wait for the copy: a restore stays due until the
 * resumed members commit (their newer copy makes the head's the newest). */
int hv_durable_restore_due(const hv_copy_ref_t *head, const hv_copy_ref_t *durable,
                           uint32_t resume_gen);

/* Pure: is an agent's connection peer (gRPC's form: "ipv4:127.0.0.1:4242", "ipv6:[::1]:4242",
 * "unix:...") on the head's own machine? Loopback and unix sockets are; anything else is taken to
 * be another machine. NULL: no. */
int hv_copy_peer_local(const char *peer);

/* The head's disk as a new copy finds it (head/store/statecopy.c fills it in). */
typedef struct hv_copy_disk_s {
    uint64_t fs_bytes;   /* the size of <data>/states' file system (0: unknown) */
    uint64_t free_bytes; /* free there, for the head (statvfs f_bavail) */
    uint64_t arriving;   /* bytes that the other copies in progress have still to write */
    uint64_t replaced;   /* bytes written by this job's own copy in progress, which the new one
                            replaces (its part is removed) */
    uint64_t reserve;    /* logs.reserve_free_bytes, as configured */
} hv_copy_disk_t;

/* Pure: the bytes a copy must leave free on a file system of fs_bytes (0: unknown): twice the
 * reserve as the logs apply it (at most a quarter of a small file system, joblog.h). The logs
 * stop at one reserve, which keeps the state database's room; copies stop at two, which keeps as
 * much again for the jobs' output. */
uint64_t hv_copy_keep_free(uint64_t reserve, uint64_t fs_bytes);

/* Pure: may a copy of total bytes start? It is counted whole, up front, after what the copies in
 * progress have still to write: 1 when free_bytes + replaced - arriving - total is at least
 * hv_copy_keep_free(reserve, fs_bytes). */
int hv_copy_room(const hv_copy_disk_t *d, uint64_t total);

/* The placeholders a durable command may hold: {file} (the local file to upload or to download
 * into), {key} (the object's name: <epoch>-<job>-g<generation>-c<commit>.bin), {job} (the job id),
 * {sha256} (the copy's digest, hex). */
#define HV_DURABLE_KEYS "{file} {key} {job} {sha256}"

/* The values of one command's placeholders (borrowed). */
typedef struct hv_durable_vars_s {
    const char *file, *key, *job, *sha256;
} hv_durable_vars_t;

/* Pure: expands tmpl into out: each placeholder becomes its value in single quotes (a ' inside
 * written as '\''), so no value is ever read by the shell as code; {{ is a literal {. Errors,
 * with a message in err: HV_ENOTFOUND (an unknown placeholder, named), HV_ETOOBIG (longer than
 * outlen - 1). vars NULL checks the template only (every value ""). */
hv_err hv_durable_expand(const char *tmpl, const hv_durable_vars_t *vars, char *out, size_t outlen,
                         char *err, size_t errlen);

/* ---- copies kept by peers (issue 28 §3) ------------------------------------------------------ */

/* The label key whose value names a node's failure zone ("zone=us-east-1a"). */
#define HV_COPY_ZONE_KEY "zone"

/* Pure: the value of key in labels ("k=v,k=v"; NULL or "" none) copied into out (at most
 * outlen - 1 bytes; "" when the key is absent or its value does not fit). */
void hv_copy_label(const char *labels, const char *key, char *out, size_t outlen);

/* A node that could keep a job's copy in its agent's memory, as the head sees it. */
typedef struct hv_keeper_cand_s {
    uint64_t node_id;
    const char *zone;     /* its zone label's value (NULL or "": none) */
    int usable;           /* alive, not draining, and its agent serves copies (has an address) */
    int has_member;       /* a worker of this job runs there */
    uint64_t free_bytes;  /* copy memory its agent has free (its bound less what it holds) */
    uint64_t holds_bytes; /* the bytes of this job's copy it already holds (replaced by the new
                              one, so counted as room); 0: none */
} hv_keeper_cand_t;

/* Pure: the node that keeps a copy of size bytes that the member on sender_node (zone
 * sender_zone) sends. Never the sender's node, never a node that is not usable or has no room
 * (free_bytes + holds_bytes < size). Among the others, in this order: another zone than the
 * sender's (when both carry a zone label; a node without one counts as the same zone), no member
 * of the job there (a node's loss then takes no member and the copy together), the node that
 * already holds this job's copy (no move), the most free memory, the lowest node id. Returns the
 * index in c, or -1 when no node can keep it (the member sends its copy to the head instead). */
int hv_copy_keeper_choose(const hv_keeper_cand_t *c, size_t n, uint64_t sender_node,
                          const char *sender_zone, uint64_t size);

/* Where a resume or a joiner's sync reads the job's state, given the head's, the durable tier's
 * and the keeper's (peer) copies. keeper_ok: the keeper's node is alive and its agent serves
 * copies. The newest copy that is there wins; at the same commit a peer's (read from another
 * node's memory, the head sends nothing) before the head's before the durable tier's. */
typedef enum hv_copy_source {
    HV_COPY_SOURCE_NONE = 0,
    HV_COPY_SOURCE_PEER = 1,
    HV_COPY_SOURCE_HEAD = 2,
    HV_COPY_SOURCE_DURABLE = 3,
} hv_copy_source_t;

/* "peer", "head", "durable" or "none". */
const char *hv_copy_source_name(hv_copy_source_t s);

/* Pure: the source a resume loads (see hv_copy_source_t). A peer copy whose keeper is not ok is
 * never chosen (the fallback is the head's, then the durable tier's). */
hv_copy_source_t hv_copy_source_choose(const hv_copy_ref_t *peer, int keeper_ok,
                                       const hv_copy_ref_t *head, const hv_copy_ref_t *durable);

#endif
