/* validate: see validate.h. */
#include "validate.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "sha256.h"
#include "utf8.h"
#include "util.h"

/* A node name: 1..HV_NODE_NAME_MAX bytes, no control character or blank (it is shown in logs,
 * tables and events, one word). */
static int node_name_ok(const char *s) {
    size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > HV_NODE_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == 0x7f) {
            return 0;
        }
    }
    return 1;
}

static hv_err bad(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static hv_err bad(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return HV_EINVAL;
}

/* At most 80 bytes of a client's string, for a message (the rest is "..."). */
static const char *clip(const char *s, char *buf, size_t len) {
    if (s == NULL) {
        return "";
    }
    snprintf(buf, len, "%.80s%s", s, strlen(s) > 80 ? "..." : "");
    return buf;
}

/* A string of at most max bytes (NULL counts as empty); else a message naming field, the size
 * and the bound. */
static hv_err size_check(const char *field, const char *s, size_t max, char *err, size_t len) {
    size_t n = s != NULL ? strlen(s) : 0;
    if (n > max) {
        return bad(err, len, "%s: %zu bytes, at most %zu", field, n, max);
    }
    return HV_OK;
}

static hv_err digest_check(const char *field, const char *d, char *err, size_t len) {
    char c[100];
    if (d == NULL || !hv_sha256_valid_hex(d)) {
        return bad(err, len, "%s: '%s' is not 64 lowercase hex characters", field,
                   clip(d, c, sizeof(c)));
    }
    return HV_OK;
}

int hv_validate_file_name(const char *s) {
    return s != NULL && s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0 && strlen(s) <= 255;
}

int hv_validate_file_path(const char *s) {
    if (s == NULL || strlen(s) > HV_FILE_PATH_MAX) {
        return 0;
    }
    unsigned depth = 0;
    for (const char *p = s;; p++) {
        size_t n = strcspn(p, "/");
        char part[256];
        if (n == 0 || n >= sizeof(part) || ++depth > HV_FILE_PATH_DEPTH_MAX) {
            return 0; /* empty (leading, doubled or trailing '/'), too long, too deep */
        }
        memcpy(part, p, n);
        part[n] = '\0';
        if (!hv_validate_file_name(part)) {
            return 0;
        }
        p += n;
        if (*p == '\0') {
            return 1;
        }
    }
}

/* 1 when path a names a directory above path b ("sub" and "sub/m.py"): b could not be placed. */
static int path_above(const char *a, const char *b) {
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

hv_err hv_validate_join(const Hvpb__V1__JoinRequest *r, char *err, size_t len) {
    const Hvpb__V1__NodeInfo *info = r->node;
    char c[100];
    if (info == NULL) {
        return bad(err, len, "node: missing (the joining node's name and slots)");
    }
    if (!node_name_ok(info->name)) {
        return bad(err, len,
                   "node.name: '%s' must be 1 to %d characters without blanks or control "
                   "characters",
                   clip(info->name, c, sizeof(c)), HV_NODE_NAME_MAX);
    }
    if (info->slots == 0 || info->slots > HV_NODE_SLOTS_MAX) {
        return bad(err, len, "node.slots: node %s: slots must be 1..%d, got %u", info->name,
                   HV_NODE_SLOTS_MAX, info->slots);
    }
    if (info->n_addrs > HV_NODE_ADDRS_MAX) {
        return bad(err, len, "node.addrs: %zu entries, at most %d", info->n_addrs,
                   HV_NODE_ADDRS_MAX);
    }
    for (size_t i = 0; i < info->n_addrs; i++) {
        char field[40];
        snprintf(field, sizeof(field), "node.addrs[%zu]", i);
        HV_TRY(size_check(field, info->addrs[i], HV_NODE_ADDR_MAX, err, len));
    }
    if (info->n_labels > HV_NODE_LABELS_MAX) {
        return bad(err, len, "node.labels: %zu entries, at most %d", info->n_labels,
                   HV_NODE_LABELS_MAX);
    }
    for (size_t i = 0; i < info->n_labels; i++) {
        const Hvpb__V1__KeyValue *kv = info->labels[i];
        char field[48];
        if (kv->key == NULL || kv->key[0] == '\0') {
            return bad(err, len, "node.labels[%zu].key: empty", i);
        }
        snprintf(field, sizeof(field), "node.labels[%zu].key", i);
        HV_TRY(size_check(field, kv->key, HV_LABEL_KEY_MAX, err, len));
        /* The head keeps a node's labels as "k=v,k=v". */
        if (strpbrk(kv->key, ",=") != NULL ||
            (kv->value != NULL && strchr(kv->value, ',') != NULL)) {
            char c[100];
            return bad(err, len,
                       "node.labels[%zu]: '%s': a key may not hold ',' or '=', a value ','", i,
                       clip(kv->key, c, sizeof(c)));
        }
        snprintf(field, sizeof(field), "node.labels[%zu].value", i);
        HV_TRY(size_check(field, kv->value, HV_LABEL_VALUE_MAX, err, len));
    }
    HV_TRY(size_check("node.instance_id", info->instance_id, HV_NODE_FIELD_MAX, err, len));
    HV_TRY(size_check("node.copy_addr", info->copy_addr, HV_NODE_FIELD_MAX, err, len));
    HV_TRY(size_check("node.version", info->version, HV_NODE_FIELD_MAX, err, len));
    return HV_OK;
}

hv_err hv_validate_fetch(const Hvpb__V1__FetchRequest *r, char *err, size_t len) {
    return digest_check("digest", r->digest, err, len);
}

size_t hv_validate_spec_digests(void *ud, const uint8_t *spec, size_t len, char (*out)[65],
                                size_t cap) {
    (void)ud;
    Hvpb__V1__JobSpec *s = hvpb__v1__job_spec__unpack(NULL, len, spec);
    size_t n = 0;
    if (s == NULL) {
        return 0;
    }
    if (s->binary != NULL && s->binary->digest != NULL && s->binary->digest[0] != '\0' && n < cap) {
        snprintf(out[n++], 65, "%s", s->binary->digest);
    }
    for (size_t i = 0; i < s->n_files && n < cap; i++) {
        if (s->files[i]->digest != NULL && s->files[i]->digest[0] != '\0') {
            snprintf(out[n++], 65, "%s", s->files[i]->digest);
        }
    }
    hvpb__v1__job_spec__free_unpacked(s, NULL);
    return n;
}

hv_err hv_validate_stat_artifact(const Hvpb__V1__StatArtifactRequest *r, char *err, size_t len) {
    return digest_check("digest", r->digest, err, len);
}

hv_err hv_validate_upload(const Hvpb__V1__UploadChunk *r, char *err, size_t len) {
    HV_TRY(digest_check("digest", r->digest, err, len));
    if (r->data.len > HV_UPLOAD_CHUNK_MAX) {
        return bad(err, len, "data: a chunk of %zu bytes, at most %u", r->data.len,
                   HV_UPLOAD_CHUNK_MAX);
    }
    if (r->data.len > r->total_size || r->offset > r->total_size - r->data.len) {
        return bad(err, len, "offset: a chunk of %zu bytes at %llu runs past total_size %llu",
                   r->data.len, (unsigned long long)r->offset, (unsigned long long)r->total_size);
    }
    return HV_OK;
}

/* A node program (JobSpec.command): a name looked up on the node's PATH or an absolute path, of
 * at most HV_COMMAND_MAX bytes, without control characters, with no binary beside it. */
static hv_err command_check(const Hvpb__V1__JobSpec *spec, char *err, size_t len) {
    char c[100];
    const char *cmd = spec->command;
    size_t n = strlen(cmd);
    if (spec->binary != NULL) {
        return bad(err, len, "spec.command: a job runs either a shipped binary or a command");
    }
    if (n > HV_COMMAND_MAX) {
        return bad(err, len, "spec.command: %zu bytes, at most %d", n, HV_COMMAND_MAX);
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)cmd[i] < ' ' || cmd[i] == 0x7f) {
            return bad(err, len, "spec.command: '%s' has a control character",
                       clip(cmd, c, sizeof(c)));
        }
    }
    if (strchr(cmd, '/') != NULL && cmd[0] != '/') {
        return bad(err, len,
                   "spec.command: '%s' must be a name looked up on the node's PATH or an "
                   "absolute path",
                   clip(cmd, c, sizeof(c)));
    }
    return HV_OK;
}

