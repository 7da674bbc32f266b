/*
 * auth: who may call what on the head. Every RPC carries "authorization: Bearer <credential>"
 * (common/rpc.c reads it, hv_rpc_call_bearer); the services ask this module, at the edge, before
 * they decode anything else, and answer UNAUTHENTICATED or PERMISSION_DENIED with its message.
 *
 * The credentials (core/creds.h makes and recognises them under the head's key and the state's
 * epoch):
 *   hvc_<hex>         client (hvsubmit, hvctl): the Jobs service. Random; the head generates
 *                     <data_dir>/client.token and reads further ones from
 *                     <data_dir>/clients/NAME.token (hv_auth_load).
 *   hvn_...           node (one agent process): Cluster.Session and Cluster.Fetch for that
 *                     node, and its re-joins. Returned by Join.
 *   hvw_...           worker: the Rendezvous service for that one job. Carried by the spawn
 *                     order, passed to the worker as HV_WORKER_SECRET.
 *   hvi_...           enrollment of one autoscaler instance: its agent's Join, in place of the
 *                     join token (svc_cluster decides it, not this table).
 * The key (<data_dir>/auth.key, 0600) survives a head restart, so live agents and workers keep
 * working across one without anything stored per credential. Join tokens (hvj_, core/creds.h)
 * only admit a Join (svc_cluster checks them).
 *
 * The decision part (identify, check, messages) is pure: no I/O, no clock. hv_auth_load and
 * hv_auth_reload_clients are the only I/O (files in the data directory). Not thread-safe: the
 * head's loop thread owns it.
 */
#ifndef HV_HEAD_AUTH_H
#define HV_HEAD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "creds.h"
#include "err.h"

#define HV_AUTH_TOKEN_MAX 256  /* longest client token accepted (= HV_RPC_MAX_TOKEN) */
#define HV_AUTH_MAX_CLIENTS 64 /* client tokens at once */
#define HV_AUTH_MAX_REVOKED 1024

typedef enum hv_cred_kind {
    HV_CRED_NONE = 0, /* no credential, or one nobody issued */
    HV_CRED_CLIENT = 1,
    HV_CRED_NODE = 2,
    HV_CRED_WORKER = 3,
} hv_cred_kind;

/* What a credential is, once identified. */
typedef struct hv_cred_s {
    hv_cred_kind kind;
    uint64_t node_id, incarnation; /* NODE */
    uint64_t job_id, worker_id;    /* WORKER */
    char client[64];               /* CLIENT: the token's name ("default" or the file name) */
} hv_cred_t;

/* What a method needs. */
typedef enum hv_auth_scope {
    HV_AUTH_CLIENT = 0, /* Jobs.*: a client credential */
    HV_AUTH_NODE = 1,   /* Cluster.Session / Fetch: a node credential (of node id, if id != 0) */
    HV_AUTH_JOB = 2,    /* Rendezvous.*: a worker credential of job id */
    HV_AUTH_JOIN = 3,   /* Cluster.Join: the join token in the request, or the node's credential
                         * (svc_cluster decides: it alone knows which node the name is) */
    HV_AUTH_ACTORS = 4, /* Actors.*: a client credential, or a worker credential of any job
                         * (svc_actors limits a worker to its job's namespace) */
} hv_auth_scope;

typedef struct hv_auth_s {
    /* The head's key and the state database's epoch (hv_store_epoch), mixed into every node,
     * worker and instance MAC (core/creds.h): a new state.db (ids start again at 1) makes every
     * credential of the old one invalid. Epoch "" for a database from before epochs. */
    hv_creds_t creds;
    size_t n_clients;
    struct {
        char name[64];
        char token[HV_AUTH_TOKEN_MAX + 1];
    } clients[HV_AUTH_MAX_CLIENTS];
    size_t n_revoked;
    struct {
        uint64_t node_id, incarnation;
    } revoked[HV_AUTH_MAX_REVOKED];
    char data_dir[512]; /* set by hv_auth_load */
    /* Files the last load of the client tokens left out (client.token or clients/NAME.token:
     * empty, unreadable, no token), so each is warned about once, not every reload. */
    size_t n_skipped;
    char skipped[HV_AUTH_MAX_CLIENTS][80];
} hv_auth_t;

