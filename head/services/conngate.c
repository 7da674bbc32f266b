/*
 * conngate: see conngate.h. The decision, the table of admitted connections, and the
 * process-wide gate with the accept4 that libgrpc calls in place of libc's.
 */
#include "conngate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define CONNTAB_BUCKETS 4096 /* client keys hash into this many chains */

/* ---- the decision --------------------------------------------------------------------------- */

hv_conngate_verdict hv_conngate_decide(uint32_t client_open, uint32_t total_open, int node,
                                       const hv_conngate_limits_t *lim) {
    if (lim->max_per_client != 0 && client_open >= lim->max_per_client) {
        return HV_CONNGATE_REFUSE_CLIENT;
    }
    if (lim->max_total != 0 && total_open >= lim->max_total) {
        return HV_CONNGATE_REFUSE_TOTAL;
    }
    if (!node && lim->max_total != 0 && lim->node_share < lim->max_total &&
        total_open >= lim->max_total - lim->node_share) {
        return HV_CONNGATE_REFUSE_SHARE;
    }
    return HV_CONNGATE_ADMIT;
}

void hv_conngate_derive(uint64_t nofile, uint64_t reserve, hv_conngate_limits_t *lim) {
    uint64_t total = nofile > reserve ? (nofile - reserve) / HV_CONNGATE_FDS_PER_CONN : 0;
    total = total < 2 ? 2 : total > HV_CONNGATE_MAX_AUTO ? HV_CONNGATE_MAX_AUTO : total;
    if (lim->max_total == 0) {
        lim->max_total = (uint32_t)total;
    }
    if (lim->max_per_client == 0) {
        uint32_t half = lim->max_total / 2;
        lim->max_per_client = half > 0 ? half : 1;
    }
    lim->node_share = lim->max_total / 4;
}

int hv_conngate_key(const void *sockaddr, size_t len, char out[HV_CONNGATE_KEY_LEN]) {
    out[0] = '\0';
    const struct sockaddr *sa = sockaddr;
    if (len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = sockaddr;
        return inet_ntop(AF_INET, &in->sin_addr, out, HV_CONNGATE_KEY_LEN) != NULL ? 0 : -1;
    }
    if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = sockaddr;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            /* A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d: one client, one key. */
            return inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], out, HV_CONNGATE_KEY_LEN) != NULL
                       ? 0
                       : -1;
        }
        return inet_ntop(AF_INET6, &in6->sin6_addr, out, HV_CONNGATE_KEY_LEN) != NULL ? 0 : -1;
    }
    return -1;
}

int hv_conngate_peer_key(const char *peer, char out[HV_CONNGATE_KEY_LEN]) {
    out[0] = '\0';
    if (peer == NULL) {
        return -1;
    }
    char host[HV_CONNGATE_KEY_LEN];
    const char *h, *end;
    if (strncmp(peer, "ipv4:", 5) == 0) {
        h = peer + 5;
        end = strrchr(h, ':');
    } else if (strncmp(peer, "ipv6:[", 6) == 0 || strncmp(peer, "ipv6:%5B", 8) == 0 ||
               strncmp(peer, "ipv6:%5b", 8) == 0) {
        h = peer + (peer[5] == '[' ? 6 : 8);
        end = strchr(h, peer[5] == '[' ? ']' : '%');
    } else {
        return -1;
    }
    if (end == NULL || end == h || (size_t)(end - h) >= sizeof(host)) {
        return -1;
    }
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = '\0';
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, host, &in.sin_addr) == 1) {
        return hv_conngate_key(&in, sizeof(in), out);
    }
    char *zone = strchr(host, '%'); /* fe80::1%eth0: the zone is no part of the address */
    if (zone != NULL) {
        *zone = '\0';
    }
    if (inet_pton(AF_INET6, host, &in6.sin6_addr) == 1) {
        return hv_conngate_key(&in6, sizeof(in6), out);
    }
    return -1;
}

