/*
 * auth_test: the access table, credential by credential and scope by scope (which kind may call
 * which service for which job or node, and with which refusal), derived credentials (stable for
 * one key, different for another, tampering refused), client tokens, node revocation, the
 * refusal messages (they never name the job or echo the credential), and the files (generated
 * 0600, stable across a reload, extra tokens in clients/, revocations kept). `auth_test CASE`
 * runs one case.
 */
#include "auth.h"
#include "hv_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static hv_auth_t A; /* static: the struct is large */

static void setup_key(hv_auth_t *a, uint8_t fill) {
    uint8_t key[HV_CREDS_KEY_BYTES];
    memset(key, fill, sizeof(key));
    hv_auth_init(a, key);
}

#define CLIENT_TOK "hvc_0123456789abcdef0123"

/* Every credential kind against every scope: the table is the access policy. */
static void case_table(void) {
    setup_key(&A, 7);
    CHECK_RC(hv_auth_add_client(&A, "default", CLIENT_TOK), HV_OK);
    char node5[HV_CREDS_MAX], w8[HV_CREDS_MAX];
    hv_creds_node(&A.creds, 5, 0xabc, node5);
    hv_creds_worker(&A.creds, 8, 3, w8);
    static const struct {
        const char *who; /* "client", "node5", "worker8", "none", "junk" */
        hv_auth_scope scope;
        uint64_t id;
        hv_err want;
    } rows[] = {
        {"client", HV_AUTH_CLIENT, 0, HV_OK},     {"client", HV_AUTH_NODE, 0, HV_EPERM},
        {"client", HV_AUTH_JOB, 8, HV_EPERM},     {"node5", HV_AUTH_CLIENT, 0, HV_EPERM},
        {"node5", HV_AUTH_NODE, 0, HV_OK},        {"node5", HV_AUTH_NODE, 5, HV_OK},
        {"node5", HV_AUTH_NODE, 6, HV_EPERM},     {"node5", HV_AUTH_JOB, 8, HV_EPERM},
        {"worker8", HV_AUTH_JOB, 8, HV_OK},       {"worker8", HV_AUTH_JOB, 9, HV_EPERM},
        {"worker8", HV_AUTH_CLIENT, 0, HV_EPERM}, {"worker8", HV_AUTH_NODE, 0, HV_EPERM},
        {"none", HV_AUTH_CLIENT, 0, HV_EAUTH},    {"none", HV_AUTH_NODE, 0, HV_EAUTH},
        {"none", HV_AUTH_JOB, 8, HV_EAUTH},       {"junk", HV_AUTH_CLIENT, 0, HV_EAUTH},
        {"junk", HV_AUTH_JOB, 8, HV_EAUTH},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *b = strcmp(rows[i].who, "client") == 0    ? CLIENT_TOK
                        : strcmp(rows[i].who, "node5") == 0   ? node5
                        : strcmp(rows[i].who, "worker8") == 0 ? w8
                        : strcmp(rows[i].who, "none") == 0    ? ""
                                                              : "hvc_guessguessguessguess";
        char msg[256];
        hv_err rc = hv_auth_call(&A, b, rows[i].scope, rows[i].id, NULL, msg, sizeof(msg));
        CHECK_RC_MSG(rc, rows[i].want, rows[i].who);
        if (rc != HV_OK) {
            CHECK(strstr(msg, rows[i].want == HV_EAUTH ? "not authenticated"
                                                       : "permission denied") != NULL);
            CHECK(strstr(msg, "job 8") == NULL && strstr(msg, "job 9") == NULL);
            CHECK(strstr(msg, "hvc_") == NULL && strstr(msg, "hvw_") == NULL);
        }
    }
}

/* Derived credentials: the same for the same key, useless under another key, and any change
 * to the numbers or the mac is refused. */