hv_err hv_validate_submit(const Hvpb__V1__SubmitRequest *r, char *err, size_t len) {
    const Hvpb__V1__JobSpec *spec = r->spec;
    char c[100];
    int has_command = spec != NULL && spec->command != NULL && spec->command[0] != '\0';
    if (spec == NULL || (spec->binary == NULL && !has_command)) {
        return bad(err, len, "spec.binary: the job has no binary and no command");
    }
    if (has_command) {
        HV_TRY(command_check(spec, err, len));
    } else {
        if (!hv_validate_file_name(spec->binary->name)) {
            return bad(err, len, "spec.binary.name: '%s' must be a plain file name",
                       clip(spec->binary->name, c, sizeof(c)));
        }
        HV_TRY(digest_check("spec.binary.digest", spec->binary->digest, err, len));
    }
    HV_TRY(size_check("spec.name", spec->name, HV_JOB_NAME_MAX, err, len));
    HV_TRY(size_check("spec.user", spec->user, HV_JOB_NAME_MAX, err, len));
    if (spec->namespace_ != NULL && spec->namespace_[0] != '\0') {
        size_t n = strlen(spec->namespace_);
        if (n > 63 || spec->namespace_[0] == '.' || spec->namespace_[0] == '-' ||
            strspn(spec->namespace_,
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n) {
            return bad(err, len,
                       "spec.namespace: '%s' is not a namespace name (1 to 63 letters, digits, "
                       "'.', '_' or '-', not first '.' or '-')",
                       clip(spec->namespace_, c, sizeof(c)));
        }
    }
    if (spec->priority < -1000 || spec->priority > 1000) {
        return bad(err, len, "spec.priority: %d, expected -1000 to 1000", (int)spec->priority);
    }
    if (spec->n_args > HV_SUBMIT_MAX_ARGS) {
        return bad(err, len, "spec.args: %zu arguments, at most %d", spec->n_args,
                   HV_SUBMIT_MAX_ARGS);
    }
    size_t total = 0;
    for (size_t i = 0; i < spec->n_args; i++) {
        total += spec->args[i] != NULL ? strlen(spec->args[i]) : 0;
    }
    if (total > HV_SUBMIT_ARGS_BYTES) {
        return bad(err, len, "spec.args: %zu bytes in all, at most %u", total,
                   HV_SUBMIT_ARGS_BYTES);
    }
    if (spec->n_env > HV_SUBMIT_MAX_ENV) {
        return bad(err, len, "spec.env: %zu entries, at most %d", spec->n_env, HV_SUBMIT_MAX_ENV);
    }
    if (spec->n_files > HV_SUBMIT_MAX_FILES) {
        return bad(err, len, "spec.files: %zu files, at most %d", spec->n_files,
                   HV_SUBMIT_MAX_FILES);
    }
    for (size_t i = 0; i < spec->n_files; i++) {
        const Hvpb__V1__FileRef *f = spec->files[i];
        if (!hv_validate_file_path(f->name) ||
            (spec->binary != NULL && (strcmp(f->name, spec->binary->name) == 0 ||
                                      path_above(spec->binary->name, f->name)))) {
            return bad(err, len,
                       "spec.files: file name '%s' must be a plain file name or a relative path "
                       "of them (at most %d deep, %d bytes), distinct from the binary's",
                       clip(f->name, c, sizeof(c)), HV_FILE_PATH_DEPTH_MAX, HV_FILE_PATH_MAX);
        }
        for (size_t k = 0; k < i; k++) {
            const char *o = spec->files[k]->name;
            if (strcmp(o, f->name) == 0) {
                return bad(err, len, "spec.files: file name '%s' is given twice",
                           clip(f->name, c, sizeof(c)));
            }
            if (path_above(o, f->name) || path_above(f->name, o)) {
                return bad(err, len, "spec.files: '%s' is both a file and a directory",
                           clip(path_above(o, f->name) ? o : f->name, c, sizeof(c)));
            }
        }
        HV_TRY(digest_check("spec.files.digest", f->digest, err, len));
    }
    total = 0;
    for (size_t i = 0; i < spec->n_env; i++) {
        const char *k = spec->env[i]->key;
        const char *v = spec->env[i]->value;
        if (k == NULL || k[0] == '\0' || strchr(k, '=') != NULL) {
            return bad(err, len, "spec.env: variable %zu has an empty name or one with '=' ('%s')",
                       i, clip(k, c, sizeof(c)));
        }
        size_t kl = strlen(k), vl = v != NULL ? strlen(v) : 0;
        if (kl > HV_ENV_KEY_MAX) {
            return bad(err, len, "spec.env[%zu].key: %zu bytes, at most %d", i, kl, HV_ENV_KEY_MAX);
        }
        if (vl > HV_ENV_VALUE_MAX) {
            return bad(err, len, "spec.env[%zu].value: %s: %zu bytes, at most %d", i,
                       clip(k, c, sizeof(c)), vl, HV_ENV_VALUE_MAX);
        }
        total += kl + vl;
    }
    if (total > HV_SUBMIT_ENV_BYTES) {
        return bad(err, len, "spec.env: %zu bytes in all, at most %u", total, HV_SUBMIT_ENV_BYTES);
    }
    if (spec->cooldown_set && spec->cooldown_max_s < spec->cooldown_min_s) {
        return bad(err, len, "spec.cooldown: %u:%u: the maximum is below the minimum",
                   spec->cooldown_min_s, spec->cooldown_max_s);
    }
    return HV_OK;
}

/* A page token is "" or what a reply's next_page_token held: the decimal id of the last item
 * listed. */
static hv_err page_token_check(const char *t, char *err, size_t len) {
    char c[100];
    size_t n = t != NULL ? strlen(t) : 0;
    if (n > 0 && (n > 19 || strspn(t, "0123456789") != n)) {
        return bad(err, len, "page_token: '%s' is not a next_page_token of this list",
                   clip(t, c, sizeof(c)));
    }
    return HV_OK;
}

hv_err hv_validate_list_jobs(const Hvpb__V1__ListJobsRequest *r, char *err, size_t len) {
    if (r->limit > HV_LIST_MAX) {
        return bad(err, len, "limit: at most %d, got %u", HV_LIST_MAX, r->limit);
    }
    return page_token_check(r->page_token, err, len);
}

hv_err hv_validate_list_nodes(const Hvpb__V1__ListNodesRequest *r, char *err, size_t len) {
    if (r->page_size > HV_LIST_MAX) {
        return bad(err, len, "page_size: at most %d, got %u", HV_LIST_MAX, r->page_size);
    }
    return page_token_check(r->page_token, err, len);
}

hv_err hv_validate_list_events(const Hvpb__V1__ListEventsRequest *r, char *err, size_t len) {
    if (r->limit > HV_LIST_MAX) {
        return bad(err, len, "limit: at most %d, got %u", HV_LIST_MAX, r->limit);
    }
    if (r->actor_id != 0 && r->job_id != 0) {
        return bad(err, len,
                   "job_id and actor_id: give one of them, not both (an actor's "
                   "events belong to no job)");
    }
    return HV_OK;
}

hv_err hv_validate_node_drain(const Hvpb__V1__NodeDrainRequest *r, char *err, size_t len) {
    char c[100];
    if (r->node == NULL || r->node[0] == '\0' || strlen(r->node) > HV_NODE_NAME_MAX) {
        return bad(err, len, "node: '%s' must be a node name or id (1 to %d characters)",
                   clip(r->node, c, sizeof(c)), HV_NODE_NAME_MAX);
    }
    return size_check("reason", r->reason, HV_REASON_MAX, err, len);
}

hv_err hv_validate_nodes_drain(const Hvpb__V1__NodesDrainRequest *r, char *err, size_t len) {
    char c[100];
    if (r->n_nodes == 0 || r->n_nodes > HV_DRAIN_NODES_MAX) {
        return bad(err, len, "nodes: expected 1 to %d nodes, got %zu", HV_DRAIN_NODES_MAX,
                   r->n_nodes);
    }
    for (size_t i = 0; i < r->n_nodes; i++) {
        const char *n = r->nodes[i];
        if (n == NULL || n[0] == '\0' || strlen(n) > HV_NODE_NAME_MAX) {
            return bad(err, len, "nodes[%zu]: '%s' must be a node name or id (1 to %d characters)",
                       i, clip(n, c, sizeof(c)), HV_NODE_NAME_MAX);
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(r->nodes[k], n) == 0) {
                return bad(err, len, "nodes[%zu]: '%s' is named twice", i, clip(n, c, sizeof(c)));
            }
        }
    }
    return size_check("reason", r->reason, HV_REASON_MAX, err, len);
}