/* ---- pure ----------------------------------------------------------------------------------- */

/* Empties a (no clients, nothing revoked, epoch "") and sets its key. The epoch is set with
 * hv_creds_set_epoch(&a->creds, ...) before any credential is made. */
void hv_auth_init(hv_auth_t *a, const uint8_t key[HV_CREDS_KEY_BYTES]);

/* Adds a client token under name. HV_EINVAL: not "hvc_" followed by 16..200 letters, digits,
 * '-' or '_'; HV_ETOOBIG: HV_AUTH_MAX_CLIENTS reached; HV_EEXIST: the same token again. */
hv_err hv_auth_add_client(hv_auth_t *a, const char *name, const char *token);

/* Revokes one node credential (node_id, incarnation): it is refused from now on. Idempotent.
 * HV_ETOOBIG when the list is full. */
hv_err hv_auth_revoke_node(hv_auth_t *a, uint64_t node_id, uint64_t incarnation);

/* Says what bearer is. Every comparison with a secret is constant-time. HV_OK and *out filled,
 * or HV_EAUTH (empty, malformed, not issued by this head, or revoked) with out->kind NONE. */
hv_err hv_auth_identify(const hv_auth_t *a, const char *bearer, hv_cred_t *out);

/* The decision: may cred call a method of scope for id (job id for HV_AUTH_JOB, node id or 0
 * for HV_AUTH_NODE, ignored for HV_AUTH_CLIENT)? HV_OK, HV_EAUTH (no credential) or HV_EPERM
 * (a credential of another kind or another job/node). */
hv_err hv_auth_check(const hv_cred_t *cred, hv_auth_scope scope, uint64_t id);

/* The scope a method needs, by its gRPC path ("/hvpb.v1.Jobs/Submit"). Returns 0 for a path
 * the table does not know: such a method is refused (deny by default). */
int hv_auth_rule(const char *path, hv_auth_scope *scope);

/* 1 when a call of this method changes something and so goes into the audit trail whatever
 * its result (Submit, Cancel, DrainNode(s), RevokeNode, Join, Create/RevokeJoinToken); a call
 * of any other method goes there only when it is refused. Uploads are not audited (the Submit
 * that uses one is). */
int hv_auth_audited(const char *path);

/* identify + check, with the message to send on refusal (msg: msglen bytes). The message names
 * what the method needs, never whether the job or node exists, and never the credential. */
hv_err hv_auth_call(const hv_auth_t *a, const char *bearer, hv_auth_scope scope, uint64_t id,
                    hv_cred_t *cred_out, char *msg, size_t msglen);

/* ---- I/O (files, randomness) ----------------------------------------------------------------- */

/* Loads the head's key from <data_dir>/auth.key and its client token from
 * <data_dir>/client.token, generating each (random, mode 0600, atomically) when missing (a
 * damaged one is an error), then the client tokens in <data_dir>/clients/ (every NAME.token
 * file; a bad one is left out with a warning, as in hv_auth_reload_clients). The revoked node
 * credentials are kept in the state database (hv_svc_auth_load_revocations gives them to a).
 * client_path (optional, cap bytes) receives the
 * generated-or-found client token's path, for the "where is it" log line. On failure err says
 * which file and why; the values are never quoted. */
hv_err hv_auth_load(hv_auth_t *a, const char *data_dir, char *client_path, size_t cap, char *err,
                    size_t errlen);

/* Re-reads the client tokens (client.token and clients/): a deleted file is revoked, a new one
 * admitted, without a restart. A file that gives no token (empty, unreadable, not a token, one
 * too many) contributes none, with a warning naming it (once, while it stays bad): one bad file
 * never keeps the old set, so a deleted or emptied token stops working at the next reload.
 * Fails (the old set stays) only for lack of memory. */
hv_err hv_auth_reload_clients(hv_auth_t *a, char *err, size_t errlen);

/* A new join token from the OS's randomness: the whole token (shown once) into token
 * (HV_JTOKEN_MAX bytes), its id and its secret's hash as hv_creds_jtoken_parse gives them.
 * HV_EIO: no random bytes. */
hv_err hv_auth_jtoken_new(char *token, char *id, char *sha);

#endif
