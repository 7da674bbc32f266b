/* auth: see auth.h. */
#include "auth.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sha256.h"

#define AUTH_CLIENT_RAND 24 /* random bytes in a generated client token (48 hex digits) */
#define AUTH_FILE_MAX 4096  /* bytes read from a key or token file */

/* ---- pure ----------------------------------------------------------------------------------- */

void hv_auth_init(hv_auth_t *a, const uint8_t key[HV_CREDS_KEY_BYTES]) {
    hv_creds_wipe(a, sizeof(*a));
    hv_creds_init(&a->creds, key);
}

static int client_token_valid(const char *t) {
    size_t n = strlen(t);
    if (strncmp(t, "hvc_", 4) != 0 || n < 4 + 16 || n > 4 + 200) {
        return 0;
    }
    for (size_t i = 4; i < n; i++) {
        char ch = t[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              ch == '-' || ch == '_')) {
            return 0;
        }
    }
    return 1;
}

hv_err hv_auth_add_client(hv_auth_t *a, const char *name, const char *token) {
    if (name == NULL || token == NULL || !client_token_valid(token)) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < a->n_clients; i++) {
        if (hv_creds_equal(a->clients[i].token, token)) {
            return HV_EEXIST;
        }
    }
    if (a->n_clients == HV_AUTH_MAX_CLIENTS) {
        return HV_ETOOBIG;
    }
    snprintf(a->clients[a->n_clients].name, sizeof(a->clients[0].name), "%s", name);
    snprintf(a->clients[a->n_clients].token, sizeof(a->clients[0].token), "%s", token);
    a->n_clients++;
    return HV_OK;
}

hv_err hv_auth_revoke_node(hv_auth_t *a, uint64_t node_id, uint64_t incarnation) {
    for (size_t i = 0; i < a->n_revoked; i++) {
        if (a->revoked[i].node_id == node_id && a->revoked[i].incarnation == incarnation) {
            return HV_OK;
        }
    }
    if (a->n_revoked == HV_AUTH_MAX_REVOKED) {
        return HV_ETOOBIG;
    }
    a->revoked[a->n_revoked].node_id = node_id;
    a->revoked[a->n_revoked].incarnation = incarnation;
    a->n_revoked++;
    return HV_OK;
}

hv_err hv_auth_identify(const hv_auth_t *a, const char *bearer, hv_cred_t *out) {
    memset(out, 0, sizeof(*out));
    if (bearer == NULL || bearer[0] == '\0') {
        return HV_EAUTH;
    }
    if (strncmp(bearer, "hvc_", 4) == 0) {
        /* Every token is compared (no early exit), so the time does not say which one matched. */
        size_t hit = a->n_clients;
        for (size_t i = 0; i < a->n_clients; i++) {
            if (hv_creds_equal(a->clients[i].token, bearer)) {
                hit = i;
            }
        }
        if (hit == a->n_clients) {
            return HV_EAUTH;
        }
        out->kind = HV_CRED_CLIENT;
        snprintf(out->client, sizeof(out->client), "%s", a->clients[hit].name);
        return HV_OK;
    }
    uint64_t x, y;
    if (hv_creds_node_id(&a->creds, bearer, &x, &y)) {
        for (size_t i = 0; i < a->n_revoked; i++) {
            if (a->revoked[i].node_id == x && a->revoked[i].incarnation == y) {
                return HV_EAUTH;
            }
        }
        out->kind = HV_CRED_NODE;
        out->node_id = x;
        out->incarnation = y;
        return HV_OK;
    }
    if (hv_creds_worker_id(&a->creds, bearer, &x, &y)) {
        out->kind = HV_CRED_WORKER;
        out->job_id = x;
        out->worker_id = y;
        return HV_OK;
    }
    return HV_EAUTH;
}

hv_err hv_auth_check(const hv_cred_t *cred, hv_auth_scope scope, uint64_t id) {
    if (cred == NULL || cred->kind == HV_CRED_NONE) {
        return HV_EAUTH;
    }
    switch (scope) {
    case HV_AUTH_CLIENT:
        return cred->kind == HV_CRED_CLIENT ? HV_OK : HV_EPERM;
    case HV_AUTH_NODE:
        return cred->kind == HV_CRED_NODE && (id == 0 || cred->node_id == id) ? HV_OK : HV_EPERM;
    case HV_AUTH_JOB:
        return cred->kind == HV_CRED_WORKER && cred->job_id == id ? HV_OK : HV_EPERM;
    case HV_AUTH_JOIN:
        return HV_OK;
    case HV_AUTH_ACTORS:
        return cred->kind == HV_CRED_CLIENT || cred->kind == HV_CRED_WORKER ? HV_OK : HV_EPERM;
    }
    return HV_EPERM;
}

