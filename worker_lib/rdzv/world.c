/*
 * world: see world.h. Order of construction: listen (so that the advertised port exists before
 * anyone can learn it), join the rendezvous, connect right and accept left, stop listening,
 * build the ring and start the engine. Any failure unwinds what was built.
 */
#include "world.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alive.h"
#include "liveness.h"
#include "log.h"
#include "mem.h"
#include "ring.h"
#include "transport_nccl.h"
#include "transport_shm.h"
#include "transport_tcp.h"
#include "util.h"

struct hv__world_s {
    hv__rdzv_t rdzv; // owned unless rdzv_borrowed
    int rdzv_borrowed;
    hv__rdzv_assignment_t asg; // owned
    hv__link_t *link;          // owned, NULL when size == 1
    hv__ring_t *ring;          // owned
    hv__link_t *intra_link;    // owned, hierarchical mode only: the ranks of this host
    hv__link_t *cross_link;    // owned, hierarchical mode only: same local rank, all hosts
    hv__ring_t *intra;         // owned
    hv__ring_t *cross;         // owned
    hv__engine_t *engine;      // owned
    hv__nccl_t *nccl;          // owned, NULL without a GPU (or with HV_NCCL=0)
    int nbr[3][2];      // global ranks of the left and right neighbours of ring, intra, cross
    hv__live_t *live;   // owned, NULL when no neighbour is watched (liveness.h)
    hv__alive_t *alive; // owned, NULL without death_watch: this rank's mark (alive.h)
    atomic_uint dead;   // HV__RING_LEFT/RIGHT: flat-ring neighbours whose mark saw them die
    atomic_uint killed; // of those, the ones that did not exit() (a signal): hv__world_dead_peers
};

/* The first non-loopback address of this host of the family (AF_INET, or AF_INET6 without
 * link-local ones, which need a scope), else the loopback one. */
static void first_ip(int family, char *buf, size_t len) {
    snprintf(buf, len, family == AF_INET6 ? "::1" : "127.0.0.1");
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0) {
        return;
    }
    for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != family ||
            (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) {
            continue;
        }
        if (family == AF_INET6) {
            const struct in6_addr *a6 = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
            if (IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_LOOPBACK(a6)) {
                continue;
            }
            inet_ntop(AF_INET6, a6, buf, (socklen_t)len);
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, (socklen_t)len);
        }
        break;
    }
    freeifaddrs(ifa);
}

static void advertise(const hv__world_opts_t *o, int port, char *out, size_t len) {
    char ip[256] = "";
    char host[256] = "";
    int bport = 0;
    if (o->bind_addr != NULL &&
        hv_parse_hostport(o->bind_addr, host, sizeof(host), &bport) == HV_OK && host[0] != '\0' &&
        strcmp(host, "0.0.0.0") != 0 && strcmp(host, "::") != 0) {
        snprintf(ip, sizeof(ip), "%s", host);
    } else if (o->advertise_ip != NULL && o->advertise_ip[0] != '\0') {
        snprintf(ip, sizeof(ip), "%s", o->advertise_ip);
    } else {
        /* A wildcard IPv6 bind ("[::]:0") means the head is reached over IPv6. */
        first_ip(o->bind_addr != NULL && strcmp(host, "::") == 0 ? AF_INET6 : AF_INET, ip,
                 sizeof(ip));
    }
    snprintf(out, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, port);
}

/* The hierarchical layout: rings of this host's ranks and of the ranks with this local rank on
 * every host. Only when there are several hosts and every host has the same number (> 1) of
 * ranks; hosts are ordered by their lowest rank, a host's ranks by rank. */
typedef struct hier_s {
    int on;
    int intra_pos, intra_size, intra_left, intra_right; // positions; left/right: global ranks
    int cross_pos, cross_size, cross_left, cross_right;
} hier_t;