/* ---- the table ------------------------------------------------------------------------------ */

/* One client: its key and how many recorded connections it holds. Owned by the table; freed
 * when its count falls to 0. */
typedef struct conntab_client_s {
    struct conntab_client_s *next; /* the next in its hash chain */
    uint32_t count;                /* entries that point here */
    char key[HV_CONNGATE_KEY_LEN];
} conntab_client_t;

/* An admitted connection, at the index of its descriptor. */
typedef struct conntab_entry_s {
    conntab_client_t *client; /* NULL: no connection recorded at this fd */
    dev_t dev;                /* the socket's identity when it was accepted */
    ino_t ino;
} conntab_entry_t;

/* A node's address (hv_conntab_note_node), in its hash chain. */
typedef struct conntab_node_s {
    struct conntab_node_s *next;
    char key[HV_CONNGATE_KEY_LEN];
} conntab_node_t;

struct hv_conntab_s {
    conntab_node_t *nodes[CONNTAB_BUCKETS]; /* the nodes' addresses; owned */
    uint32_t n_nodes;                       /* addresses in nodes */
    conntab_entry_t *entries;               /* indexed by fd; owned */
    size_t cap;                             /* entries allocated */
    uint32_t total;                         /* entries in use */
    uint64_t last_prune_ms;                 /* now_ms of the last prune by hv_conntab_admit */
    int pruned;                             /* a prune has run (last_prune_ms is meaningful) */
    conntab_client_t *buckets[CONNTAB_BUCKETS];
};

static uint32_t conntab_hash(const char *key) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
        h = (h ^ *p) * 16777619u;
    }
    return h % CONNTAB_BUCKETS;
}

hv_err hv_conntab_create(hv_conntab_t **out) {
    hv_conntab_t *t = hv_calloc(1, sizeof(*t));
    if (t == NULL) {
        return HV_ENOMEM;
    }
    *out = t;
    return HV_OK;
}

void hv_conntab_destroy(hv_conntab_t *t) {
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < CONNTAB_BUCKETS; i++) {
        conntab_client_t *c = t->buckets[i];
        while (c != NULL) {
            conntab_client_t *next = c->next;
            hv_free(c);
            c = next;
        }
        conntab_node_t *n = t->nodes[i];
        while (n != NULL) {
            conntab_node_t *next = n->next;
            hv_free(n);
            n = next;
        }
    }
    hv_free(t->entries);
    hv_free(t);
}

static conntab_client_t *conntab_find(const hv_conntab_t *t, const char *key) {
    for (conntab_client_t *c = t->buckets[conntab_hash(key)]; c != NULL; c = c->next) {
        if (strcmp(c->key, key) == 0) {
            return c;
        }
    }
    return NULL;
}

/* Removes the entry at fd (if any) and releases its client. */
static void conntab_drop(hv_conntab_t *t, int fd) {
    if (fd < 0 || (size_t)fd >= t->cap || t->entries[fd].client == NULL) {
        return;
    }
    conntab_client_t *c = t->entries[fd].client;
    t->entries[fd].client = NULL;
    t->total--;
    if (--c->count == 0) {
        for (conntab_client_t **p = &t->buckets[conntab_hash(c->key)]; *p != NULL;
             p = &(*p)->next) {
            if (*p == c) {
                *p = c->next;
                break;
            }
        }
        hv_free(c);
    }
}