hv_err hv_validate_rdzv_join(const Hvpb__V1__RdzvJoinRequest *r, char *err, size_t len) {
    char host[256], c[100];
    int port;
    if (r->addr != NULL && r->addr[0] != '\0' &&
        (strlen(r->addr) > 300 || hv_parse_hostport(r->addr, host, sizeof(host), &port) != HV_OK ||
         (r->addr[0] != '[' && strchr(host, ':') != NULL))) {
        return bad(err, len, "addr: '%s' is not HOST:PORT (IPv6: [ADDR]:PORT)",
                   clip(r->addr, c, sizeof(c)));
    }
    if (r->n_broken_peers > HV_RDZV_BROKEN_PEERS_MAX) {
        return bad(err, len, "broken_peers: at most %d worker ids, got %zu",
                   HV_RDZV_BROKEN_PEERS_MAX, r->n_broken_peers);
    }
    if (r->n_dead_peers > HV_RDZV_DEAD_PEERS_MAX) {
        return bad(err, len, "dead_peers: at most %d worker ids (the two ring neighbours), got %zu",
                   HV_RDZV_DEAD_PEERS_MAX, r->n_dead_peers);
    }
    for (size_t i = 0; i < r->n_dead_peers; i++) {
        if (r->dead_peers[i] == 0 || r->dead_peers[i] == r->worker_id) {
            return bad(err, len, "dead_peers[%zu]: %llu is not another worker's id", i,
                       (unsigned long long)r->dead_peers[i]);
        }
    }
    return HV_OK;
}

