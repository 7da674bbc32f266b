/*
 * rdzv: the rendezvous seam of libhv. A rendezvous tells a worker who it is in the job (rank,
 * size, local and cross ranks, a generation number) and where its peers' data planes listen;
 * it also offers Done (the training function returned) and a small key-value store (e.g. for an
 * NCCL unique id). Implementations: rdzv_head.c (the head's Rendezvous gRPC service, the real
 * one), rdzv_local.c (an in-process store for tests that run ranks as threads) and rdzv_file.c
 * (a shared directory, for benchmarks and tests that fork ranks without a head). world.c is the
 * only caller; it never knows which implementation it drives.
 *
 * Threading: one rendezvous client is used by one thread at a time.
 */
#ifndef HV_WORKER_LIB_RDZV_H
#define HV_WORKER_LIB_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_RDZV_ADDR_MAX 64
#define HV_RDZV_HOST_MAX 256

typedef struct hv__rdzv_peer_s {
    int rank;
    uint64_t worker_id;
    char addr[HV_RDZV_ADDR_MAX]; /* data-plane "ip:port" */
    char host[HV_RDZV_HOST_MAX]; /* node name: equal names share a host (shared memory) */
} hv__rdzv_peer_t;

typedef struct hv__rdzv_assignment_s {
    uint64_t world_id;   /* identifies the job / test world (data-plane hellos check it) */
    uint32_t generation; /* the round */
    int rank, size;
    int local_rank, local_size; /* among workers with the same host */
    int cross_rank, cross_size; /* index of this host among hosts; number of hosts */
    hv__rdzv_peer_t *peers;     /* size entries, by rank; owned (hv__rdzv_assignment_fini) */
} hv__rdzv_assignment_t;

void hv__rdzv_assignment_fini(hv__rdzv_assignment_t *a);

typedef struct hv__rdzv_ops_s {
    const char *name;
    /* Joins the next round with this worker's data-plane address and host name (borrowed) and
     * blocks until the round closes or timeout_ms passes (HV_ETIMEDOUT). last_generation is the
     * round this worker was in before (0 on the first join). On HV_OK *out is filled (owned by
     * the caller). */
    hv_err (*join)(void *ctx, const char *my_addr, const char *my_host, uint32_t last_generation,
                   uint32_t timeout_ms, hv__rdzv_assignment_t *out);
    /* Reports that the training function returned successfully. Bounded. */
    hv_err (*done)(void *ctx);
    /* Stores value (len bytes, borrowed) under key for the job. */
    hv_err (*kv_put)(void *ctx, const char *key, const void *value, size_t len);
    /* Reads key, waiting up to wait_ms for it to appear (HV_ENOTFOUND after that). On HV_OK
     * *value is an owned buffer (hv_free) of *len bytes. */
    hv_err (*kv_get)(void *ctx, const char *key, uint32_t wait_ms, void **value, size_t *len);
    /* Frees the client. destroy(NULL) is not called. */
    void (*destroy)(void *ctx);
} hv__rdzv_ops_t;

/* A rendezvous client: an implementation and its state. */
typedef struct hv__rdzv_s {
    const hv__rdzv_ops_t *ops;
    void *ctx; /* owned by whoever owns the hv__rdzv_t; freed with ops->destroy */
} hv__rdzv_t;

/* Fills local/cross ranks and sizes of a from the peers' host names (hosts ordered by their
 * lowest rank). Used by implementations whose source gives only ranks and hosts. */
void hv__rdzv_fill_topology(hv__rdzv_assignment_t *a);

/* ---- rdzv_local: in-process store (tests) ---------------------------------------------------- */

typedef struct hv__rdzv_local_store_s hv__rdzv_local_store_t;

/* A store whose rounds close when size workers joined. Thread-safe. */
hv_err hv__rdzv_local_store_create(int size, hv__rdzv_local_store_t **out);
/* Changes the expected size for rounds that have not closed yet. */
void hv__rdzv_local_store_set_size(hv__rdzv_local_store_t *s, int size);
/* How many workers called done since creation. */
int hv__rdzv_local_store_done_count(hv__rdzv_local_store_t *s);
/* Frees the store; every client must have been destroyed. NULL is a no-op. */
void hv__rdzv_local_store_destroy(hv__rdzv_local_store_t *s);
/* A client of the store (borrowed; must outlive the client). want_rank >= 0 asks for that rank
 * (ranks are ordered by want_rank, then by arrival). */
hv_err hv__rdzv_local_client(hv__rdzv_local_store_t *s, int want_rank, hv__rdzv_t *out);

/* ---- rdzv_file: shared directory (multi-process runs without a head) ------------------------- */

/* A client for rank of size whose peers meet in directory dir (which must exist; borrowed
 * string, copied). Every process of the world uses the same dir, size and distinct ranks;
 * generation g's files are named g<g>.r<rank>. */
hv_err hv__rdzv_file_client(const char *dir, int rank, int size, hv__rdzv_t *out);

/* ---- rdzv_head: the head's Rendezvous service ------------------------------------------------ */

/* A client of the head at head_addr ("host:port") for job_id / worker_id. Errors: HV_EUNAVAIL
 * when the gRPC channel cannot be created. */
hv_err hv__rdzv_head_client(const char *head_addr, uint64_t job_id, uint64_t worker_id,
                            hv__rdzv_t *out);

#endif