static hv_err hier_plan(const hv__rdzv_assignment_t *a, hier_t *h) {
    int n = a->size;
    int *host = hv_calloc((size_t)n * 2, sizeof(int)); // host ordinal, then local index
    if (host == NULL) {
        return HV_ENOMEM;
    }
    int *local = host + n;
    int nhosts = 0;
    for (int r = 0; r < n; r++) {
        host[r] = -1;
        local[r] = 0;
        for (int q = 0; q < r; q++) {
            if (strcmp(a->peers[q].host, a->peers[r].host) == 0) {
                host[r] = host[q];
                local[r]++;
            }
        }
        if (host[r] < 0) {
            host[r] = nhosts++;
        }
    }
    int per = 0, even = 1;
    for (int hh = 0; hh < nhosts; hh++) {
        int cnt = 0;
        for (int r = 0; r < n; r++) {
            cnt += host[r] == hh;
        }
        if (hh == 0) {
            per = cnt;
        } else if (cnt != per) {
            even = 0;
        }
    }
    memset(h, 0, sizeof(*h));
    if (nhosts > 1 && per > 1 && even) {
        int me = a->rank;
        h->on = 1;
        h->intra_size = per;
        h->intra_pos = local[me];
        h->cross_size = nhosts;
        h->cross_pos = host[me];
        for (int r = 0; r < n; r++) {
            if (host[r] == host[me] && local[r] == (local[me] + 1) % per) {
                h->intra_right = r;
            }
            if (host[r] == host[me] && local[r] == (local[me] - 1 + per) % per) {
                h->intra_left = r;
            }
            if (local[r] == local[me] && host[r] == (host[me] + 1) % nhosts) {
                h->cross_right = r;
            }
            if (local[r] == local[me] && host[r] == (host[me] - 1 + nhosts) % nhosts) {
                h->cross_left = r;
            }
        }
    }
    hv_free(host);
    return HV_OK;
}

/* The caller's cancel callback bound to the round being built (for the TCP layer). */
typedef struct world_cancel_s {
    int (*fn)(void *ud, uint32_t generation);
    void *ud;
    uint32_t generation;
} world_cancel_t;

static int world_cancelled(void *ud) {
    world_cancel_t *c = ud;
    return c->fn(c->ud, c->generation);
}

/* One rank's say in nccl_plan, exchanged around the ring. */
typedef struct gpu_rec_s {
    int32_t can;  // 1: sees a GPU and knows its identity
    char bus[32]; // the device's PCI bus id
} gpu_rec_t;

/* Decides, identically on every rank, whether device tensors run on NCCL: every rank must want
 * it and see a GPU, and no two ranks of one host may use the same GPU (NCCL refuses that; with
 * more ranks than GPUs on a host they are staged through host memory instead). *device: this
 * rank's GPU (local_rank modulo the devices it sees). Collective (one ring allgather). */
static hv_err nccl_plan(hv__world_t *w, int *use, int *device) {
    const hv__rdzv_assignment_t *a = &w->asg;
    int n = a->size;
    gpu_rec_t *recs = hv_calloc((size_t)n, sizeof(*recs));
    size_t *lens = hv_calloc(2 * (size_t)n, sizeof(*lens));
    if (recs == NULL || lens == NULL) {
        hv_free(recs);
        hv_free(lens);
        return HV_ENOMEM;
    }
    size_t *offs = lens + n;
    int ndev = hv__gpu_count();
    *device = ndev > 0 ? a->local_rank % ndev : -1;
    gpu_rec_t *me = &recs[a->rank];
    me->can = ndev > 0 && hv__gpu_identity(*device, me->bus, sizeof(me->bus)) == HV_OK;
    me->bus[sizeof(me->bus) - 1] = '\0';
    for (int k = 0; k < n; k++) {
        lens[k] = sizeof(*recs);
        offs[k] = (size_t)k * sizeof(*recs);
    }
    hv_err rc = hv__ring_allgatherv(w->ring, recs, lens, offs);
    char why[512] = "";
    *use = rc == HV_OK;
    for (int k = 0; k < n && *use; k++) {
        recs[k].bus[sizeof(recs[k].bus) - 1] = '\0';
        if (!recs[k].can) {
            *use = 0;
            snprintf(why, sizeof(why), "rank %d has no usable GPU", k);
        }
        for (int j = 0; j < k && *use; j++) {
            if (strcmp(a->peers[j].host, a->peers[k].host) == 0 &&
                strcmp(recs[j].bus, recs[k].bus) == 0) {
                *use = 0;
                snprintf(why, sizeof(why),
                         "ranks %d and %d share the GPU at %s on host %s (NCCL needs one GPU "
                         "per rank)",
                         j, k, recs[k].bus, a->peers[k].host);
            }
        }
    }
    if (rc == HV_OK && !*use && me->can) {
        HV_LOG(HV_LOG_WARN, "world", "HV-WORLD-NCCL-OFF",
               "rank %d: device tensors are staged through host memory, not NCCL: %s", a->rank,
               why);
    }
    hv_free(recs);
    hv_free(lens);
    return rc;
}