hv_err hv_validate_rdzv_report(const Hvpb__V1__RdzvReportRequest *r, char *err, size_t len) {
    if (r->n_silent > HV_RDZV_SILENT_MAX) {
        return bad(err, len, "silent: at most %d ring neighbours, got %zu", HV_RDZV_SILENT_MAX,
                   r->n_silent);
    }
    for (size_t i = 0; i < r->n_silent; i++) {
        if (r->silent[i]->how != 1 && r->silent[i]->how != 2) {
            return bad(err, len,
                       "silent[%zu].how: must be 1 (no heartbeat) or 2 (no "
                       "acknowledgement), got %u",
                       i, r->silent[i]->how);
        }
    }
    return HV_OK;
}

hv_err hv_validate_kv_put(const Hvpb__V1__KvPutRequest *r, char *err, size_t len) {
    size_t klen = r->key != NULL ? strlen(r->key) : 0;
    if (klen == 0 || klen > HV_KV_MAX_KEY) {
        return bad(err, len, "key: must be 1..%d bytes, got %zu", HV_KV_MAX_KEY, klen);
    }
    if (r->value.len > HV_KV_MAX_VALUE) {
        return bad(err, len, "value: at most %d bytes, got %zu", HV_KV_MAX_VALUE, r->value.len);
    }
    return HV_OK;
}