static void case_derived(void) {
    setup_key(&A, 1);
    char w[HV_CREDS_MAX], w2[HV_CREDS_MAX];
    hv_creds_worker(&A.creds, 8, 3, w);
    hv_creds_worker(&A.creds, 8, 3, w2);
    CHECK_STR(w, w2);
    CHECK(strncmp(w, "hvw_8_3_", 8) == 0);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&A, w, &c), HV_OK);
    CHECK_EQ(c.kind, HV_CRED_WORKER);
    CHECK_EQ(c.job_id, 8);
    CHECK_EQ(c.worker_id, 3);
    /* the same mac with another job number: refused (a worker cannot re-scope its secret) */
    char forged[HV_CREDS_MAX + 8];
    snprintf(forged, sizeof(forged), "hvw_9_3_%s", w + 8);
    CHECK_RC(hv_auth_identify(&A, forged, &c), HV_EAUTH);
    CHECK_EQ(c.kind, HV_CRED_NONE);
    snprintf(forged, sizeof(forged), "%s", w);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
    CHECK_RC(hv_auth_identify(&A, forged, &c), HV_EAUTH);
    /* truncated, extra text, odd numbers */
    snprintf(forged, sizeof(forged), "%.*s", (int)strlen(w) - 1, w);
    CHECK_RC(hv_auth_identify(&A, forged, &c), HV_EAUTH);
    snprintf(forged, sizeof(forged), "%sx", w);
    CHECK_RC(hv_auth_identify(&A, forged, &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, "hvw__3_00", &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, "hvw_99999999999999999999_3_00", &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, "hvn_1_zz_00", &c), HV_EAUTH);
    /* another head (another key) does not accept it */
    static hv_auth_t B;
    setup_key(&B, 2);
    CHECK_RC(hv_auth_identify(&B, w, &c), HV_EAUTH);
    char n[HV_CREDS_MAX];
    hv_creds_node(&A.creds, 12, 0xdeadbeef, n);
    CHECK(strncmp(n, "hvn_12_deadbeef_", 16) == 0);
    CHECK_RC(hv_auth_identify(&A, n, &c), HV_OK);
    CHECK_EQ(c.kind, HV_CRED_NODE);
    CHECK_EQ(c.node_id, 12);
    CHECK_EQ(c.incarnation, 0xdeadbeef);
    CHECK_RC(hv_auth_identify(&B, n, &c), HV_EAUTH);
}

/* Revoking one incarnation of a node refuses exactly that credential. */
static void case_revoke(void) {
    setup_key(&A, 3);
    char n1[HV_CREDS_MAX], n2[HV_CREDS_MAX];
    hv_creds_node(&A.creds, 4, 1, n1);
    hv_creds_node(&A.creds, 4, 2, n2);
    CHECK_RC(hv_auth_revoke_node(&A, 4, 1), HV_OK);
    CHECK_RC(hv_auth_revoke_node(&A, 4, 1), HV_OK);
    CHECK_EQ(A.n_revoked, 1);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&A, n1, &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, n2, &c), HV_OK);
}

/* Every method hv serves has a rule; an unknown one has none (refused). */
static void case_rules(void) {
    static const struct {
        const char *path;
        int known;
        hv_auth_scope scope;
    } rows[] = {
        {"/hvpb.v1.Jobs/Submit", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/Cancel", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/Upload", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/RevokeNode", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/ListAudit", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/CreateJoinToken", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/RevokeJoinToken", 1, HV_AUTH_CLIENT},
        {"/hvpb.v1.Cluster/Join", 1, HV_AUTH_JOIN},
        {"/hvpb.v1.Cluster/Session", 1, HV_AUTH_NODE},
        {"/hvpb.v1.Cluster/Fetch", 1, HV_AUTH_NODE},
        {"/hvpb.v1.Cluster/UploadState", 1, HV_AUTH_NODE},
        {"/hvpb.v1.Rendezvous/KvPut", 1, HV_AUTH_JOB},
        {"/hvpb.v1.Rendezvous/JoinRound", 1, HV_AUTH_JOB},
        {"/hvpb.v1.Actors/Create", 1, HV_AUTH_ACTORS},
        {"/hvpb.v1.Actors/Get", 1, HV_AUTH_ACTORS},
        {"/hvpb.v1.Cluster/Other", 0, HV_AUTH_CLIENT},
        {"/hvpb.v1.Jobs/", 0, HV_AUTH_CLIENT},
        {"/hvpb.v1.JobsX/Submit", 0, HV_AUTH_CLIENT},
        {"", 0, HV_AUTH_CLIENT},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_auth_scope sc = HV_AUTH_CLIENT;
        CHECK_EQ(hv_auth_rule(rows[i].path, &sc), rows[i].known);
        if (rows[i].known) {
            CHECK_EQ(sc, rows[i].scope);
        }
    }
}

