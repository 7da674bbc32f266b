/*
 * head_artifacts: uploaded binaries and files, stored once by sha256 under
 * <data>/artifacts/<digest>. Uploads arrive as ordered chunks (Jobs.Upload) into
 * <data>/uploads/<digest>.part; the digest is computed as the chunks arrive, checked on the last
 * one, and only then is the file renamed into place and recorded in the store. A partial upload
 * survives a head restart and resumes from its size (Jobs.StatArtifact says where). Nothing
 * over max_upload is accepted. Loop thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

/* An upload in progress: the running hash of its first `hashed` bytes. */
typedef struct upload_s {
    char digest[65];
    hv_sha256_t sha;
    uint64_t hashed;
    struct upload_s *next;
} upload_t;

static upload_t *uploads; /* loop thread only */

static void upload_forget(const char *digest) {
    for (upload_t **p = &uploads; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->digest, digest) == 0) {
            upload_t *u = *p;
            *p = u->next;
            hv_free(u);
            return;
        }
    }
}

hv_err head_artifacts_init(head_t *h) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/artifacts", h->cfg.data_dir);
    HV_TRY(hv_mkdirs(path, 0755));
    snprintf(path, sizeof(path), "%s/uploads", h->cfg.data_dir);
    HV_TRY(hv_mkdirs(path, 0755));
    snprintf(path, sizeof(path), "%s/logs", h->cfg.data_dir);
    return hv_mkdirs(path, 0755);
}

hv_err head_artifact_path(head_t *h, const char *digest, char *buf, size_t len) {
    if (digest == NULL || !hv_sha256_valid_hex(digest)) {
        return HV_EINVAL;
    }
    snprintf(buf, len, "%s/artifacts/%s", h->cfg.data_dir, digest);
    return HV_OK;
}

int head_artifact_present(head_t *h, const char *digest) {
    char path[4096];
    struct stat sb;
    hv_artifact_row_t row;
    memset(&row, 0, sizeof(row));
    if (head_artifact_path(h, digest, path, sizeof(path)) != HV_OK ||
        hv_store_artifact_get(h->store, digest, &row) != HV_OK) {
        return 0;
    }
    int ok = stat(path, &sb) == 0 && (uint64_t)sb.st_size == row.size;
    hv_store_artifact_fini(&row);
    return ok;
}