hv_err hv_validate_kv_get(const Hvpb__V1__KvGetRequest *r, char *err, size_t len) {
    size_t klen = r->key != NULL ? strlen(r->key) : 0;
    if (klen > HV_KV_MAX_KEY) {
        return bad(err, len, "key: must be 1..%d bytes, got %zu", HV_KV_MAX_KEY, klen);
    }
    return HV_OK;
}

hv_err hv_validate_put_state(const Hvpb__V1__PutStateRequest *r, char *err, size_t len) {
    if (r->data.len > (1u << 20)) {
        return bad(err, len, "data: at most 1 MiB per chunk, got %zu", r->data.len);
    }
    if (r->total == 0 || r->total > ((uint64_t)1 << 36)) {
        return bad(err, len, "total: must be 1 byte .. 64 GiB, got %llu",
                   (unsigned long long)r->total);
    }
    if (r->offset > r->total || r->total - r->offset < r->data.len) {
        return bad(err, len, "offset: %zu bytes at %llu go past total %llu", r->data.len,
                   (unsigned long long)r->offset, (unsigned long long)r->total);
    }
    int last = r->offset + r->data.len == r->total;
    if (last != (r->last != 0)) {
        return bad(err, len, "last: must be set exactly on the chunk that ends at total");
    }
    if (last && (r->sha256 == NULL || !hv_sha256_valid_hex(r->sha256))) {
        return bad(err, len, "sha256: the last chunk needs the copy's digest (64 hex digits)");
    }
    if (r->generation == 0) {
        return bad(err, len, "generation: must be at least 1");
    }
    return HV_OK;
}

