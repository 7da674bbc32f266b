/*
 * conngate_test: the connection gate in three layers. The decision, table by table; the peer
 * key of each address family; the table of admitted connections with real sockets (closed and
 * reused descriptors are found by the prune); and the gate itself through accept4 on a real
 * loopback listener, with clients bound to 127.0.0.2 and 127.0.0.3 (all of 127/8 is loopback on
 * Linux): what a client over a bound sees is its connection closed, and queued connections
 * behind a refused one are still accepted. `conngate_test <case>` runs one case.
 */
#include "conngate.h"
#include "hv_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void case_decide(void) {
    static const struct {
        uint32_t client, total, max_total, max_per_client, node_share;
        int node;
        hv_conngate_verdict want;
    } rows[] = {
        {0, 0, 0, 0, 0, 0, HV_CONNGATE_ADMIT},           /* no bounds */
        {1000, 100000, 0, 0, 0, 0, HV_CONNGATE_ADMIT},   /* no bounds, many open */
        {0, 0, 12, 8, 0, 0, HV_CONNGATE_ADMIT},          /* first connection */
        {7, 11, 12, 8, 0, 0, HV_CONNGATE_ADMIT},         /* the last place of both */
        {8, 8, 12, 8, 0, 0, HV_CONNGATE_REFUSE_CLIENT},  /* the client's bound */
        {3, 12, 12, 8, 0, 0, HV_CONNGATE_REFUSE_TOTAL},  /* the bound in all */
        {8, 12, 12, 8, 0, 0, HV_CONNGATE_REFUSE_CLIENT}, /* both: the client holds too many */
        {9, 20, 12, 8, 0, 0, HV_CONNGATE_REFUSE_CLIENT}, /* over both (bounds lowered) */
        {5, 12, 0, 8, 0, 0, HV_CONNGATE_ADMIT},          /* no bound in all */
        {50, 12, 100, 0, 0, 0, HV_CONNGATE_ADMIT},       /* no bound per client */
        {0, 100, 100, 0, 0, 0, HV_CONNGATE_REFUSE_TOTAL},
        {0, 0, 1, 1, 0, 0, HV_CONNGATE_ADMIT},
        {1, 1, 1, 1, 0, 0, HV_CONNGATE_REFUSE_CLIENT},
        {0, 1, 1, 1, 0, 0, HV_CONNGATE_REFUSE_TOTAL},
        /* The nodes' share (issue 24: two addresses at their bounds locked agents out). */
        {0, 8, 12, 8, 3, 0, HV_CONNGATE_ADMIT},         /* the last place for any address */
        {0, 9, 12, 8, 3, 0, HV_CONNGATE_REFUSE_SHARE},  /* what is left is the nodes' */
        {1, 9, 12, 8, 3, 1, HV_CONNGATE_ADMIT},         /* a node's address takes it */
        {0, 11, 12, 8, 3, 1, HV_CONNGATE_ADMIT},        /* up to the bound in all */
        {0, 12, 12, 8, 3, 1, HV_CONNGATE_REFUSE_TOTAL}, /* and no further */
        {8, 9, 12, 8, 3, 1, HV_CONNGATE_REFUSE_CLIENT}, /* a node's address has its bound too */
        {8, 9, 12, 8, 3, 0, HV_CONNGATE_REFUSE_CLIENT}, /* its own bound is named first */
        {0, 100, 0, 8, 3, 0, HV_CONNGATE_ADMIT},        /* no bound in all: no share */
        {0, 479, 480, 240, 0, 0, HV_CONNGATE_ADMIT},    /* no share */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_conngate_limits_t lim = {.max_total = rows[i].max_total,
                                    .max_per_client = rows[i].max_per_client,
                                    .node_share = rows[i].node_share};
        hv_conngate_verdict got =
            hv_conngate_decide(rows[i].client, rows[i].total, rows[i].node, &lim);
        if (got != rows[i].want) {
            fprintf(stderr, "row %zu: client %u total %u node %d limits %u/%u/%u\n", i,
                    rows[i].client, rows[i].total, rows[i].node, rows[i].max_total,
                    rows[i].max_per_client, rows[i].node_share);
        }
        CHECK_EQ(got, rows[i].want);
    }
}

