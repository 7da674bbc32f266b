/*
 * workcap_test: what a job's worker credential may still do, table by table: alive while its
 * job runs, dead once it ended (every end state) or once the head no longer knows it; the user a
 * node declares; where an actor a worker creates may run (its job's user only) or why not.
 * `workcap_test <case>` runs one case.
 */
#include "workcap.h"
#include "hv_check.h"

#include <string.h>

static void case_live(void) {
    static const struct {
        int known;
        hv_job_state_t state;
        hv_err rc;
        const char *why;
    } rows[] = {
        {1, HV_JOB_PENDING, HV_OK, ""},
        {1, HV_JOB_PLACING, HV_OK, ""},
        {1, HV_JOB_RUNNING, HV_OK, ""},
        {1, HV_JOB_SUCCEEDED, HV_EAUTH, "job 7 has ended (succeeded)"},
        {1, HV_JOB_FAILED, HV_EAUTH, "job 7 has ended (failed)"},
        {1, HV_JOB_CANCELLED, HV_EAUTH, "job 7 has ended (cancelled)"},
        {0, HV_JOB_RUNNING, HV_EAUTH, "the head no longer knows job 7"},
        {0, HV_JOB_PENDING, HV_EAUTH, "the head no longer knows job 7"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_wcap_job_t j = {.known = rows[i].known, .state = rows[i].state};
        char why[300] = "";
        hv_err rc = hv_wcap_live(7, &j, why, sizeof(why));
        CHECK_RC_MSG(rc, rows[i].rc, why);
        CHECK_HAS(why, rows[i].why);
        if (rc != HV_OK) {
            CHECK_HAS(why, "the credential of job 7's workers is no longer valid");
        }
    }
    char why[300] = "";
    CHECK_RC(hv_wcap_live(3, NULL, why, sizeof(why)), HV_EAUTH);
    CHECK_HAS(why, "no longer knows job 3");
}

static void case_identity(void) {
    static const struct {
        const char *labels;
        int has;
        const char *id;
    } rows[] = {
        {"hv.run_as=alice", 1, "alice"},
        {"zone=a,hv.run_as=root,hv.python=python3", 1, "root"},
        {"zone=a", 0, ""},
        {"", 0, ""},
        {NULL, 0, ""},
        {"hv.run_as=", 0, ""},               /* empty: declares nothing */
        {"hv.run_as", 0, ""},                /* no value */
        {"xhv.run_as=bob", 0, ""},           /* another key */
        {"hv.run_asx=bob", 0, ""},           /* another key */
        {"hv.run_as=a,hv.run_as=b", 1, "a"}, /* the first */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char id[64] = "junk";
        CHECK_EQ(hv_wcap_node_identity(rows[i].labels, id, sizeof(id)), rows[i].has);
        CHECK_STR(id, rows[i].id);
    }
}

/* The actor a worker creates: the demand it gets, or why it is refused. Nodes: a (alice, zone
 * a), b (alice, zone b), r (root, zone b), o (an older agent: no identity). */
static void case_actor_labels(void) {
    static const char *const nodes[] = {"hv.run_as=alice,zone=a", "zone=b,hv.run_as=alice",
                                        "hv.run_as=root,zone=b,host=r", "zone=c,host=o"};
    static const struct {
        const char *from; /* the worker's node */
        const char *want;
        size_t n; /* of nodes[] that are live */
        hv_err rc;
        const char *out; /* HV_OK: the demand; else a part of why */
    } rows[] = {
        /* its own identity added: any alice node, any zone asked that alice has */
        {"hv.run_as=alice,zone=a", "", 4, HV_OK, "hv.run_as=alice"},
        {"hv.run_as=alice,zone=a", NULL, 4, HV_OK, "hv.run_as=alice"},
        {"hv.run_as=alice,zone=a", "zone=b", 4, HV_OK, "zone=b,hv.run_as=alice"},
        {"hv.run_as=alice,zone=a", "hv.run_as=alice", 4, HV_OK, "hv.run_as=alice"},
        {"hv.run_as=alice,zone=a", "zone=b,hv.run_as=alice", 4, HV_OK, "zone=b,hv.run_as=alice"},
        /* root's node by its labels, an older agent's node by its: no node of alice has them */
        {"hv.run_as=alice,zone=a", "host=r", 4, HV_EPERM,
         "runs as that job's user 'alice' only (on nodes labelled hv.run_as=alice), and none of "
         "the 4 live nodes is one with labels host=r"},
        {"hv.run_as=alice,zone=a", "host=o", 4, HV_EPERM, "none of the 4 live nodes"},
        {"hv.run_as=alice,zone=a", "zone=c", 4, HV_EPERM, "with labels zone=c"},
        /* another user asked for outright */
        {"hv.run_as=alice,zone=a", "hv.run_as=root", 4, HV_EPERM,
         "the workers of job 9 run as 'alice': an actor one of them creates runs as that user "
         "only, not 'root'"},
        {"hv.run_as=alice,zone=a", "zone=b,hv.run_as=", 4, HV_EPERM, "not ''"},
        {"hv.run_as=alice,zone=a", "hv.run_as=alice,hv.run_as=root", 4, HV_EPERM, "none of"},
        /* root's workers: root's nodes only */
        {"hv.run_as=root,zone=b,host=r", "", 4, HV_OK, "hv.run_as=root"},
        {"hv.run_as=root,zone=b,host=r", "zone=a", 4, HV_EPERM, "with labels zone=a"},
        /* a worker on a node that declares no user: refused, whatever it asks */
        {"zone=c,host=o", "", 4, HV_EPERM, "does not say which user it runs workers as"},
        {"zone=c,host=o", "hv.run_as=root", 4, HV_EPERM, "does not say which user"},
        {"", "", 4, HV_EPERM, "does not say which user"},
        /* the only alice nodes gone */
        {"hv.run_as=alice,zone=a", "", 0, HV_EPERM, "none of the 0 live nodes is one"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char out[600] = "", why[600] = "";
        hv_err rc = hv_wcap_actor_labels(9, rows[i].from, rows[i].want, nodes, rows[i].n, out,
                                         sizeof(out), why, sizeof(why));
        CHECK_RC_MSG(rc, rows[i].rc, why);
        if (rc == HV_OK) {
            CHECK_STR(out, rows[i].out);
        } else {
            CHECK_HAS(why, rows[i].out);
        }
    }
}

/* 64 labels at most with the identity; a demand that does not fit out is refused too. */
static void case_actor_labels_bounds(void) {
    char want[2000] = "", out[2000], why[300];
    static const char *const nodes[] = {"hv.run_as=u"};
    size_t used = 0;
    for (int i = 0; i < 63; i++) {
        used += (size_t)snprintf(want + used, sizeof(want) - used, "%sk%d=v", i ? "," : "", i);
    }
    char node[2100];
    snprintf(node, sizeof(node), "%s,hv.run_as=u", want);
    const char *const n1[] = {node};
    CHECK_RC(
        hv_wcap_actor_labels(1, "hv.run_as=u", want, n1, 1, out, sizeof(out), why, sizeof(why)),
        HV_OK);
    snprintf(want + used, sizeof(want) - used, ",k63=v");
    CHECK_RC(
        hv_wcap_actor_labels(1, "hv.run_as=u", want, n1, 1, out, sizeof(out), why, sizeof(why)),
        HV_EINVAL);
    CHECK_HAS(why, "at most 63 labels");
    CHECK_RC(hv_wcap_actor_labels(1, "hv.run_as=u", "", nodes, 1, out, 8, why, sizeof(why)),
             HV_EINVAL);
}

HV_CHECK_MAIN(NULL, NULL, {"live", case_live}, {"identity", case_identity},
              {"actor_labels", case_actor_labels},
              {"actor_labels_bounds", case_actor_labels_bounds})