/* Records fd under key. HV_ENOMEM leaves the table as it was. */
static hv_err conntab_put(hv_conntab_t *t, int fd, const char *key, const struct stat *sb) {
    if ((size_t)fd >= t->cap) {
        size_t cap = t->cap != 0 ? t->cap : 64;
        while (cap <= (size_t)fd) {
            cap *= 2;
        }
        conntab_entry_t *ne = hv_realloc(t->entries, cap * sizeof(*ne));
        if (ne == NULL) {
            return HV_ENOMEM;
        }
        memset(ne + t->cap, 0, (cap - t->cap) * sizeof(*ne));
        t->entries = ne;
        t->cap = cap;
    }
    conntab_client_t *c = conntab_find(t, key);
    if (c == NULL) {
        if ((c = hv_calloc(1, sizeof(*c))) == NULL) {
            return HV_ENOMEM;
        }
        snprintf(c->key, sizeof(c->key), "%s", key);
        uint32_t b = conntab_hash(c->key);
        c->next = t->buckets[b];
        t->buckets[b] = c;
    }
    c->count++;
    t->entries[fd] = (conntab_entry_t){.client = c, .dev = sb->st_dev, .ino = sb->st_ino};
    t->total++;
    return HV_OK;
}

uint32_t hv_conntab_prune(hv_conntab_t *t) {
    uint32_t dropped = 0;
    for (size_t fd = 0; fd < t->cap && t->total > 0; fd++) {
        if (t->entries[fd].client == NULL) {
            continue;
        }
        struct stat sb;
        if (fstat((int)fd, &sb) != 0 || !S_ISSOCK(sb.st_mode) || sb.st_dev != t->entries[fd].dev ||
            sb.st_ino != t->entries[fd].ino) {
            conntab_drop(t, (int)fd);
            dropped++;
        }
    }
    return dropped;
}

int hv_conntab_is_node(const hv_conntab_t *t, const char *key) {
    for (const conntab_node_t *n = t->nodes[conntab_hash(key)]; n != NULL; n = n->next) {
        if (strcmp(n->key, key) == 0) {
            return 1;
        }
    }
    return 0;
}

hv_err hv_conntab_note_node(hv_conntab_t *t, const char *key) {
    if (hv_conntab_is_node(t, key)) {
        return HV_OK;
    }
    if (t->n_nodes >= HV_CONNGATE_MAX_NODES) {
        return HV_ETOOBIG;
    }
    conntab_node_t *n = hv_calloc(1, sizeof(*n));
    if (n == NULL) {
        return HV_ENOMEM;
    }
    snprintf(n->key, sizeof(n->key), "%s", key);
    uint32_t b = conntab_hash(n->key);
    n->next = t->nodes[b];
    t->nodes[b] = n;
    t->n_nodes++;
    return HV_OK;
}

uint32_t hv_conntab_total(const hv_conntab_t *t) { return t->total; }

uint32_t hv_conntab_count(const hv_conntab_t *t, const char *key) {
    const conntab_client_t *c = conntab_find(t, key);
    return c != NULL ? c->count : 0;
}

hv_conngate_verdict hv_conntab_admit(hv_conntab_t *t, int fd, const char *key,
                                     const hv_conngate_limits_t *lim, uint64_t now_ms) {
    conntab_drop(t, fd); /* that connection is closed: its number was given out again */
    int node = hv_conntab_is_node(t, key);
    hv_conngate_verdict v = hv_conngate_decide(hv_conntab_count(t, key), t->total, node, lim);
    if (v != HV_CONNGATE_ADMIT &&
        (!t->pruned || now_ms - t->last_prune_ms >= HV_CONNGATE_PRUNE_MS)) {
        t->pruned = 1;
        t->last_prune_ms = now_ms;
        if (hv_conntab_prune(t) > 0) {
            v = hv_conngate_decide(hv_conntab_count(t, key), t->total, node, lim);
        }
    }
    struct stat sb;
    if (v == HV_CONNGATE_ADMIT && fstat(fd, &sb) == 0) {
        (void)conntab_put(t, fd, key, &sb); /* out of memory: admitted, not counted */
    }
    return v;
}

/* ---- the gate ------------------------------------------------------------------------------- */