static void case_derive(void) {
    static const struct {
        uint64_t nofile;
        uint32_t max_total, max_per_client; /* as configured (0 = derive) */
        uint32_t want_total, want_per_client, want_share;
    } rows[] = {
        {1024, 0, 0, 480, 240, 120},         /* the usual soft limit */
        {128, 0, 0, 32, 16, 8},              /* fd_exhaustion.sh's head */
        {20000, 0, 0, 9968, 4984, 2492},     /* this machine's hard limit */
        {1048576, 0, 0, 32768, 16384, 8192}, /* capped */
        {60, 0, 0, 2, 1, 0},                 /* below the reserve: the least */
        {66, 0, 0, 2, 1, 0},
        {1024, 12, 0, 12, 6, 3},   /* per client and the share follow a set bound in all */
        {1024, 0, 8, 480, 8, 120}, /* a set per-client bound stays */
        {1024, 12, 8, 12, 8, 3},
        {1024, 1, 0, 1, 1, 0},
        {1024, 3, 2, 3, 2, 0}, /* conn_limit_tls.sh's head: no share below 4 */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_conngate_limits_t lim = {.max_total = rows[i].max_total,
                                    .max_per_client = rows[i].max_per_client};
        hv_conngate_derive(rows[i].nofile, 64, &lim);
        if (lim.max_total != rows[i].want_total || lim.max_per_client != rows[i].want_per_client ||
            lim.node_share != rows[i].want_share) {
            fprintf(stderr, "row %zu: nofile %llu: got %u/%u/%u\n", i,
                    (unsigned long long)rows[i].nofile, lim.max_total, lim.max_per_client,
                    lim.node_share);
        }
        CHECK_EQ(lim.max_total, rows[i].want_total);
        CHECK_EQ(lim.max_per_client, rows[i].want_per_client);
        CHECK_EQ(lim.node_share, rows[i].want_share);
    }
}

static void case_key(void) {
    char key[HV_CONNGATE_KEY_LEN];
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(5)};
    inet_pton(AF_INET, "10.1.2.3", &in.sin_addr);
    CHECK_EQ(hv_conngate_key(&in, sizeof(in), key), 0);
    CHECK_STR(key, "10.1.2.3");
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(5)};
    inet_pton(AF_INET6, "fd00::1", &in6.sin6_addr);
    CHECK_EQ(hv_conngate_key(&in6, sizeof(in6), key), 0);
    CHECK_STR(key, "fd00::1");
    /* A dual-stack listener's IPv4 client is the same client as over IPv4. */
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr);
    CHECK_EQ(hv_conngate_key(&in6, sizeof(in6), key), 0);
    CHECK_STR(key, "10.1.2.3");
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    CHECK_EQ(hv_conngate_key(&un, sizeof(un), key), -1);
    CHECK_STR(key, "");
    CHECK_EQ(hv_conngate_key(&in, 4, key), -1); /* truncated */
    /* A call's peer as gRPC writes it: the same key as the connection's. */
    static const struct {
        const char *peer, *want;
    } peers[] = {
        {"ipv4:127.0.0.1:4242", "127.0.0.1"},
        {"ipv4:10.1.2.3:1", "10.1.2.3"},
        {"ipv6:[::1]:4242", "::1"},
        {"ipv6:%5B::1%5D:4242", "::1"},
        {"ipv6:[::ffff:10.1.2.3]:7", "10.1.2.3"}, /* dual stack: the IPv4 client */
        {"ipv6:[FD00:0::1]:7", "fd00::1"},        /* written as accept's key is */
        {"ipv6:[fe80::1%eth0]:7", "fe80::1"},
        {"unix:/tmp/s", ""},
        {"ipv4:", ""},
        {"ipv4:999.1.1.1:5", ""},
        {"ipv6:[::1", ""},
        {"ipv6:[]:5", ""},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
        int rc = hv_conngate_peer_key(peers[i].peer, key);
        if (strcmp(key, peers[i].want) != 0) {
            fprintf(stderr, "peer %s: got '%s'\n", peers[i].peer, key);
        }
        CHECK_STR(key, peers[i].want);
        CHECK_EQ(rc, peers[i].want[0] != '\0' ? 0 : -1);
    }
    CHECK_EQ(hv_conngate_peer_key(NULL, key), -1);
}

/* A listener on 127.0.0.1, an ephemeral port; nonblocking like gRPC's. */
static int listener(int *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("listener");
        return -1;
    }
    *port_out = ntohs(a.sin_port);
    return fd;
}