/* Actors: clients and any job's workers pass the gate (svc_actors holds a worker to its
 * namespace); a node's credential does not; the per-actor secret opens nothing on the head and
 * differs per actor and per head key. */
static void case_actors(void) {
    setup_key(&A, 6);
    CHECK_RC(hv_auth_add_client(&A, "a", CLIENT_TOK), HV_OK);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&A, CLIENT_TOK, &c), HV_OK);
    CHECK_RC(hv_auth_check(&c, HV_AUTH_ACTORS, 0), HV_OK);
    char w[HV_CREDS_MAX], n[HV_CREDS_MAX], a1[HV_CREDS_MAX], a2[HV_CREDS_MAX];
    hv_creds_worker(&A.creds, 8, 3, w);
    CHECK_RC(hv_auth_identify(&A, w, &c), HV_OK);
    CHECK_RC(hv_auth_check(&c, HV_AUTH_ACTORS, 0), HV_OK);
    hv_creds_node(&A.creds, 2, 1, n);
    CHECK_RC(hv_auth_identify(&A, n, &c), HV_OK);
    CHECK_RC(hv_auth_check(&c, HV_AUTH_ACTORS, 0), HV_EPERM);
    hv_creds_actor(&A.creds, 1, a1);
    hv_creds_actor(&A.creds, 2, a2);
    CHECK(strncmp(a1, "hva_1_", 6) == 0);
    CHECK(strlen(a1) >= 16 + 6);
    CHECK(strcmp(a1, a2) != 0);
    CHECK_RC(hv_auth_identify(&A, a1, &c), HV_EAUTH);
    static hv_auth_t B;
    setup_key(&B, 7);
    hv_creds_actor(&B.creds, 1, a2);
    CHECK(strcmp(a1, a2) != 0);
    CHECK(hv_auth_audited("/hvpb.v1.Actors/Create"));
    CHECK(hv_auth_audited("/hvpb.v1.Actors/Kill"));
    CHECK(!hv_auth_audited("/hvpb.v1.Actors/Get"));
}

static void case_clients(void) {
    setup_key(&A, 4);
    CHECK_RC(hv_auth_add_client(&A, "a", "hvc_short"), HV_EINVAL);
    CHECK_RC(hv_auth_add_client(&A, "a", "xyz_0123456789abcdef0123"), HV_EINVAL);
    CHECK_RC(hv_auth_add_client(&A, "a", "hvc_0123456789abcdef01 3"), HV_EINVAL);
    CHECK_RC(hv_auth_add_client(&A, "a", CLIENT_TOK), HV_OK);
    CHECK_RC(hv_auth_add_client(&A, "b", CLIENT_TOK), HV_EEXIST);
    CHECK_RC(hv_auth_add_client(&A, "ci", "hvc_ci-runner_0123456789"), HV_OK);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&A, "hvc_ci-runner_0123456789", &c), HV_OK);
    CHECK_STR(c.client, "ci");
    CHECK_RC(hv_auth_identify(&A, "hvc_ci-runner_012345678", &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, "hvc_ci-runner_01234567890", &c), HV_EAUTH);
}

static void file_mode_is(const char *path, unsigned mode) {
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK_EQ(st.st_mode & 0777, mode);
}

/* The files: generated once with mode 0600, the same values after a reload, extra tokens from
 * clients/, a deleted one revoked by a reload, a node credential revoked. */
