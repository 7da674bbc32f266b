/* actor_wire: frames, handshake MACs and bounded socket helpers of libhv's actors. See
 * actor_wire.h. */
#include "actor_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sha256.h"
#include "util.h"

void hv__actor_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

uint32_t hv__actor_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void hv__actor_hdr_put(uint8_t p[HV__ACTOR_HDR], const hv__actor_hdr_t *h) {
    hv__actor_put_u32(p, h->len);
    p[4] = h->type;
    p[5] = 0;
    p[6] = (uint8_t)h->name_len;
    p[7] = (uint8_t)(h->name_len >> 8);
    hv__actor_put_u32(p + 8, (uint32_t)h->id);
    hv__actor_put_u32(p + 12, (uint32_t)(h->id >> 32));
}

void hv__actor_hdr_get(const uint8_t p[HV__ACTOR_HDR], hv__actor_hdr_t *h) {
    h->len = hv__actor_get_u32(p);
    h->type = p[4];
    h->name_len = (uint16_t)(p[6] | p[7] << 8);
    h->id = (uint64_t)hv__actor_get_u32(p + 8) | (uint64_t)hv__actor_get_u32(p + 12) << 32;
}

void hv__actor_mac(const char *secret, int actor_side, const uint8_t first[HV__ACTOR_NONCE],
                   const uint8_t second[HV__ACTOR_NONCE], uint8_t out[HV__ACTOR_MAC]) {
    static const char caller_label[] = "hv-actor-v1 caller";
    static const char actor_label[] = "hv-actor-v1 actor";
    hv_hmac_sha256_t ctx;
    hv_hmac_sha256_init(&ctx, secret, strlen(secret));
    if (actor_side) {
        hv_hmac_sha256_update(&ctx, actor_label, sizeof(actor_label) - 1);
    } else {
        hv_hmac_sha256_update(&ctx, caller_label, sizeof(caller_label) - 1);
    }
    hv_hmac_sha256_update(&ctx, first, HV__ACTOR_NONCE);
    hv_hmac_sha256_update(&ctx, second, HV__ACTOR_NONCE);
    hv_hmac_sha256_final(&ctx, out);
}

hv_err hv__actor_nonce(uint8_t out[HV__ACTOR_NONCE]) {
    size_t got = 0;
    while (got < HV__ACTOR_NONCE) {
        ssize_t n = getrandom(out + got, HV__ACTOR_NONCE - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return HV_EIO;
        }
        got += (size_t)n;
    }
    return HV_OK;
}

int hv__actor_ms_left(uint64_t deadline) {
    uint64_t now = hv_now_ms();
    if (now >= deadline) {
        return 0;
    }
    return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

/* Waits until fd is ready for events or the deadline passes. */
static hv_err wire_wait(int fd, short events, uint64_t deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int left = hv__actor_ms_left(deadline);
        int pr = poll(&p, 1, left);
        if (pr > 0) {
            return HV_OK;
        }
        if (pr < 0 && errno != EINTR) {
            return HV_EIO;
        }
        if (pr == 0 && hv__actor_ms_left(deadline) == 0) {
            return HV_ETIMEDOUT;
        }
    }
}

hv_err hv__actor_read_full(int fd, void *buf, size_t len, uint64_t deadline) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            return HV_ECLOSED;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return errno == ECONNRESET ? HV_EPEER : HV_EIO;
        }
        HV_TRY(wire_wait(fd, POLLIN, deadline));
    }
    return HV_OK;
}

hv_err hv__actor_write_full(int fd, const void *buf, size_t len, uint64_t deadline) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            return errno == ECONNRESET || errno == EPIPE ? HV_EPEER : HV_EIO;
        }
        HV_TRY(wire_wait(fd, POLLOUT, deadline));
    }
    return HV_OK;
}

hv_err hv__actor_dial(const char *addr, uint64_t deadline, int *fd_out, char *err, size_t errlen) {
    char host[256];
    int port = 0;
    if (addr == NULL || hv_parse_hostport(addr, host, sizeof(host), &port) != HV_OK || port == 0) {
        hv_errf(err, errlen, "'%s' is not a host:port address", addr ? addr : "(null)");
        return HV_EINVAL;
    }
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, service, &hints, &res);
    if (g != 0 || res == NULL) {
        hv_errf(err, errlen, "cannot resolve the actor's host '%s': %s", host, gai_strerror(g));
        return HV_EUNAVAIL;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        hv_errf(err, errlen, "socket: %s", strerror(errno));
        return hv_err_from_errno(errno);
    }
    int e = 0;
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        e = errno;
    }
    freeaddrinfo(res);
    if (e == EINPROGRESS) {
        hv_err rc = wire_wait(fd, POLLOUT, deadline);
        if (rc != HV_OK) {
            close(fd);
            hv_errf(err, errlen, "no connection to the actor at %s within the connect timeout",
                    addr);
            return rc;
        }
        socklen_t elen = sizeof(e);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0) {
            e = errno;
        }
    }
    if (e != 0) {
        close(fd);
        hv_errf(err, errlen, "cannot connect to the actor at %s: %s", addr, strerror(e));
        return e == ETIMEDOUT ? HV_ETIMEDOUT : HV_EUNAVAIL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Blocking from here on: the helpers above pass MSG_DONTWAIT where they must not block, and
     * the caller's receiving thread blocks in recv. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        close(fd);
        hv_errf(err, errlen, "fcntl: %s", strerror(errno));
        return HV_EIO;
    }
    *fd_out = fd;
    return HV_OK;
}