/* A client connected to port from the source address src ("127.0.0.2"). */
static int client(const char *src, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in s = {.sin_family = AF_INET};
    struct sockaddr_in d = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    inet_pton(AF_INET, src, &s.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&s, sizeof(s)) != 0 ||
        connect(fd, (struct sockaddr *)&d, sizeof(d)) != 0) {
        perror("client");
        return -1;
    }
    return fd;
}

/* Accepts one pending connection through the real system call's wrapper (not gated here). */
static int take(int lfd) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    poll(&p, 1, 2000);
    return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* True when the server closed the client's connection: recv sees EOF (or a reset) within ms. */
static int closed_by_server(int cfd, int ms) {
    struct pollfd p = {.fd = cfd, .events = POLLIN};
    if (poll(&p, 1, ms) != 1) {
        return 0;
    }
    char b;
    ssize_t n = recv(cfd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void case_table(void) {
    int port, lfd = listener(&port);
    CHECK(lfd >= 0);
    hv_conntab_t *t = NULL;
    CHECK_RC(hv_conntab_create(&t), HV_OK);
    hv_conngate_limits_t lim = {.max_total = 3, .max_per_client = 2};
    int c[4], s[4];
    const char *keys[4] = {"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.2"};
    for (int i = 0; i < 4; i++) {
        c[i] = client(keys[i], port);
        s[i] = take(lfd);
        CHECK(s[i] >= 0);
    }
    uint64_t now = 1000;
    CHECK_EQ(hv_conntab_admit(t, s[0], keys[0], &lim, now), HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_admit(t, s[1], keys[1], &lim, now), HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_admit(t, s[3], keys[3], &lim, now), HV_CONNGATE_REFUSE_CLIENT);
    CHECK_EQ(hv_conntab_admit(t, s[2], keys[2], &lim, now), HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_total(t), 3);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.2"), 2);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.3"), 1);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.9"), 0);
    CHECK_EQ(hv_conntab_prune(t), 0); /* all three still open */

    /* s[0] closed by "gRPC": within the prune interval the count still holds it... */
    close(s[0]);
    CHECK_EQ(hv_conntab_admit(t, s[3], keys[3], &lim, now + 1), HV_CONNGATE_REFUSE_CLIENT);
    /* ...and once the interval has passed, the prune finds it and s[3] gets its place. */
    CHECK_EQ(hv_conntab_admit(t, s[3], keys[3], &lim, now + 1 + HV_CONNGATE_PRUNE_MS),
             HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.2"), 2);
    CHECK_EQ(hv_conntab_total(t), 3);

    /* A descriptor closed and its number given to another file: not the socket recorded. */
    int num = s[2];
    close(s[2]);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul != num) {
        dup2(nul, num);
        close(nul);
    }
    CHECK_EQ(hv_conntab_prune(t), 1);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.3"), 0);
    CHECK_EQ(hv_conntab_total(t), 2);
    close(num);

    /* A number given out again for a new connection replaces the stale entry at once. */
    close(s[1]);
    int c5 = client("127.0.0.3", port);
    int s5 = take(lfd);
    if (s5 != s[1]) { /* the kernel gives the lowest free number: move it there if needed */
        dup2(s5, s[1]);
        close(s5);
        s5 = s[1];
    }
    CHECK_EQ(hv_conntab_admit(t, s5, "127.0.0.3", &lim, now + 2 + HV_CONNGATE_PRUNE_MS),
             HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.2"), 1);
    CHECK_EQ(hv_conntab_count(t, "127.0.0.3"), 1);
    CHECK_EQ(hv_conntab_total(t), 2);

    /* The nodes' share: with 1 of 4 kept, 127.0.0.4 (no node's) is refused the last place, and
     * takes it once it is noted as a node's address. */
    hv_conngate_limits_t shared = {.max_total = 4, .max_per_client = 4, .node_share = 1};
    int c6 = client("127.0.0.4", port), s6 = take(lfd);
    int c8 = client("127.0.0.4", port), s8 = take(lfd);
    CHECK(s6 >= 0 && s8 >= 0);
    CHECK_EQ(hv_conntab_admit(t, s6, "127.0.0.4", &shared, now + 3 + HV_CONNGATE_PRUNE_MS),
             HV_CONNGATE_ADMIT); /* 3 open */
    CHECK_EQ(hv_conntab_is_node(t, "127.0.0.4"), 0);
    CHECK_EQ(hv_conntab_admit(t, s8, "127.0.0.4", &shared, now + 3 + HV_CONNGATE_PRUNE_MS),
             HV_CONNGATE_REFUSE_SHARE);
    CHECK_RC(hv_conntab_note_node(t, "127.0.0.4"), HV_OK);
    CHECK_RC(hv_conntab_note_node(t, "127.0.0.4"), HV_OK); /* once is enough */
    CHECK_EQ(hv_conntab_is_node(t, "127.0.0.4"), 1);
    CHECK_EQ(hv_conntab_is_node(t, "127.0.0.3"), 0);
    CHECK_EQ(hv_conntab_admit(t, s8, "127.0.0.4", &shared, now + 3 + HV_CONNGATE_PRUNE_MS),
             HV_CONNGATE_ADMIT);
    CHECK_EQ(hv_conntab_total(t), 4);
    close(s6);
    close(s8);
    close(c6);
    close(c8);

    hv_conntab_destroy(t);
    hv_conntab_destroy(NULL);
    close(s5);
    close(s[3]);
    for (int i = 0; i < 4; i++) {
        close(c[i]);
    }
    close(c5);
    close(lfd);
}

/* Accepts through the gate until the queue is empty; returns how many came through. */
static int drain(int lfd, int *out, int max) {
    int n = 0;
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    poll(&p, 1, 2000);
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            return n;
        }
        CHECK_EQ(ss.ss_family, AF_INET);
        CHECK(len == sizeof(struct sockaddr_in));
        if (n < max) {
            out[n] = fd;
        }
        n++;
    }
}