static void case_files(void) {
    char dir[] = "/tmp/hv-auth-test.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char err[512], cpath[600], path[700];
    static hv_auth_t B;
    CHECK_RC(hv_auth_load(&A, dir, cpath, sizeof(cpath), err, sizeof(err)), HV_OK);
    snprintf(path, sizeof(path), "%s/client.token", dir);
    CHECK_STR(cpath, path);
    file_mode_is(path, 0600);
    snprintf(path, sizeof(path), "%s/auth.key", dir);
    file_mode_is(path, 0600);
    CHECK_EQ(A.n_clients, 1);
    char w[HV_CREDS_MAX];
    hv_creds_worker(&A.creds, 1, 1, w);
    CHECK_RC(hv_auth_load(&B, dir, NULL, 0, err, sizeof(err)), HV_OK);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&B, w, &c), HV_OK); /* same key after a restart */
    CHECK_RC(hv_auth_identify(&B, A.clients[0].token, &c), HV_OK);

    snprintf(path, sizeof(path), "%s/clients", dir);
    CHECK_EQ(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/clients/ci.token", dir);
    FILE *f = fopen(path, "w");
    fputs("  hvc_ci_0123456789abcdef\n", f);
    fclose(f);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_auth_identify(&B, "hvc_ci_0123456789abcdef", &c), HV_OK);
    CHECK_STR(c.client, "ci");
    unlink(path);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_auth_identify(&B, "hvc_ci_0123456789abcdef", &c), HV_EAUTH);
    /* A bad or emptied token file gives no token: it never keeps the old set alive. */
    char p2[700];
    snprintf(p2, sizeof(p2), "%s/clients/ops.token", dir);
    f = fopen(p2, "w");
    fputs("hvc_ops_0123456789abcdef\n", f);
    fclose(f);
    f = fopen(path, "w");
    fputs("hvc_ci_0123456789abcdef\n", f);
    fclose(f);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_EQ(B.n_clients, 3);
    f = fopen(path, "w"); /* ci.token malformed */
    fputs("password123\n", f);
    fclose(f);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_auth_identify(&B, "hvc_ci_0123456789abcdef", &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&B, "hvc_ops_0123456789abcdef", &c), HV_OK);
    CHECK_EQ(B.n_skipped, 1);
    CHECK_STR(B.skipped[0], "clients/ci.token");
    f = fopen(p2, "w"); /* ops.token emptied */
    fclose(f);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_auth_identify(&B, "hvc_ops_0123456789abcdef", &c), HV_EAUTH);
    CHECK_EQ(B.n_clients, 1); /* the default one */
    CHECK_EQ(B.n_skipped, 2);
    /* at a start too: bad files are left out, the head still starts */
    CHECK_RC(hv_auth_load(&A, dir, NULL, 0, err, sizeof(err)), HV_OK);
    CHECK_EQ(A.n_clients, 1);
    unlink(path);
    unlink(p2);
    CHECK_RC(hv_auth_reload_clients(&B, err, sizeof(err)), HV_OK);
    CHECK_EQ(B.n_skipped, 0);

    char n[HV_CREDS_MAX];
    hv_creds_node(&B.creds, 3, 9, n);
    CHECK_RC(hv_auth_revoke_node(&B, 3, 9), HV_OK);
    CHECK_RC(hv_auth_identify(&B, n, &c), HV_EAUTH);
    /* Revocations are kept in the state database (store_test: revoked_import), not in a file
     * that a load reads. */

    /* a damaged key is an error, not a silent new key */
    snprintf(path, sizeof(path), "%s/auth.key", dir);
    f = fopen(path, "w");
    fputs("nothex\n", f);
    fclose(f);
    CHECK_RC(hv_auth_load(&A, dir, NULL, 0, err, sizeof(err)), HV_ECORRUPT);
    CHECK(strstr(err, "auth.key") != NULL);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

/* The state epoch: the same key with another epoch (a new state.db) accepts none of the old
 * credentials; the legacy epoch "" keeps the MACs of before. */