/* What hv__world_create's steps share while the world is built. */
typedef struct world_build_s {
    hv__tcp_listener_t *lst;     // owned until the links are made (world_create frees it)
    char addr[HV_RDZV_ADDR_MAX]; // this rank's data-plane address, as advertised
    hier_t hier;                 // the hierarchical layout (hier.on: three rings)
    uint32_t peer_ms;            // bound on a peer's silence (ring, NCCL, engine)
    uint32_t conn_ms;            // bound on connecting the links and their handshakes
    uint32_t spin;               // spin before blocking, in us (rings and engine)
    int send_fd, recv_fd;        // the flat ring's TCP sockets (under a shared-memory upgrade)
} world_build_t;

/* Rendezvous: joins with this rank's advertised address (the listener's port) and keeps the
 * assignment in w->asg. */
static hv_err world_rendezvous(hv__world_t *w, hv__world_opts_t *o, world_build_t *b) {
    advertise(o, hv__tcp_listener_port(b->lst), b->addr, sizeof(b->addr));
    const char *host = o->host_name != NULL ? o->host_name : "localhost";
    uint32_t rdzv_ms = o->rdzv_timeout_ms ? o->rdzv_timeout_ms : 90000;
    hv_err rc = w->rdzv.ops->join(w->rdzv.ctx, b->addr, host, o->last_generation, rdzv_ms, &w->asg);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-RDZV", "joining the %s rendezvous failed: %s",
               w->rdzv.ops->name, hv_strerror(rc));
        return rc;
    }
    o->joined_generation = w->asg.generation;
    return HV_OK;
}

/* Links, 1: connects right and accepts left on every ring (one, or three when hierarchical). */
static hv_err world_connect(hv__world_t *w, const hv__world_opts_t *o, world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    const hier_t *hier = &b->hier;
    int right = (a->rank + 1) % a->size, left = (a->rank - 1 + a->size) % a->size;
    hv__tcp_ident_t ids[3] = {{.world_id = a->world_id,
                               .generation = a->generation,
                               .rank = (uint32_t)a->rank,
                               .left_rank = (uint32_t)left,
                               .right_rank = (uint32_t)right,
                               .ring = 0}};
    const char *addrs[3] = {a->peers[right].addr};
    int nlinks = 1;
    if (hier->on) {
        ids[1] = ids[0];
        ids[1].ring = 1;
        ids[1].left_rank = (uint32_t)hier->intra_left;
        ids[1].right_rank = (uint32_t)hier->intra_right;
        addrs[1] = a->peers[hier->intra_right].addr;
        ids[2] = ids[0];
        ids[2].ring = 2;
        ids[2].left_rank = (uint32_t)hier->cross_left;
        ids[2].right_rank = (uint32_t)hier->cross_right;
        addrs[2] = a->peers[hier->cross_right].addr;
        nlinks = 3;
    }
    hv__link_t *links[3] = {NULL, NULL, NULL};
    world_cancel_t wc = {.fn = o->cancel, .ud = o->cancel_ud, .generation = a->generation};
    hv__tcp_opts_t topts = {.sock_buf = o->sock_buf,
                            .cancelled = o->cancel != NULL ? world_cancelled : NULL,
                            .cancel_ud = &wc};
    hv_err rc = hv__tcp_links_create(b->lst, addrs, ids, nlinks, &topts, (int)b->conn_ms, links);
    if (rc == HV_OK) {
        b->send_fd = hv__tcp_link_send_fd(links[0]);
        b->recv_fd = hv__tcp_link_recv_fd(links[0]);
    }
    w->link = links[0];
    w->intra_link = links[1];
    w->cross_link = links[2];
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-CONNECT",
               "rank %d: connecting the ring (right: rank %d at %s) failed: %s", a->rank, right,
               a->peers[right].addr, hv_strerror(rc));
    }
    return rc;
}