/* All of it guarded by gate_mu, but gate_on, read first without the lock on every accept. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static int gate_on;                           /* atomic: hv_conngate_start ran, stop did not */
static hv_conntab_t *gate_tab;                /* owned; NULL when off */
static hv_conngate_limits_t gate_lim;         /* the bounds in force */
static int gate_ports[HV_CONNGATE_MAX_PORTS]; /* listening ports gated */
static size_t gate_n_ports;                   /* entries of gate_ports in use */
static uint64_t gate_refused[4];              /* by verdict (index 0 unused) */
static uint64_t gate_last_log_ms;             /* when HV-CONN-LIMIT was last written */
static int gate_logged;                       /* HV-CONN-LIMIT was written once */
static uint64_t gate_unlogged;                /* refusals since then, not logged */

hv_err hv_conngate_start(const hv_conngate_limits_t *lim) {
    hv_err rc = HV_OK;
    pthread_mutex_lock(&gate_mu);
    if (gate_tab == NULL) {
        rc = hv_conntab_create(&gate_tab);
    }
    if (rc == HV_OK) {
        gate_lim = *lim;
        __atomic_store_n(&gate_on, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&gate_mu);
    return rc;
}

hv_err hv_conngate_watch_port(int port) {
    if (port <= 0 || port > 65535) {
        return HV_EINVAL;
    }
    hv_err rc = HV_OK;
    pthread_mutex_lock(&gate_mu);
    size_t i = 0;
    while (i < gate_n_ports && gate_ports[i] != port) {
        i++;
    }
    if (i == gate_n_ports) {
        if (gate_n_ports == HV_CONNGATE_MAX_PORTS) {
            rc = HV_ETOOBIG;
        } else {
            gate_ports[gate_n_ports++] = port;
        }
    }
    pthread_mutex_unlock(&gate_mu);
    return rc;
}

void hv_conngate_note_node_peer(const char *peer) {
    char key[HV_CONNGATE_KEY_LEN];
    if (hv_conngate_peer_key(peer, key) != 0) {
        return;
    }
    pthread_mutex_lock(&gate_mu);
    hv_err rc = gate_tab != NULL ? hv_conntab_note_node(gate_tab, key) : HV_OK;
    pthread_mutex_unlock(&gate_mu);
    if (rc == HV_ENOMEM) {
        HV_LOG(HV_LOG_WARN, "head", "HV-CONN-LIMIT",
               "out of memory: %s is not noted as a node's address", key);
    }
}

void hv_conngate_stop(void) {
    pthread_mutex_lock(&gate_mu);
    __atomic_store_n(&gate_on, 0, __ATOMIC_RELEASE);
    hv_conntab_destroy(gate_tab);
    gate_tab = NULL;
    gate_n_ports = 0;
    pthread_mutex_unlock(&gate_mu);
}

void hv_conngate_stats(hv_conngate_stats_t *out) {
    pthread_mutex_lock(&gate_mu);
    if (gate_tab != NULL) {
        uint64_t now = hv_now_ms();
        if (!gate_tab->pruned || now - gate_tab->last_prune_ms >= HV_CONNGATE_PRUNE_MS) {
            gate_tab->pruned = 1;
            gate_tab->last_prune_ms = now;
            hv_conntab_prune(gate_tab);
        }
    }
    out->open = gate_tab != NULL ? gate_tab->total : 0;
    out->refused_client = gate_refused[HV_CONNGATE_REFUSE_CLIENT];
    out->refused_total =
        gate_refused[HV_CONNGATE_REFUSE_TOTAL] + gate_refused[HV_CONNGATE_REFUSE_SHARE];
    pthread_mutex_unlock(&gate_mu);
}

/* Whether connections accepted on the listening socket lfd go through the gate. */
static int gate_watches(int lfd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(lfd, (struct sockaddr *)&ss, &len) != 0) {
        return 0;
    }
    int port;
    if (ss.ss_family == AF_INET) {
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    } else {
        return 0;
    }
    int found = 0;
    pthread_mutex_lock(&gate_mu);
    for (size_t i = 0; i < gate_n_ports && !found; i++) {
        found = gate_ports[i] == port;
    }
    pthread_mutex_unlock(&gate_mu);
    return found;
}