static void case_epoch(void) {
    setup_key(&A, 5);
    char legacy_w[HV_CREDS_MAX], w[HV_CREDS_MAX], n[HV_CREDS_MAX], i[HV_CREDS_MAX];
    hv_creds_worker(&A.creds, 1, 1, legacy_w);
    CHECK_RC(hv_creds_set_epoch(&A.creds, "0123456789abcdef"), HV_OK);
    hv_creds_worker(&A.creds, 1, 1, w);
    hv_creds_node(&A.creds, 1, 7, n);
    hv_creds_instance(&A.creds, 1, i);
    CHECK(strcmp(w, legacy_w) != 0);
    hv_cred_t c;
    uint64_t id;
    CHECK_RC(hv_auth_identify(&A, w, &c), HV_OK);
    CHECK_RC(hv_auth_identify(&A, legacy_w, &c), HV_EAUTH);
    CHECK_RC(hv_creds_set_epoch(&A.creds, "fedcba9876543210"), HV_OK); /* a new state.db */
    CHECK_RC(hv_auth_identify(&A, w, &c), HV_EAUTH);
    CHECK_RC(hv_auth_identify(&A, n, &c), HV_EAUTH);
    CHECK_EQ(hv_creds_instance_id(&A.creds, i, &id), 0);
    CHECK_RC(hv_creds_set_epoch(&A.creds, ""), HV_OK);
    CHECK_RC(hv_auth_identify(&A, legacy_w, &c), HV_OK);
    CHECK_RC(hv_creds_set_epoch(&A.creds, "a:b"), HV_EINVAL);
    CHECK_RC(hv_creds_set_epoch(&A.creds, "0123456789abcdef0123456789abcdef0"), HV_EINVAL);
}

/* A new join token parses back to what it says, two are different, and a join token is no
 * bearer credential. */
static void case_jtoken(void) {
    char id[HV_JTOKEN_ID_LEN + 1] = "", sha[65] = "", sha2[65] = "";
    char tok[HV_JTOKEN_MAX], tok2[HV_JTOKEN_MAX], nid[HV_JTOKEN_ID_LEN + 1];
    CHECK_RC(hv_auth_jtoken_new(tok, nid, sha), HV_OK);
    CHECK_EQ(hv_creds_jtoken_parse(tok, id, sha2), 1);
    CHECK_STR(id, nid);
    CHECK_STR(sha2, sha);
    CHECK(strstr(sha, tok + 11) == NULL); /* the hash is not the secret */
    CHECK_RC(hv_auth_jtoken_new(tok2, id, sha2), HV_OK);
    CHECK(strcmp(tok, tok2) != 0);
    /* A join token is no bearer credential, nor is an instance's enrollment credential. */
    setup_key(&A, 6);
    hv_cred_t c;
    CHECK_RC(hv_auth_identify(&A, tok, &c), HV_EAUTH);
    char inst[HV_CREDS_MAX];
    hv_creds_instance(&A.creds, 7, inst);
    CHECK_RC(hv_auth_identify(&A, inst, &c), HV_EAUTH);
}

/* Changes are audited whatever their result; reads and the rendezvous are not. */
static void case_audited(void) {
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/Submit"), 1);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/Cancel"), 1);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/DrainNodes"), 1);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Cluster/Join"), 1);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/CreateJoinToken"), 1);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/ListJobs"), 0);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/Upload"), 0);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Rendezvous/JoinRound"), 0);
    CHECK_EQ(hv_auth_audited("/hvpb.v1.Jobs/Submitx"), 0);
    CHECK_EQ(hv_auth_audited(NULL), 0);
}

HV_CHECK_MAIN(NULL, NULL, {"table", case_table}, {"derived", case_derived}, {"revoke", case_revoke},
              {"clients", case_clients}, {"files", case_files}, {"rules", case_rules},
              {"actors", case_actors}, {"epoch", case_epoch}, {"jtoken", case_jtoken},
              {"audited", case_audited})
