/*
 * validate: the checks every request of the head's services passes before a handler acts on it,
 * as pure functions (no I/O, no state, no allocation): what a field may hold on its own (lengths,
 * ranges, names, digests). Whether a job, node or artifact exists is the handler's business.
 * Each returns HV_OK, or HV_EINVAL with a message in err that names the field and the value
 * ("node.slots: must be 1..4096, got 0"); the services answer it as INVALID_ARGUMENT.
 * hv_validate_methods() lists every method with its request type and check, for the fuzzer
 * (tests/fuzz) and the tests.
 */
#ifndef HV_HEAD_VALIDATE_H
#define HV_HEAD_VALIDATE_H

#include <stddef.h>

#include "err.h"
#include "hv.pb-c.h"

/* The size bounds of what the head accepts and stores (docs/security.md, "Resource bounds:
 * sizes"; proto/hv.proto repeats each beside its field). Lengths are bytes of UTF-8. */
#define HV_NODE_NAME_MAX 128
#define HV_DRAIN_NODES_MAX 64      /* nodes in one DrainNodes call */
#define HV_RDZV_BROKEN_PEERS_MAX 6 /* ring neighbours one JoinRound reports broken (3 rings) */
#define HV_RDZV_DEAD_PEERS_MAX 2   /* flat-ring neighbours one JoinRound reports dead */
#define HV_RDZV_SILENT_MAX 6       /* ring neighbours one Report says fell silent */
#define HV_NODE_SLOTS_MAX 4096
#define HV_NODE_ADDRS_MAX 64            /* addresses of one node */
#define HV_NODE_ADDR_MAX 255            /* bytes of one address */
#define HV_NODE_LABELS_MAX 64           /* labels of one node */
#define HV_LABEL_KEY_MAX 63             /* bytes of a label's key */
#define HV_LABEL_VALUE_MAX 256          /* bytes of a label's value */
#define HV_NODE_FIELD_MAX 256           /* bytes of a node's instance_id and version */
#define HV_JOB_NAME_MAX 256             /* bytes of a job's name and of its user */
#define HV_SUBMIT_MAX_ARGS 4096         /* arguments of a job */
#define HV_SUBMIT_ARGS_BYTES (1u << 20) /* bytes of all its arguments together */
#define HV_SUBMIT_MAX_ENV 4096          /* environment variables of a job */
#define HV_ENV_KEY_MAX 256              /* bytes of a variable's name */
#define HV_ENV_VALUE_MAX 65536          /* bytes of a variable's value */
#define HV_SUBMIT_ENV_BYTES (1u << 20)  /* bytes of all names and values together */
#define HV_SUBMIT_MAX_FILES 256
#define HV_FILE_PATH_MAX 1024          /* bytes of a shipped file's relative path (sub/dir/f.py) */
#define HV_FILE_PATH_DEPTH_MAX 16      /* its components */
#define HV_COMMAND_MAX 4096            /* bytes of JobSpec.command */
#define HV_UPLOAD_CHUNK_MAX (1u << 20) /* bytes of data in one Upload call */
#define HV_REASON_MAX 1024             /* bytes of a drain reason */
#define HV_KV_MAX_KEY 256
#define HV_KV_MAX_VALUE 65536
#define HV_LIST_MAX 100000

hv_err hv_validate_join(const Hvpb__V1__JoinRequest *r, char *err, size_t len);
hv_err hv_validate_fetch(const Hvpb__V1__FetchRequest *r, char *err, size_t len);
/* The artifact digests a stored (packed) JobSpec uses, its binary's then its files', into
 * out[0..cap) (the shape of store.h's hv_store_spec_digests_fn; ud unused): the head fills the
 * store's job_artifacts from the jobs of an older database with it. A spec that does not unpack
 * uses none. Pure. */
size_t hv_validate_spec_digests(void *ud, const uint8_t *spec, size_t len, char (*out)[65],
                                size_t cap);