/* Links, 2: neighbours on this host talk through shared memory (both ends see the same hosts,
 * so both decide the same way for each direction); the host ring of a hierarchical world too. */
static hv_err world_shm(hv__world_t *w, const hv__world_opts_t *o, const world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    int right = (a->rank + 1) % a->size, left = (a->rank - 1 + a->size) % a->size;
    int send_local = strcmp(a->peers[right].host, a->peers[a->rank].host) == 0;
    int recv_local = strcmp(a->peers[left].host, a->peers[a->rank].host) == 0;
    hv_err rc;
    if (o->shm_bytes > 0 && (send_local || recv_local)) {
        hv__link_t *up = NULL;
        rc = hv__shm_link_upgrade(w->link, send_local, recv_local, o->shm_bytes, (int)b->conn_ms,
                                  &up);
        if (rc != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-SHM",
                   "rank %d: shared-memory handshake with the neighbours failed: %s", a->rank,
                   hv_strerror(rc));
            return rc;
        }
        w->link = up;
    }
    if (b->hier.on && o->shm_bytes > 0) {
        hv__link_t *up = NULL;
        rc = hv__shm_link_upgrade(w->intra_link, 1, 1, o->shm_bytes, (int)b->conn_ms, &up);
        if (rc != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-SHM",
                   "rank %d: shared-memory handshake on the host ring failed: %s", a->rank,
                   hv_strerror(rc));
            return rc;
        }
        w->intra_link = up;
    }
    return HV_OK;
}

/* Rings: the ring over all ranks, and the host and cross rings of a hierarchical world. Decides
 * the spin (b->spin), which the engine uses too. */
static hv_err world_rings(hv__world_t *w, const hv__world_opts_t *o, world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    b->spin = o->spin_us;
    if (b->spin == UINT32_MAX) {
        // Spin loops yield the CPU on every turn, so with more local ranks than cores a longer
        // spin lets the rank we wait for run on this core without the 25-30 us of a blocking
        // wake-up (measured at 4 ranks on 2 cores: shared-memory 4 KiB allreduce 80 -> 10 us).
        b->spin = ncpu > 0 && a->local_size <= ncpu ? 50 : 100;
    }
    hv__ring_opts_t ro = {
        .timeout_ms = b->peer_ms,
        .spin_us = b->spin,
        .stage_bytes = o->stage_bytes ? o->stage_bytes : 256u << 10,
        .small_bytes = o->small_bytes != SIZE_MAX ? o->small_bytes : 16u << 10,
        // 256 KiB segments per step: each chunk's working set stays in cache (measured best
        // between 128 KiB and 512 KiB at 2 and 4 ranks over loopback TCP).
        .chunk_bytes = o->chunk_bytes == SIZE_MAX ? 0
                       : o->chunk_bytes           ? o->chunk_bytes
                                                  : (size_t)a->size * (256u << 10),
    };
    HV_TRY(hv__ring_create(a->rank, a->size, w->link, &ro, &w->ring));
    w->nbr[0][0] = (a->rank - 1 + a->size) % a->size;
    w->nbr[0][1] = (a->rank + 1) % a->size;
    if (b->hier.on) {
        const hier_t *h = &b->hier;
        w->nbr[1][0] = h->intra_left;
        w->nbr[1][1] = h->intra_right;
        w->nbr[2][0] = h->cross_left;
        w->nbr[2][1] = h->cross_right;
        HV_TRY(hv__ring_create(h->intra_pos, h->intra_size, w->intra_link, &ro, &w->intra));
        HV_TRY(hv__ring_create(h->cross_pos, h->cross_size, w->cross_link, &ro, &w->cross));
    }
    return HV_OK;
}