/* Reads one whole frame of at most cap body bytes into body (the handshake's small frames). */
static hv_err wire_read_small(int fd, hv__actor_hdr_t *h, uint8_t *body, size_t cap,
                              uint64_t deadline) {
    uint8_t hb[HV__ACTOR_HDR];
    HV_TRY(hv__actor_read_full(fd, hb, sizeof(hb), deadline));
    hv__actor_hdr_get(hb, h);
    if (h->len > cap) {
        return HV_EPROTO;
    }
    return hv__actor_read_full(fd, body, h->len, deadline);
}

/* The text of an ERROR frame's body, as a C string in msg, and its code. */
static hv_err wire_error_body(const uint8_t *body, uint32_t len, char *msg, size_t msglen) {
    if (len < 4) {
        hv_errf(msg, msglen, "(no message)");
        return HV_EPROTO;
    }
    uint32_t code = hv__actor_get_u32(body);
    size_t tl = len - 4 < msglen - 1 ? len - 4 : msglen - 1;
    memcpy(msg, body + 4, tl);
    msg[tl] = '\0';
    return code > 0 && code < HV__ERR_COUNT ? (hv_err)code : HV_EPROTO;
}

hv_err hv__actor_client_handshake(int fd, const char *secret, uint64_t deadline,
                                  uint32_t *max_frame_out, char *err, size_t errlen) {
    uint8_t body[HV__ACTOR_HDR + HV__ACTOR_ERRMSG_MAX];
    hv__actor_hdr_t h;
    hv_err rc = wire_read_small(fd, &h, body, sizeof(body), deadline);
    if (rc != HV_OK || h.type != HV__ACTOR_HELLO || h.len != HV__ACTOR_HELLO_LEN ||
        hv__actor_get_u32(body) != HV__ACTOR_MAGIC) {
        if (rc == HV_ETIMEDOUT) {
            hv_errf(err, errlen, "the actor did not greet within the connect timeout");
            return rc;
        }
        if (rc == HV_ECLOSED || rc == HV_EPEER) {
            /* Accepted, then closed before a greeting: the actor's process is ending (killed,
             * restarting or moving) and the head has not learnt it yet. Unavailable, not
             * foreign: a re-resolve asks the head again. */
            hv_errf(err, errlen, "the actor closed the connection before its greeting (%s)",
                    hv_strerror(rc));
            return HV_EUNAVAIL;
        }
        if (rc == HV_OK && h.type == HV__ACTOR_ERROR) {
            char msg[256];
            rc = wire_error_body(body, h.len, msg, sizeof(msg));
            hv_errf(err, errlen, "the actor refused the connection: %s", msg);
            return rc;
        }
        hv_errf(err, errlen, "the peer is not an hv actor (no valid greeting: %s)",
                rc == HV_OK ? "unexpected frame" : hv_strerror(rc));
        return HV_EPROTO;
    }
    if ((body[4] | body[5] << 8) != HV__ACTOR_VERSION) {
        hv_errf(err, errlen, "the actor speaks wire version %d, this library %d",
                body[4] | body[5] << 8, HV__ACTOR_VERSION);
        return HV_EPROTO;
    }
    uint32_t max_frame = hv__actor_get_u32(body + 8);
    uint8_t snonce[HV__ACTOR_NONCE];
    memcpy(snonce, body + 12, HV__ACTOR_NONCE);

    uint8_t msg[HV__ACTOR_HDR + HV__ACTOR_AUTH_LEN];
    hv__actor_hdr_t ah = {.len = HV__ACTOR_AUTH_LEN, .type = HV__ACTOR_AUTH};
    hv__actor_hdr_put(msg, &ah);
    uint8_t *cnonce = msg + HV__ACTOR_HDR;
    HV_TRY(hv__actor_nonce(cnonce));
    hv__actor_mac(secret, 0, snonce, cnonce, msg + HV__ACTOR_HDR + HV__ACTOR_NONCE);
    rc = hv__actor_write_full(fd, msg, sizeof(msg), deadline);
    if (rc != HV_OK) {
        hv_errf(err, errlen, "the actor closed the connection during the handshake");
        return rc == HV_ETIMEDOUT ? rc : HV_EUNAVAIL;
    }
    rc = wire_read_small(fd, &h, body, sizeof(body), deadline);
    if (rc == HV_OK && h.type == HV__ACTOR_ERROR) {
        char text[256];
        rc = wire_error_body(body, h.len, text, sizeof(text));
        hv_errf(err, errlen, "the actor refused the connection: %s", text);
        return rc;
    }
    if (rc != HV_OK || h.type != HV__ACTOR_WELCOME || h.len != HV__ACTOR_MAC) {
        hv_errf(err, errlen, "the actor broke off the handshake (%s)",
                rc == HV_OK ? "unexpected frame" : hv_strerror(rc));
        return rc == HV_ETIMEDOUT ? rc : HV_EPROTO;
    }
    uint8_t want[HV__ACTOR_MAC];
    hv__actor_mac(secret, 1, cnonce, snonce, want);
    if (!hv_ct_equal(want, body, HV__ACTOR_MAC)) {
        hv_errf(err, errlen, "the actor could not prove it knows the secret");
        return HV_EAUTH;
    }
    *max_frame_out = max_frame;
    return HV_OK;
}

hv__actor_fate hv__actor_fate_of(int can_resolve, int goaway, uint64_t goaway_id, uint64_t id,
                                 uint32_t sends, uint32_t max_retries) {
    if (sends == 0 || (goaway && id > goaway_id)) {
        /* Never on the wire, or the actor said it did not run it. */
        return can_resolve ? HV__FATE_RESEND : HV__FATE_NOT_DELIVERED;
    }
    return can_resolve && sends <= max_retries ? HV__FATE_RESEND : HV__FATE_IN_DOUBT;
}