hv_err hv_validate_fetch_state(const Hvpb__V1__FetchStateRequest *r, char *err, size_t len) {
    if (r->max_bytes > (1u << 20)) {
        return bad(err, len, "max_bytes: at most 1 MiB, got %u", r->max_bytes);
    }
    return HV_OK;
}

hv_err hv_validate_rdzv_resize(const Hvpb__V1__RdzvResizeRequest *r, char *err, size_t len) {
    if (r->size == 0) {
        return bad(err, len, "size: must be at least 1");
    }
    size_t rlen = r->reason != NULL ? strlen(r->reason) : 0;
    if (rlen > 200) {
        return bad(err, len, "reason: at most 200 bytes, got %zu", rlen);
    }
    return HV_OK;
}

/* ---- the table ------------------------------------------------------------------------------- */

#define CHECK_FN(name, type)                                                                       \
    static hv_err check_##name(const ProtobufCMessage *m, char *err, size_t len) {                 \
        return hv_validate_##name((const type *)m, err, len);                                      \
    }
CHECK_FN(join, Hvpb__V1__JoinRequest)
CHECK_FN(fetch, Hvpb__V1__FetchRequest)
CHECK_FN(stat_artifact, Hvpb__V1__StatArtifactRequest)
CHECK_FN(upload, Hvpb__V1__UploadChunk)
CHECK_FN(submit, Hvpb__V1__SubmitRequest)
CHECK_FN(list_jobs, Hvpb__V1__ListJobsRequest)
CHECK_FN(list_nodes, Hvpb__V1__ListNodesRequest)
CHECK_FN(list_events, Hvpb__V1__ListEventsRequest)
CHECK_FN(node_drain, Hvpb__V1__NodeDrainRequest)
CHECK_FN(nodes_drain, Hvpb__V1__NodesDrainRequest)
CHECK_FN(rdzv_join, Hvpb__V1__RdzvJoinRequest)
CHECK_FN(kv_put, Hvpb__V1__KvPutRequest)
CHECK_FN(kv_get, Hvpb__V1__KvGetRequest)
CHECK_FN(rdzv_resize, Hvpb__V1__RdzvResizeRequest)
CHECK_FN(rdzv_report, Hvpb__V1__RdzvReportRequest)
CHECK_FN(put_state, Hvpb__V1__PutStateRequest)
CHECK_FN(fetch_state, Hvpb__V1__FetchStateRequest)