/* NCCL: only when it is wanted (HV_NCCL, the same on every rank of a job): then every rank takes
 * part in the agreement, GPU or not, and those that agree create the communicator. */
static hv_err world_nccl(hv__world_t *w, const hv__world_opts_t *o, const world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    int use_nccl = 0, device = -1;
    hv_err rc;
    if (a->size > 1 && o->use_nccl && (rc = nccl_plan(w, &use_nccl, &device)) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-NCCL",
               "rank %d: agreeing on the GPU path with the other ranks failed: %s", a->rank,
               hv_strerror(rc));
        return rc;
    }
    if (use_nccl) {
        // Device tensors go through NCCL; without it they are staged through host memory.
        rc = hv__nccl_create(&w->rdzv, a->rank, a->size, device, a->generation, b->peer_ms,
                             &w->nccl);
        if (rc != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "world", "HV-WORLD-NCCL",
                   "rank %d: creating the NCCL communicator failed: %s", a->rank, hv_strerror(rc));
            return rc;
        }
    }
    return HV_OK;
}

/* Engine: over the ring (and NCCL, and the hierarchical rings, when there are). */
static hv_err world_engine(hv__world_t *w, const hv__world_opts_t *o, const world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    hv__engine_opts_t eo = {
        .nccl = w->nccl,
        .intra = w->intra,
        .cross = w->cross,
        .hier_min_bytes = o->hier_min_bytes ? o->hier_min_bytes : 256u << 10,
        .fusion_threshold = o->fusion_threshold,
        .cycle_time_us = o->cycle_time_us ? o->cycle_time_us : 1000,
        .spin_us = b->spin,
        .peer_timeout_ms = b->peer_ms,
        // Data inside the negotiation frame: one exchange instead of a round plus a ring
        // allreduce. At 2 ranks that moves the same bytes in fewer steps (measured over
        // loopback TCP: 64 KiB 37 -> 28 us, 256 KiB 80 -> 72 us); with more ranks every rank
        // receives n-1 whole frames, so the bound drops (4 ranks: 128 KiB 345 -> 225 us at 16 KiB).
        .spec_bytes = o->spec_bytes != SIZE_MAX ? o->spec_bytes
                      : a->size <= 2            ? 256u << 10
                      : (128u << 10) / (size_t)a->size > (16u << 10)
                          ? (128u << 10) / (size_t)a->size
                          : 16u << 10,
        .cache_capacity = 0,
    };
    return hv__engine_create(w->ring, &eo, &w->engine);
}

/* The liveness monitor found a ring neighbour silent: the rendezvous tells the head (on its own
 * thread: this is the monitor's, which must not block). tag: the neighbour's worker id. */