int hv_auth_rule(const char *path, hv_auth_scope *scope) {
    static const struct {
        const char *prefix; /* a service ("/pkg.Service/") or one method */
        hv_auth_scope scope;
    } rules[] = {
        {"/hvpb.v1.Jobs/", HV_AUTH_CLIENT},
        {"/hvpb.v1.Cluster/Join", HV_AUTH_JOIN},
        {"/hvpb.v1.Cluster/Session", HV_AUTH_NODE},
        {"/hvpb.v1.Cluster/Fetch", HV_AUTH_NODE},
        {"/hvpb.v1.Cluster/UploadState", HV_AUTH_NODE},
        {"/hvpb.v1.Rendezvous/", HV_AUTH_JOB},
        {"/hvpb.v1.Actors/", HV_AUTH_ACTORS},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        size_t n = strlen(rules[i].prefix);
        int service = rules[i].prefix[n - 1] == '/';
        if (service ? strncmp(path, rules[i].prefix, n) == 0 && path[n] != '\0'
                    : strcmp(path, rules[i].prefix) == 0) {
            *scope = rules[i].scope;
            return 1;
        }
    }
    return 0;
}

int hv_auth_audited(const char *path) {
    static const char *const changes[] = {
        "/hvpb.v1.Jobs/Submit",          "/hvpb.v1.Jobs/Cancel",
        "/hvpb.v1.Jobs/DrainNode",       "/hvpb.v1.Jobs/DrainNodes",
        "/hvpb.v1.Jobs/RevokeNode",      "/hvpb.v1.Jobs/CreateJoinToken",
        "/hvpb.v1.Jobs/RevokeJoinToken", "/hvpb.v1.Cluster/Join",
        "/hvpb.v1.Actors/Create",        "/hvpb.v1.Actors/Kill",
    };
    for (size_t i = 0; path != NULL && i < sizeof(changes) / sizeof(changes[0]); i++) {
        if (strcmp(path, changes[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static const char *scope_needs(hv_auth_scope scope) {
    switch (scope) {
    case HV_AUTH_CLIENT:
        return "a client token (hvsubmit/hvctl --token-file, or HV_TOKEN_FILE)";
    case HV_AUTH_NODE:
        return "this node's credential (given by Join)";
    case HV_AUTH_JOB:
        return "the worker secret of this job (HV_WORKER_SECRET)";
    case HV_AUTH_JOIN:
        return "the join token or this node's credential";
    case HV_AUTH_ACTORS:
        return "a client token, or a job's worker secret (HV_WORKER_SECRET)";
    }
    return "a credential";
}

hv_err hv_auth_call(const hv_auth_t *a, const char *bearer, hv_auth_scope scope, uint64_t id,
                    hv_cred_t *cred_out, char *msg, size_t msglen) {
    hv_cred_t local;
    hv_cred_t *cred = cred_out != NULL ? cred_out : &local;
    hv_err rc = hv_auth_identify(a, bearer, cred);
    if (scope == HV_AUTH_JOIN) {
        rc = HV_OK; /* the join token travels in the request: svc_cluster checks both */
    } else if (rc == HV_OK) {
        rc = hv_auth_check(cred, scope, id);
    }
    if (rc == HV_EAUTH) {
        snprintf(msg, msglen, "not authenticated: %s; this call needs %s",
                 bearer == NULL || bearer[0] == '\0' ? "no credential was sent"
                                                     : "the credential is not valid on this head",
                 scope_needs(scope));
    } else if (rc == HV_EPERM) {
        snprintf(msg, msglen, "permission denied: this call needs %s", scope_needs(scope));
    } else if (msglen > 0) {
        msg[0] = '\0';
    }
    return rc;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* Reads a one-word file (surrounding whitespace trimmed) into out (cap bytes). */
static hv_err read_word(const char *path, char *out, size_t cap, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return HV_ENOTFOUND;
        }
        hv_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return HV_EIO;
    }
    char buf[AUTH_FILE_MAX + 1];
    ssize_t n = read(fd, buf, AUTH_FILE_MAX);
    int e = errno;
    close(fd);
    if (n < 0) {
        hv_errf(err, errlen, "%s: cannot read: %s", path, strerror(e));
        return HV_EIO;
    }
    buf[n] = '\0';
    char *s = buf;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') {
        s++;
    }
    size_t len = strlen(s);
    while (len > 0 &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' || s[len - 1] == '\r')) {
        len--;
    }
    s[len] = '\0';
    if (len == 0 || len >= cap || strpbrk(s, " \t\r\n") != NULL) {
        hv_errf(err, errlen, "%s: expected one word of at most %zu characters", path, cap - 1);
        hv_creds_wipe(buf, sizeof(buf));
        return HV_EINVAL;
    }
    memcpy(out, s, len + 1);
    hv_creds_wipe(buf, sizeof(buf));
    return HV_OK;
}

/* Creates path with text (mode 0600) unless it exists: written to a temporary file, then linked
 * into place, so two heads starting at once agree and no reader sees half a file. */
static hv_err create_secret(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        hv_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return HV_EIO;
    }
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok) {
        unlink(tmp);
        hv_errf(err, errlen, "%s: cannot write: %s", tmp, strerror(e));
        return HV_EIO;
    }
    if (link(tmp, path) != 0 && errno != EEXIST) {
        e = errno;
        unlink(tmp);
        hv_errf(err, errlen, "%s: cannot create: %s", path, strerror(e));
        return HV_EIO;
    }
    unlink(tmp);
    return HV_OK;
}

static hv_err random_hex(size_t nbytes, char *out) {
    uint8_t raw[64];
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return HV_EIO;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++) {
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    }
    hv_creds_wipe(raw, sizeof(raw));
    return HV_OK;
}

