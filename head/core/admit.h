/*
 * admit: who may join the cluster, decided (pure: no I/O, no clock). A Cluster.Join carries a
 * token and its caller a bearer credential; the agent is admitted by one of
 *   - the cluster's configured join token (cluster.yaml token);
 *   - a join token made with `hvctl token create` (hvj_, core/creds.h), while it is valid: not
 *     revoked, not expired, with a use left (each admission spends one, counted before the
 *     reply: hv_driver_node_join);
 *   - an autoscaler instance's enrollment credential (hvi_), while the instance is alive and
 *     only under its own node name;
 *   - its own node credential (an agent re-joining after a head restart or a lost stream: it
 *     spends no use of a join token it still carries), for that node only.
 * Anything else is refused: UNAUTHENTICATED without a valid token or credential, PERMISSION_
 * DENIED for a credential of another instance or node. Whether the token is revoked, expired or
 * used up is said only to a caller that has its secret (the hash is compared first).
 *
 * The services gather what only they know (the bearer's node credential, checked against the
 * revocations; whether an instance is alive); the driver reads the stored join token and asks
 * here (hv_driver_admit). The words of a refusal are the service's.
 */
#ifndef HV_HEAD_CORE_ADMIT_H
#define HV_HEAD_CORE_ADMIT_H

#include <stdint.h>

#include "creds.h"
#include "err.h"
#include "records.h"

/* What a Join brings, and what is known of it (strings and the row borrowed for the call). */
typedef struct hv_admit_ask_s {
    const char *token;             /* the Join's token (NULL: none) */
    const char *static_token;      /* the cluster's configured join token (NULL or "": none) */
    const hv_jtoken_row_t *jtoken; /* the stored join token the token names (NULL: none) */
    uint64_t now_ms;               /* wall clock (a join token's expiry) */
    int renewal;         /* the bearer is a valid node credential of the Join's incarnation */
    uint64_t cred_node;  /* ... of that node */
    int instance;        /* the token is an instance's enrollment credential (hvi_) */
    int instance_admits; /* ... and that instance is alive and joins under its own name */
} hv_admit_ask_t;

typedef enum hv_admit_by {
    HV_ADMIT_REFUSED = 0,
    HV_ADMIT_BY_TOKEN,    /* the configured join token */
    HV_ADMIT_BY_JTOKEN,   /* a join token made by hvctl: a use is spent */
    HV_ADMIT_BY_INSTANCE, /* an autoscaler instance's enrollment credential */
    HV_ADMIT_BY_NODE,     /* its node credential: only for its own node (hv_admit_node) */
} hv_admit_by;

typedef enum hv_admit_refusal {
    HV_ADMIT_OK = 0,
    HV_ADMIT_WRONG_TOKEN,   /* EAUTH: no valid token and no valid node credential */
    HV_ADMIT_JTOKEN_BAD,    /* EAUTH: a join token made by hvctl that admits nobody (verdict) */
    HV_ADMIT_NOT_INSTANCE,  /* EPERM: an instance credential that does not admit this node */
    HV_ADMIT_NOT_THIS_NODE, /* EPERM: a node credential of another node */
} hv_admit_refusal;

typedef struct hv_admit_s {
    hv_admit_by by;
    hv_admit_refusal refusal;
    hv_err rc;                         /* HV_OK, or the refusal's HV_EAUTH / HV_EPERM */
    char jtoken[HV_JTOKEN_ID_LEN + 1]; /* the join token made by hvctl it names ("" none, "?"
                                        * one not of that form) */
    hv_jtoken_verdict verdict;         /* that token's verdict (JTOKEN_BAD: why it admits nobody) */
    uint64_t node;                     /* BY_NODE: the node its credential is for */
} hv_admit_t;

/* The decision, before the Join's request is checked. */
void hv_admit_decide(const hv_admit_ask_t *a, hv_admit_t *out);
/* After the request is checked: a node credential re-joins its own node only (known_node: the
 * node of the Join's name, 0 when none); refuses a (NOT_THIS_NODE) otherwise. */
void hv_admit_node(hv_admit_t *a, uint64_t known_node);

#endif