static void world_silent(void *ud, uint64_t tag, unsigned how, uint32_t silent_ms) {
    hv__world_t *w = ud;
    unsigned side = how == HV__LIVE_HEAR ? HV_RDZV_SILENT_HEAR : HV_RDZV_SILENT_ACK;
    HV_LOG(HV_LOG_NOTICE, "world", "HV-WORLD-SILENT",
           "rank %d generation %u: ring neighbour worker %llu has been silent for %u ms (%s)",
           w->asg.rank, w->asg.generation, (unsigned long long)tag, silent_ms,
           side == HV_RDZV_SILENT_HEAR ? "no heartbeat from it"
                                       : "its host does not acknowledge ours");
    w->rdzv.ops->note_silent(w->rdzv.ctx, w->asg.generation, tag, side, silent_ms);
}

/* Liveness: the flat ring's directions to neighbours on other hosts are watched (they are TCP
 * even when the link was upgraded to shared memory: only same-host directions are). Both ends
 * decide from the same host names, so a neighbour beats exactly where this rank listens. Off
 * without liveness_ms or a rendezvous to tell; a monitor that cannot start is only logged. */
static void world_liveness(hv__world_t *w, const hv__world_opts_t *o, const world_build_t *b) {
    const hv__rdzv_assignment_t *a = &w->asg;
    if (o->liveness_ms == 0 || a->size < 2 || w->rdzv.ops->note_silent == NULL || b->send_fd < 0) {
        return;
    }
    const hv__rdzv_peer_t *left = &a->peers[w->nbr[0][0]], *right = &a->peers[w->nbr[0][1]];
    const char *me = a->peers[a->rank].host;
    hv__live_watch_t ws[2];
    size_t n = 0;
    if (strcmp(right->host, me) != 0) {
        ws[n++] =
            (hv__live_watch_t){.fd = b->send_fd, .how = HV__LIVE_HEAR, .tag = right->worker_id};
    }
    if (strcmp(left->host, me) != 0) {
        ws[n++] = (hv__live_watch_t){.fd = b->recv_fd, .how = HV__LIVE_ACK, .tag = left->worker_id};
    }
    hv__live_opts_t lo = {.silent_ms = o->liveness_ms};
    if (n > 0 && hv__live_start(&lo, ws, n, world_silent, w, &w->live) != HV_OK) {
        w->live = NULL; // evidence only: the peer timeout and the lease still bound a loss
    }
}

/* Death watch, 1: this rank's mark (alive.h), before it connects, so that a neighbour that
 * finished its handshake with this rank finds it. Evidence only: without it the sockets and
 * the liveness monitor still tell a death, later. */
static void world_alive_hold(hv__world_t *w, const hv__world_opts_t *o) {
    const hv__rdzv_assignment_t *a = &w->asg;
    if (!o->death_watch) {
        return;
    }
    hv_err rc =
        hv__alive_hold(a->world_id, a->generation, a->rank, a->peers[a->rank].addr, &w->alive);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_INFO, "world", "HV-WORLD-ALIVE",
               "rank %d: no death-watch mark in /dev/shm (%s); neighbours notice a death by its "
               "sockets",
               a->rank, hv_strerror(rc));
        w->alive = NULL;
    }
}

/* The mark of a flat-ring neighbour on this machine said it died: fail the ring at once, as its
 * sockets' EOF would (later); the rendezvous hears it among the broken peers. tag: the sides.
 * Between the rings and the engine (hv_init's own collectives: nccl_plan's allgather) the
 * neighbour may have finished them and ended on its own, its last data already written: its
 * side ends as on an EOF (transport.h peer_gone), so that data is still read and the build
 * fails only if it needs more from the dead rank, not because it died. (A handshake before
 * needs the neighbour alive: an abort ends it at once.) */
static void world_peer_died(void *ud, uint64_t tag) {
    hv__world_t *w = ud;
    unsigned sides = (unsigned)(tag & (HV__RING_LEFT | HV__RING_RIGHT));
    atomic_fetch_or(&w->dead, sides);
    if (!(tag & HV__ALIVE_EXITED)) {
        atomic_fetch_or(&w->killed, sides);
    }
    hv__link_t *l = w->link;
    if (w->ring != NULL && w->engine == NULL && l->ops->peer_gone != NULL) {
        l->ops->peer_gone(l, (sides & HV__RING_RIGHT) != 0, (sides & HV__RING_LEFT) != 0);
        return;
    }
    char why[160];
    int side = sides & HV__RING_LEFT ? 0 : 1;
    snprintf(why, sizeof(why), "ring neighbour rank %d (worker %llu) died (its death-watch mark)",
             w->nbr[0][side], (unsigned long long)w->asg.peers[w->nbr[0][side]].worker_id);
    hv__world_abort(w, HV_EPEER, why);
}