hv_err hv_validate_stat_artifact(const Hvpb__V1__StatArtifactRequest *r, char *err, size_t len);
hv_err hv_validate_upload(const Hvpb__V1__UploadChunk *r, char *err, size_t len);
hv_err hv_validate_submit(const Hvpb__V1__SubmitRequest *r, char *err, size_t len);
hv_err hv_validate_list_jobs(const Hvpb__V1__ListJobsRequest *r, char *err, size_t len);
hv_err hv_validate_list_nodes(const Hvpb__V1__ListNodesRequest *r, char *err, size_t len);
hv_err hv_validate_list_events(const Hvpb__V1__ListEventsRequest *r, char *err, size_t len);
hv_err hv_validate_node_drain(const Hvpb__V1__NodeDrainRequest *r, char *err, size_t len);
hv_err hv_validate_nodes_drain(const Hvpb__V1__NodesDrainRequest *r, char *err, size_t len);
hv_err hv_validate_rdzv_join(const Hvpb__V1__RdzvJoinRequest *r, char *err, size_t len);
hv_err hv_validate_kv_put(const Hvpb__V1__KvPutRequest *r, char *err, size_t len);
/* Report: at most HV_RDZV_SILENT_MAX silent neighbours, each with a known way (1 or 2). */
hv_err hv_validate_rdzv_report(const Hvpb__V1__RdzvReportRequest *r, char *err, size_t len);
hv_err hv_validate_kv_get(const Hvpb__V1__KvGetRequest *r, char *err, size_t len);
/* Rendezvous.PutState: chunk at most 1 MiB inside total (<= 64 GiB), last set exactly on the
 * final chunk, which carries a hex SHA-256; generation >= 1. */
hv_err hv_validate_put_state(const Hvpb__V1__PutStateRequest *r, char *err, size_t len);
/* Rendezvous.FetchState: max_bytes at most 1 MiB. */
hv_err hv_validate_fetch_state(const Hvpb__V1__FetchStateRequest *r, char *err, size_t len);
hv_err hv_validate_rdzv_resize(const Hvpb__V1__RdzvResizeRequest *r, char *err, size_t len);

/* A plain file name: not empty, no '/', not "." or "..", at most 255 bytes. */
int hv_validate_file_name(const char *s);
/* A shipped file's place in the worker's directory: plain file names joined by '/' (no leading,
 * doubled or trailing '/', no "." or ".."), at most HV_FILE_PATH_DEPTH_MAX of them and
 * HV_FILE_PATH_MAX bytes. */
int hv_validate_file_path(const char *s);

/* One method of the head's services: its path, request type and check (NULL: nothing to check
 * beyond the request type). */
typedef struct hv_validate_method_s {
    const char *path;
    const ProtobufCMessageDescriptor *req;
    hv_err (*check)(const ProtobufCMessage *m, char *err, size_t len);
} hv_validate_method_t;

/* Every method the head serves (*n of them). */
const hv_validate_method_t *hv_validate_methods(size_t *n);

/* Every proto3 string of m, and of every message inside it (repeated ones and the set member
 * of a oneof included), is UTF-8 text (common/utf8.h): the descriptors are walked, so a string
 * field added to hv.proto is covered without a word here. HV_OK, or HV_EINVAL with the first
 * that is not in err, named by its path ("spec.env[2].key: not UTF-8 text (byte 0xff at offset
 * 1 of 3)"); the value is not quoted. The head's gate (svc_auth.c) runs it on the request of
 * every call before any handler sees it. */
hv_err hv_validate_utf8(const ProtobufCMessage *m, char *err, size_t len);

/* The same walk, repairing in place instead: each byte that is not part of UTF-8 text becomes
 * '?'. Returns the bytes replaced; where (len bytes) names the first field repaired. For what
 * agents report on their Session (program output, exit reasons), which is kept, not refused. */
size_t hv_validate_utf8_repair(ProtobufCMessage *m, char *where, size_t len);

/* "k=v,k=v" of n labels already checked here (no ',' or '=' inside a key or value), as the
 * head stores them; "" for none; NULL when out of memory (the caller frees with hv_free). */
char *hv_validate_join_labels(Hvpb__V1__KeyValue **kv, size_t n);

#endif