/* Decides on a connection just accepted; logs a refusal (rate-limited). Thread-safe. */
static hv_conngate_verdict gate_admit(int fd, const char *key) {
    uint64_t now = hv_now_ms();
    pthread_mutex_lock(&gate_mu);
    if (gate_tab == NULL) {
        pthread_mutex_unlock(&gate_mu);
        return HV_CONNGATE_ADMIT;
    }
    hv_conngate_verdict v = hv_conntab_admit(gate_tab, fd, key, &gate_lim, now);
    uint32_t client = hv_conntab_count(gate_tab, key), total = gate_tab->total;
    hv_conngate_limits_t lim = gate_lim;
    int log = 0;
    uint64_t unlogged = 0;
    if (v != HV_CONNGATE_ADMIT) {
        gate_refused[v]++;
        if (!gate_logged || now - gate_last_log_ms >= HV_CONNGATE_LOG_MS) {
            log = 1;
            unlogged = gate_unlogged;
            gate_unlogged = 0;
            gate_logged = 1;
            gate_last_log_ms = now;
        } else {
            gate_unlogged++;
        }
    }
    pthread_mutex_unlock(&gate_mu);
    if (log && v == HV_CONNGATE_REFUSE_CLIENT) {
        HV_LOG(HV_LOG_WARN, "head", "HV-CONN-LIMIT",
               "refused a connection from %s: it holds %u, limit %u per client "
               "(limits.max_connections_per_client); %llu more refused since the last report",
               key, client, lim.max_per_client, (unsigned long long)unlogged);
    } else if (log && v == HV_CONNGATE_REFUSE_SHARE) {
        HV_LOG(HV_LOG_WARN, "head", "HV-CONN-LIMIT",
               "refused a connection from %s: %u open, limit %u in all (limits.max_connections), "
               "of which the last %u are kept for nodes' addresses (agents re-connecting), and "
               "no node has called from %s; %llu more refused since the last report",
               key, total, lim.max_total, lim.node_share, key, (unsigned long long)unlogged);
    } else if (log) {
        HV_LOG(HV_LOG_WARN, "head", "HV-CONN-LIMIT",
               "refused a connection from %s: %u open, limit %u in all "
               "(limits.max_connections); %llu more refused since the last report",
               key, total, lim.max_total, (unsigned long long)unlogged);
    }
    return v;
}

/* The caller's address buffer, behind glibc's transparent union under _GNU_SOURCE. */
#if defined(__GNUC__) && defined(__USE_GNU)
#define GATE_SOCKADDR(a) ((a).__sockaddr__)
#else
#define GATE_SOCKADDR(a) (a)
#endif

/* Takes the place of libc's accept4 in the hvhead executable (see conngate.h). The system call
 * is made directly: the next definition in the search order may be ASan's interceptor or libc's,
 * and neither is needed. */
int accept4(int lfd, __SOCKADDR_ARG addr, socklen_t *restrict addrlen, int flags) {
    struct sockaddr *sa = GATE_SOCKADDR(addr);
    if (!__atomic_load_n(&gate_on, __ATOMIC_ACQUIRE) || !gate_watches(lfd)) {
        return (int)syscall(SYS_accept4, lfd, sa, addrlen, flags);
    }
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = (int)syscall(SYS_accept4, lfd, (struct sockaddr *)&ss, &len, flags);
        if (fd < 0) {
            return -1; /* errno from the kernel: EAGAIN once the queue is empty */
        }
        char key[HV_CONNGATE_KEY_LEN];
        if (hv_conngate_key(&ss, len, key) != 0 || gate_admit(fd, key) == HV_CONNGATE_ADMIT) {
            if (sa != NULL && addrlen != NULL) {
                memcpy(sa, &ss, *addrlen < len ? *addrlen : len);
                *addrlen = len;
            }
            return fd;
        }
        /* Refused: closed before gRPC sees it, and the next pending connection is taken, since
         * gRPC's listener waits for a new edge and would strand those queued behind this one. */
        close(fd);
    }
}