/* Death watch, 2: after the links are made (both neighbours hold their marks by then), watch the
 * marks of the flat ring's neighbours found on this machine. */
static void world_alive_watch(hv__world_t *w) {
    const hv__rdzv_assignment_t *a = &w->asg;
    if (w->alive == NULL) {
        return;
    }
    int left = (a->rank - 1 + a->size) % a->size, right = (a->rank + 1) % a->size;
    w->nbr[0][0] = left;
    w->nbr[0][1] = right;
    unsigned ltag = HV__RING_LEFT | (left == right ? HV__RING_RIGHT : 0u);
    hv__alive_watch(w->alive, left, a->peers[left].addr, ltag, world_peer_died, w);
    if (right != left) {
        hv__alive_watch(w->alive, right, a->peers[right].addr, HV__RING_RIGHT, world_peer_died, w);
    }
}

/* Steps (see the file's comment): listener, rendezvous, links (connect, shared memory), stop
 * listening, rings, NCCL, engine, liveness. A drained rank stops after the rendezvous. */
hv_err hv__world_create(hv__world_opts_t *o, hv__world_t **out) {
    world_build_t b = {.lst = NULL, .send_fd = -1, .recv_fd = -1};
    hv_err rc = HV_OK;
    o->joined_generation = 0;
    hv__world_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        if (!o->rdzv_borrowed) {
            o->rdzv.ops->destroy(o->rdzv.ctx);
        }
        return HV_ENOMEM;
    }
    w->rdzv = o->rdzv;
    w->rdzv_borrowed = o->rdzv_borrowed;
    HV_TRY_GOTO(hv__tcp_listen(o->bind_addr, &b.lst), rc, fail);
    HV_TRY_GOTO(world_rendezvous(w, o, &b), rc, fail);
    if (w->asg.removed) {
        // Drained: no data plane. The caller sees assignment->removed and leaves the job.
        hv__tcp_listener_destroy(b.lst);
        *out = w;
        return HV_OK;
    }
    const hv__rdzv_assignment_t *a = &w->asg;
    b.peer_ms = o->peer_timeout_ms ? o->peer_timeout_ms : 5000;
    b.conn_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 30000;
    if (o->hierarchical && a->size > 1) {
        HV_TRY_GOTO(hier_plan(a, &b.hier), rc, fail);
    }
    if (a->size > 1) {
        world_alive_hold(w, o);
        HV_TRY_GOTO(world_connect(w, o, &b), rc, fail);
        world_alive_watch(w);
        HV_TRY_GOTO(world_shm(w, o, &b), rc, fail);
    }
    hv__tcp_listener_destroy(b.lst);
    b.lst = NULL;
    HV_TRY_GOTO(world_rings(w, o, &b), rc, fail);
    HV_TRY_GOTO(world_nccl(w, o, &b), rc, fail);
    HV_TRY_GOTO(world_engine(w, o, &b), rc, fail);
    world_liveness(w, o, &b);
    HV_LOG(HV_LOG_INFO, "world", "HV-WORLD-UP",
           "rank %d of %d (local %d of %d) generation %u, data plane %s", a->rank, a->size,
           a->local_rank, a->local_size, a->generation, b.addr);
    *out = w;
    return HV_OK;
fail:
    hv__tcp_listener_destroy(b.lst);
    hv__world_destroy(w, 0);
    return rc;
}