static void case_gate(void) {
    int port, lfd = listener(&port);
    int other_port, other = listener(&other_port);
    hv_conngate_limits_t lim = {.max_total = 3, .max_per_client = 2};
    CHECK_RC(hv_conngate_start(&lim), HV_OK);
    CHECK_RC(hv_conngate_watch_port(port), HV_OK);
    CHECK_RC(hv_conngate_watch_port(0), HV_EINVAL);

    /* Four from 127.0.0.2 queued at once: two come through, two are closed, and one accept
     * loop empties the queue (nothing is stranded behind a refusal). */
    int c[6], s[6];
    for (int i = 0; i < 4; i++) {
        c[i] = client("127.0.0.2", port);
    }
    CHECK_EQ(drain(lfd, s, 6), 2);
    CHECK(!closed_by_server(c[0], 100));
    CHECK(!closed_by_server(c[1], 100));
    CHECK(closed_by_server(c[2], 2000));
    CHECK(closed_by_server(c[3], 2000));
    /* 127.0.0.3 gets the last place in all, then is refused. */
    c[4] = client("127.0.0.3", port);
    c[5] = client("127.0.0.3", port);
    CHECK_EQ(drain(lfd, s + 2, 4), 1);
    CHECK(!closed_by_server(c[4], 100));
    CHECK(closed_by_server(c[5], 2000));
    hv_conngate_stats_t st;
    hv_conngate_stats(&st);
    CHECK_EQ(st.open, 3);
    CHECK_EQ(st.refused_client, 2);
    CHECK_EQ(st.refused_total, 1);

    /* A listener on another port (libuv's metrics page) is not gated. */
    int o[5], os[5];
    for (int i = 0; i < 5; i++) {
        o[i] = client("127.0.0.2", other_port);
    }
    CHECK_EQ(drain(other, os, 5), 5);

    /* A connection closed by the server frees its place (after the prune interval). */
    close(s[0]);
    usleep((HV_CONNGATE_PRUNE_MS + 20) * 1000);
    int c6 = client("127.0.0.4", port);
    int s6;
    CHECK_EQ(drain(lfd, &s6, 1), 1);
    CHECK(!closed_by_server(c6, 100));
    hv_conngate_stats(&st);
    CHECK_EQ(st.open, 3);

    hv_conngate_stop();
    /* Stopped: everything passes. */
    int c7 = client("127.0.0.2", port), s7;
    CHECK_EQ(drain(lfd, &s7, 1), 1);
    for (int i = 0; i < 5; i++) {
        close(o[i]);
        close(os[i]);
    }
    for (int i = 1; i < 3; i++) {
        close(s[i]);
    }
    for (int i = 0; i < 6; i++) {
        close(c[i]);
    }
    close(s6);
    close(c6);
    close(s7);
    close(c7);
    close(other);
    close(lfd);
}

HV_CHECK_MAIN(NULL, NULL, {"decide", case_decide}, {"derive", case_derive}, {"key", case_key},
              {"table", case_table}, {"gate", case_gate})