static const hv_validate_method_t methods[] = {
    {"/hvpb.v1.Cluster/Join", &hvpb__v1__join_request__descriptor, check_join},
    /* Session: a body this head does not know is a newer agent's, and is ignored. */
    {"/hvpb.v1.Cluster/Session", &hvpb__v1__agent_msg__descriptor, NULL},
    {"/hvpb.v1.Cluster/Fetch", &hvpb__v1__fetch_request__descriptor, check_fetch},
    {"/hvpb.v1.Cluster/UploadState", &hvpb__v1__upload_chunk__descriptor, check_upload},
    {"/hvpb.v1.Jobs/StatArtifact", &hvpb__v1__stat_artifact_request__descriptor,
     check_stat_artifact},
    {"/hvpb.v1.Jobs/Upload", &hvpb__v1__upload_chunk__descriptor, check_upload},
    {"/hvpb.v1.Jobs/Submit", &hvpb__v1__submit_request__descriptor, check_submit},
    {"/hvpb.v1.Jobs/GetJob", &hvpb__v1__job_ref__descriptor, NULL},
    {"/hvpb.v1.Jobs/ListJobs", &hvpb__v1__list_jobs_request__descriptor, check_list_jobs},
    {"/hvpb.v1.Jobs/ListNodes", &hvpb__v1__list_nodes_request__descriptor, check_list_nodes},
    {"/hvpb.v1.Jobs/ListEvents", &hvpb__v1__list_events_request__descriptor, check_list_events},
    {"/hvpb.v1.Jobs/Cancel", &hvpb__v1__job_ref__descriptor, NULL},
    {"/hvpb.v1.Jobs/Watch", &hvpb__v1__watch_request__descriptor, NULL},
    {"/hvpb.v1.Jobs/DrainNode", &hvpb__v1__node_drain_request__descriptor, check_node_drain},
    {"/hvpb.v1.Jobs/DrainNodes", &hvpb__v1__nodes_drain_request__descriptor, check_nodes_drain},
    {"/hvpb.v1.Jobs/RevokeNode", &hvpb__v1__node_drain_request__descriptor, check_node_drain},
    {"/hvpb.v1.Jobs/Cost", &hvpb__v1__cost_request__descriptor, NULL},
    {"/hvpb.v1.Rendezvous/JoinRound", &hvpb__v1__rdzv_join_request__descriptor, check_rdzv_join},
    {"/hvpb.v1.Rendezvous/Done", &hvpb__v1__rdzv_done_request__descriptor, NULL},
    {"/hvpb.v1.Rendezvous/Resize", &hvpb__v1__rdzv_resize_request__descriptor, check_rdzv_resize},
    {"/hvpb.v1.Rendezvous/WatchMembers", &hvpb__v1__rdzv_watch_request__descriptor, NULL},
    {"/hvpb.v1.Rendezvous/KvPut", &hvpb__v1__kv_put_request__descriptor, check_kv_put},
    {"/hvpb.v1.Rendezvous/KvGet", &hvpb__v1__kv_get_request__descriptor, check_kv_get},
    {"/hvpb.v1.Rendezvous/PutState", &hvpb__v1__put_state_request__descriptor, check_put_state},
    {"/hvpb.v1.Rendezvous/FetchState", &hvpb__v1__fetch_state_request__descriptor,
     check_fetch_state},
    {"/hvpb.v1.Rendezvous/Report", &hvpb__v1__rdzv_report_request__descriptor, check_rdzv_report},
};