static uint64_t part_size(const char *part) {
    struct stat sb;
    return stat(part, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void jobs_stat_artifact(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__StatArtifactRequest *req = (const Hvpb__V1__StatArtifactRequest *)m;
    if (!hv_sha256_valid_hex(req->digest)) {
        hv_rpc_finish(c, HV_EINVAL, "digest '%s' is not 64 lowercase hex characters", req->digest);
        return;
    }
    Hvpb__V1__StatArtifactReply rep = HVPB__V1__STAT_ARTIFACT_REPLY__INIT;
    rep.present = head_artifact_present(h, req->digest);
    rep.max_size = h->cfg.max_upload_bytes;
    if (!rep.present) {
        char part[4096];
        snprintf(part, sizeof(part), "%s/uploads/%s.part", h->cfg.data_dir, req->digest);
        rep.received = part_size(part);
    }
    hv_rpc_reply(c, &rep.base);
}

/* Brings the running hash of an upload up to `offset` bytes (after a head restart it rehashes
 * the part file once). */
static hv_err upload_hash_to(upload_t *u, const char *part, uint64_t offset) {
    if (u->hashed == offset) {
        return HV_OK;
    }
    hv_sha256_init(&u->sha);
    u->hashed = 0;
    int fd = open(part, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return offset == 0 ? HV_OK : hv_err_from_errno(errno);
    }
    uint8_t buf[65536];
    while (u->hashed < offset) {
        size_t want = offset - u->hashed < sizeof(buf) ? (size_t)(offset - u->hashed) : sizeof(buf);
        ssize_t r = read(fd, buf, want);
        if (r <= 0) {
            close(fd);
            return HV_EIO;
        }
        hv_sha256_update(&u->sha, buf, (size_t)r);
        u->hashed += (uint64_t)r;
    }
    close(fd);
    return HV_OK;
}

static void jobs_upload(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__UploadChunk *req = (const Hvpb__V1__UploadChunk *)m;
    char sz1[32], sz2[32];
    if (!hv_sha256_valid_hex(req->digest)) {
        hv_rpc_finish(c, HV_EINVAL, "digest '%s' is not 64 lowercase hex characters", req->digest);
        return;
    }
    if (req->total_size > h->cfg.max_upload_bytes) {
        hv_rpc_finish(c, HV_ETOOBIG, "upload of %s exceeds the head's limit of %s (max_upload)",
                      hv_fmt_size(req->total_size, sz1, sizeof(sz1)),
                      hv_fmt_size(h->cfg.max_upload_bytes, sz2, sizeof(sz2)));
        return;
    }
    Hvpb__V1__UploadReply rep = HVPB__V1__UPLOAD_REPLY__INIT;
    if (head_artifact_present(h, req->digest)) {
        rep.received = req->total_size;
        rep.complete = 1;
        hv_rpc_reply(c, &rep.base);
        return;
    }
    char part[4096], final[4096];
    snprintf(part, sizeof(part), "%s/uploads/%s.part", h->cfg.data_dir, req->digest);
    head_artifact_path(h, req->digest, final, sizeof(final));
    uint64_t have = part_size(part);
    if (req->offset != have) {
        hv_rpc_finish(c, HV_ESTATE, "upload offset %llu, but the head holds %llu bytes",
                      (unsigned long long)req->offset, (unsigned long long)have);
        return;
    }
    if (req->offset + req->data.len > req->total_size) {
        hv_rpc_finish(c, HV_EINVAL, "chunk runs past the declared size %llu",
                      (unsigned long long)req->total_size);
        return;
    }
    upload_t *u = uploads;
    while (u != NULL && strcmp(u->digest, req->digest) != 0) {
        u = u->next;
    }
    if (u == NULL) {
        u = hv_calloc(1, sizeof(*u));
        if (u == NULL) {
            hv_rpc_finish(c, HV_ENOMEM, "out of memory");
            return;
        }
        snprintf(u->digest, sizeof(u->digest), "%s", req->digest);
        hv_sha256_init(&u->sha);
        u->next = uploads;
        uploads = u;
    }
    hv_err rc = upload_hash_to(u, part, have);
    int fd = -1;
    if (rc == HV_OK) {
        fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = hv_err_from_errno(errno);
        }
    }
    if (rc == HV_OK && req->data.len > 0 &&
        pwrite(fd, req->data.data, req->data.len, (off_t)have) != (ssize_t)req->data.len) {
        rc = HV_EIO;
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "artifacts", "HV-UPLOAD-IO", "cannot write %s: %s", part,
               strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        hv_rpc_finish(c, HV_EIO, "the head cannot store the upload: %s", hv_strerror(rc));
        return;
    }
    hv_sha256_update(&u->sha, req->data.data, req->data.len);
    u->hashed += req->data.len;
    rep.received = have + req->data.len;
    if (req->last) {
        uint8_t d[32];
        char hex[65];
        hv_sha256_final(&u->sha, d);
        hv_sha256_hex(d, hex);
        int sync_ok = fsync(fd) == 0;
        close(fd);
        upload_forget(req->digest);
        if (rep.received != req->total_size || strcmp(hex, req->digest) != 0) {
            unlink(part);
            hv_rpc_finish(c, HV_ECORRUPT,
                          "upload does not match its digest: got %llu bytes with sha256 %s",
                          (unsigned long long)rep.received, hex);
            return;
        }
        if (!sync_ok || rename(part, final) != 0) {
            hv_rpc_finish(c, HV_EIO, "the head cannot publish the artifact: %s", strerror(errno));
            return;
        }
        chmod(final, 0755);
        hv_artifact_row_t row = {.digest = (char *)req->digest,
                                 .path = final,
                                 .size = req->total_size,
                                 .created_ms = hv_wall_ms(),
                                 .last_used_ms = hv_wall_ms()};
        rc = hv_store_artifact_put(h->store, &row);
        if (rc != HV_OK) {
            head_store_failed(h, rc, "record artifact");
            hv_rpc_finish(c, HV_EIO, "the head cannot record the artifact");
            return;
        }
        rep.complete = 1;
        HV_LOG(HV_LOG_INFO, "artifacts", "HV-ARTIFACT-NEW", "artifact %.12s stored (%s)",
               req->digest, hv_fmt_size(req->total_size, sz1, sizeof(sz1)));
    } else {
        close(fd);
    }
    hv_rpc_reply(c, &rep.base);
}

hv_err head_artifacts_register(head_t *h) {
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/StatArtifact", HV_RPC_UNARY, &hvpb__v1__stat_artifact_request__descriptor,
         jobs_stat_artifact, NULL, h},
        {"/hvpb.v1.Jobs/Upload", HV_RPC_UNARY, &hvpb__v1__upload_chunk__descriptor, jobs_upload,
         NULL, h},
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        HV_TRY(hv_rpc_server_add(h->srv, &ms[i]));
    }
    return HV_OK;
}