hv_err hv__world_destroy(hv__world_t *w, int report_done) {
    if (w == NULL) {
        return HV_OK;
    }
    hv_err rc = HV_OK;
    hv__alive_release(w->alive); // first: no death-watch callback (an abort) after this
    hv__live_stop(w->live);      // it reads and writes the links' sockets
    if (w->engine != NULL) {
        hv__engine_destroy(w->engine);
    }
    hv__nccl_destroy(w->nccl);
    hv__ring_destroy(w->ring);
    hv__ring_destroy(w->intra);
    hv__ring_destroy(w->cross);
    hv__link_t *links[3] = {w->link, w->intra_link, w->cross_link};
    for (int i = 0; i < 3; i++) {
        if (links[i] != NULL) {
            links[i]->ops->destroy(links[i]);
        }
    }
    if (report_done && w->rdzv.ops != NULL && !w->asg.removed) {
        rc = w->rdzv.ops->done(w->rdzv.ctx, w->asg.generation);
    }
    if (w->rdzv.ops != NULL && !w->rdzv_borrowed) {
        w->rdzv.ops->destroy(w->rdzv.ctx);
    }
    hv__rdzv_assignment_fini(&w->asg);
    hv_free(w);
    return rc;
}

void hv__world_leave(hv__world_t *w) {
    if (w == NULL) {
        return;
    }
    // A communicator that is finalised waits for its peers; after a reset some may be gone.
    hv__nccl_abort(w->nccl);
    hv__world_destroy(w, 0);
}

size_t hv__world_broken_peers(const hv__world_t *w, uint64_t *out, size_t cap) {
    size_t n = 0;
    const hv__ring_t *rings[3] = {w != NULL ? w->ring : NULL, w != NULL ? w->intra : NULL,
                                  w != NULL ? w->cross : NULL};
    for (int i = 0; i < 3; i++) {
        unsigned mask = hv__ring_broken(rings[i]);
        if (i == 0 && w != NULL) {
            mask |= atomic_load(&((hv__world_t *)w)->dead);
        }
        for (int side = 0; side < 2; side++) {
            if (!(mask & (side == 0 ? HV__RING_LEFT : HV__RING_RIGHT))) {
                continue;
            }
            uint64_t id = w->asg.peers[w->nbr[i][side]].worker_id;
            int seen = 0;
            for (size_t k = 0; k < n; k++) {
                seen |= out[k] == id;
            }
            if (!seen && n < cap) {
                out[n++] = id;
            }
        }
    }
    return n;
}

size_t hv__world_dead_peers(const hv__world_t *w, uint64_t *out, size_t cap) {
    if (w == NULL) {
        return 0;
    }
    unsigned mask = atomic_load(&((hv__world_t *)w)->killed);
    size_t n = 0;
    for (int side = 0; side < 2; side++) {
        if (!(mask & (side == 0 ? HV__RING_LEFT : HV__RING_RIGHT))) {
            continue;
        }
        uint64_t id = w->asg.peers[w->nbr[0][side]].worker_id;
        if (n < cap && (n == 0 || out[0] != id)) {
            out[n++] = id;
        }
    }
    return n;
}

hv__engine_t *hv__world_engine(hv__world_t *w) { return w->engine; }
const hv__rdzv_assignment_t *hv__world_assignment(const hv__world_t *w) { return &w->asg; }
hv__rdzv_t *hv__world_rdzv(hv__world_t *w) { return &w->rdzv; }
int hv__world_uses_nccl(const hv__world_t *w) { return w->nccl != NULL; }

void hv__world_abort(hv__world_t *w, hv_err why, const char *reason) {
    if (w->engine != NULL) {
        hv__engine_abort(w->engine, why, reason);
        return;
    }
    hv__link_t *links[3] = {w->link, w->intra_link, w->cross_link};
    for (int i = 0; i < 3; i++) {
        if (links[i] != NULL) {
            links[i]->ops->abort(links[i]);
        }
    }
}