const hv_validate_method_t *hv_validate_methods(size_t *n) {
    *n = sizeof(methods) / sizeof(methods[0]);
    return methods;
}

char *hv_validate_join_labels(Hvpb__V1__KeyValue **kv, size_t n) {
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        len += strlen(kv[i]->key) + strlen(kv[i]->value) + 2;
    }
    char *out = hv_malloc(len);
    if (out == NULL) {
        return NULL;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w =
            snprintf(out + used, len - used, "%s%s=%s", i > 0 ? "," : "", kv[i]->key, kv[i]->value);
        used += w > 0 ? (size_t)w : 0;
    }
    return out;
}

/* ---- UTF-8 of every string field ------------------------------------------------------------ */

#define UTF8_MAX_DEPTH 16 /* messages inside messages (hv.proto nests 3 deep) */

/* One walk over a message's strings: refuse (the first bad one, in err) or repair (each). */
typedef struct utf8_walk_s {
    int repair;
    size_t fixed; /* repair: bytes replaced */
    char *where;  /* the first bad field's path */
    size_t wherelen;
} utf8_walk_t;

/* s of the field at path: 0 to go on, 1 to stop (refused). */
static int utf8_string(utf8_walk_t *w, char *s, const char *path) {
    long at = hv_utf8_bad_at(s);
    if (at < 0) {
        return 0;
    }
    if (w->fixed == 0 || !w->repair) {
        snprintf(w->where, w->wherelen, "%s: not UTF-8 text (byte 0x%02x at offset %ld of %zu)",
                 path, (unsigned)(unsigned char)s[at], at, strlen(s));
    }
    if (!w->repair) {
        return 1;
    }
    w->fixed += hv_utf8_repair(s);
    return 0;
}

/* The path of field f (element i, or -1) under prefix, into out. */
static void utf8_path(const char *prefix, const ProtobufCFieldDescriptor *f, long i, char *out,
                      size_t len) {
    int w = snprintf(out, len, "%s%s%s", prefix, prefix[0] != '\0' ? "." : "", f->name);
    if (i >= 0 && w > 0 && (size_t)w < len) {
        snprintf(out + w, len - (size_t)w, "[%ld]", i);
    }
}

/* Every string of m, and of the messages in it (the set member of a oneof only). */
static int utf8_message(utf8_walk_t *w, const ProtobufCMessage *m, const char *prefix,
                        unsigned depth) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned k = 0; k < d->n_fields && depth < UTF8_MAX_DEPTH; k++) {
        const ProtobufCFieldDescriptor *f = &d->fields[k];
        const char *base = (const char *)m;
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id) {
            continue; /* another member of the oneof is set */
        }
        int many = f->label == PROTOBUF_C_LABEL_REPEATED;
        size_t n = many ? *(const size_t *)(base + f->quantifier_offset) : 1;
        void *const *items =
            many ? *(void *const *const *)(base + f->offset) : (void *const *)(base + f->offset);
        for (size_t i = 0; i < n; i++) {
            char path[256];
            if (items[i] == NULL) {
                continue;
            }
            utf8_path(prefix, f, many ? (long)i : -1, path, sizeof(path));
            if (f->type == PROTOBUF_C_TYPE_STRING ? utf8_string(w, items[i], path)
                                                  : utf8_message(w, items[i], path, depth + 1)) {
                return 1;
            }
        }
    }
    return 0;
}

hv_err hv_validate_utf8(const ProtobufCMessage *m, char *err, size_t len) {
    utf8_walk_t w = {.where = err, .wherelen = len};
    return utf8_message(&w, m, "", 0) ? HV_EINVAL : HV_OK;
}

size_t hv_validate_utf8_repair(ProtobufCMessage *m, char *where, size_t len) {
    utf8_walk_t w = {.repair = 1, .where = where, .wherelen = len};
    if (len > 0) {
        where[0] = '\0';
    }
    (void)utf8_message(&w, m, "", 0);
    return w.fixed;
}