/* Reads path, creating it first with gen (prefix + random hex) when it does not exist. */
static hv_err read_or_create(const char *path, const char *prefix, size_t nrand, char *out,
                             size_t cap, char *err, size_t errlen) {
    hv_err rc = read_word(path, out, cap, err, errlen);
    if (rc != HV_ENOTFOUND) {
        return rc;
    }
    char text[200];
    size_t pl = strlen(prefix);
    memcpy(text, prefix, pl);
    if (random_hex(nrand, text + pl) != HV_OK) {
        hv_errf(err, errlen, "%s: no random bytes: %s", path, strerror(errno));
        return HV_EIO;
    }
    rc = create_secret(path, text, err, errlen);
    hv_creds_wipe(text, sizeof(text));
    if (rc != HV_OK) {
        return rc;
    }
    return read_word(path, out, cap, err, errlen);
}

/* Whether name was skipped by the previous load (so its warning is not repeated). */
static int was_skipped(const hv_auth_t *prev, const char *name) {
    for (size_t i = 0; prev != NULL && i < prev->n_skipped; i++) {
        if (strcmp(prev->skipped[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A token file that gives no token: it is left out of the set (so a token its file no longer
 * holds stops working at once), and said once, by file name, never by value. */
static void skip_file(hv_auth_t *a, const hv_auth_t *prev, const char *name, const char *why) {
    if (!was_skipped(prev, name)) {
        HV_LOG(HV_LOG_WARN, "auth", "HV-AUTH-TOKEN-FILE",
               "client token file %s/%s ignored: %s; no token of it is accepted until it is fixed",
               a->data_dir, name, why);
    }
    if (a->n_skipped < HV_AUTH_MAX_CLIENTS) {
        snprintf(a->skipped[a->n_skipped], sizeof(a->skipped[0]), "%s", name);
        a->n_skipped++;
    }
}

/* Loads client.token and clients/ into a (which has no clients yet). strict (the head's start):
 * a client.token that cannot be read or is no token is an error. Otherwise (a reload) it, like
 * every bad file in clients/, contributes no token: one bad file never keeps the set as it was.
 * prev: the set before (for warnings said once), or NULL. */
static hv_err load_clients(hv_auth_t *a, const hv_auth_t *prev, int strict, char *err,
                           size_t errlen) {
    char path[600], tok[HV_AUTH_TOKEN_MAX + 1], why[700];
    const char *bad_token = "not a client token (want hvc_ and 16 to 200 letters or digits)";
    a->n_skipped = 0;
    snprintf(path, sizeof(path), "%s/client.token", a->data_dir);
    hv_err rc = read_or_create(path, "hvc_", AUTH_CLIENT_RAND, tok, sizeof(tok), why, sizeof(why));
    if (rc == HV_OK && (rc = hv_auth_add_client(a, "default", tok)) != HV_OK) {
        snprintf(why, sizeof(why), "%s: %s", path, bad_token);
    }
    if (rc != HV_OK) {
        if (strict) {
            hv_errf(err, errlen, "%s", why);
            hv_creds_wipe(tok, sizeof(tok));
            return rc;
        }
        skip_file(a, prev, "client.token", why);
    }
    snprintf(path, sizeof(path), "%s/clients", a->data_dir);
    DIR *d = opendir(path);
    if (d == NULL) {
        hv_creds_wipe(tok, sizeof(tok));
        return HV_OK; /* no further tokens configured */
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n <= 6 || strcmp(de->d_name + n - 6, ".token") != 0 || de->d_name[0] == '.') {
            continue;
        }
        char file[900], name[64], shown[80];
        snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
        snprintf(name, sizeof(name), "%.*s", (int)(n - 6), de->d_name);
        snprintf(shown, sizeof(shown), "clients/%.60s", de->d_name);
        rc = read_word(file, tok, sizeof(tok), why, sizeof(why));
        if (rc == HV_ENOTFOUND) {
            continue; /* deleted while we read the directory */
        }
        if (rc == HV_OK) {
            rc = hv_auth_add_client(a, name, tok);
            if (rc != HV_OK && rc != HV_EEXIST) {
                snprintf(why, sizeof(why), "%s",
                         rc == HV_ETOOBIG ? "too many client tokens (at most 64)" : bad_token);
            }
        } else if (rc == HV_EINVAL) {
            snprintf(why, sizeof(why), "%s", "empty, or not one word of at most 256 characters");
        }
        if (rc != HV_OK && rc != HV_EEXIST) {
            skip_file(a, prev, shown, why);
        }
    }
    closedir(d);
    hv_creds_wipe(tok, sizeof(tok));
    return HV_OK;
}

hv_err hv_auth_reload_clients(hv_auth_t *a, char *err, size_t errlen) {
    hv_auth_t *next = malloc(sizeof(*next));
    if (next == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    memcpy(next, a, sizeof(*next));
    hv_creds_wipe(next->clients, sizeof(next->clients));
    next->n_clients = 0;
    hv_err rc = load_clients(next, a, 0, err, errlen);
    if (rc == HV_OK) {
        memcpy(a->clients, next->clients, sizeof(a->clients));
        a->n_clients = next->n_clients;
        memcpy(a->skipped, next->skipped, sizeof(a->skipped));
        a->n_skipped = next->n_skipped;
    }
    hv_creds_wipe(next, sizeof(*next));
    free(next);
    return rc;
}

hv_err hv_auth_load(hv_auth_t *a, const char *data_dir, char *client_path, size_t cap, char *err,
                    size_t errlen) {
    char path[600], hex[2 * HV_CREDS_KEY_BYTES + 1];
    uint8_t key[HV_CREDS_KEY_BYTES];
    snprintf(path, sizeof(path), "%s/auth.key", data_dir);
    hv_err rc = read_or_create(path, "", HV_CREDS_KEY_BYTES, hex, sizeof(hex), err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    if (strlen(hex) != 2 * HV_CREDS_KEY_BYTES || !hv_sha256_valid_hex(hex)) {
        hv_creds_wipe(hex, sizeof(hex));
        hv_errf(err, errlen,
                "%s: damaged (want 64 hex digits); delete it to make a new key, which "
                "makes every agent re-join with the join token",
                path);
        return HV_ECORRUPT;
    }
    for (size_t i = 0; i < HV_CREDS_KEY_BYTES; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        key[i] = (uint8_t)v;
    }
    hv_auth_init(a, key);
    hv_creds_wipe(key, sizeof(key));
    hv_creds_wipe(hex, sizeof(hex));
    snprintf(a->data_dir, sizeof(a->data_dir), "%s", data_dir);
    if ((rc = load_clients(a, NULL, 1, err, errlen)) != HV_OK) {
        return rc;
    }
    if (client_path != NULL) {
        snprintf(client_path, cap, "%s/client.token", data_dir);
    }
    return HV_OK;
}

hv_err hv_auth_jtoken_new(char *token, char *id, char *sha) {
    /* 19 random bytes: 38 hex digits, 6 for the id and 32 (128 bits) for the secret. */
    char hex[2 * 19 + 1];
    if (random_hex(19, hex) != HV_OK) {
        return HV_EIO;
    }
    /* The id: 6 hex digits (a subset of the letters and digits an id may have). */
    snprintf(token, HV_JTOKEN_MAX, "hvj_%.*s.%.*s", HV_JTOKEN_ID_LEN, hex, HV_JTOKEN_SECRET_LEN,
             hex + HV_JTOKEN_ID_LEN);
    hv_creds_wipe(hex, sizeof(hex));
    return hv_creds_jtoken_parse(token, id, sha) ? HV_OK : HV_EINTERNAL;
}
