/*
 * validate_test: every service method has a check entry (the table matches proto/hv.proto's
 * count), and each check accepts a good request and refuses bad ones with a message naming the
 * field. `validate_test <case>` runs one case.
 */
#include <string.h>

#include "hv_check.h"
#include "validate.h"

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char err[512];

/* rc must be want; for HV_EINVAL err must start with field. */
static void expect(hv_err rc, hv_err want, const char *field) {
    CHECK_RC(rc, want);
    if (want == HV_EINVAL && strncmp(err, field, strlen(field)) != 0) {
        fprintf(stderr, "message '%s' does not start with '%s'\n", err, field);
        hv_check_failures++;
    }
}

static void case_table(void) {
    size_t n = 0;
    const hv_validate_method_t *ms = hv_validate_methods(&n);
    CHECK_EQ(n, 22); /* every rpc in proto/hv.proto (tests/integration/malformed_rpc.sh counts) */
    for (size_t i = 0; i < n; i++) {
        CHECK(ms[i].path != NULL && ms[i].path[0] == '/' && ms[i].req != NULL);
        for (size_t k = 0; k < i; k++) {
            CHECK(strcmp(ms[i].path, ms[k].path) != 0);
        }
    }
}

static void case_join(void) {
    Hvpb__V1__JoinRequest r = HVPB__V1__JOIN_REQUEST__INIT;
    Hvpb__V1__NodeInfo ni = HVPB__V1__NODE_INFO__INIT;
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node:");
    r.node = &ni;
    ni.name = "";
    ni.slots = 2;
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.name:");
    ni.name = "bad name";
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.name:");
    ni.name = "bad\nname";
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.name:");
    char longname[200];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ni.name = longname;
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.name:");
    CHECK(strstr(err, "...") != NULL); /* a long value is clipped in the message */
    ni.name = "node-a.zone_1";
    expect(hv_validate_join(&r, err, sizeof(err)), HV_OK, "");
    ni.slots = 0;
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.slots:");
    ni.slots = 4097;
    expect(hv_validate_join(&r, err, sizeof(err)), HV_EINVAL, "node.slots:");
}

static void case_artifacts(void) {
    Hvpb__V1__UploadChunk u = HVPB__V1__UPLOAD_CHUNK__INIT;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_EINVAL, "digest:");
    u.digest = D64;
    u.total_size = 10;
    u.offset = 4;
    u.data.len = 6;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_OK, "");
    u.data.len = 7;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_EINVAL, "offset:");
    u.offset = UINT64_MAX - 2; /* no overflow past the check */
    u.data.len = 5;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_EINVAL, "offset:");
    Hvpb__V1__StatArtifactRequest s = HVPB__V1__STAT_ARTIFACT_REQUEST__INIT;
    s.digest = D64 "0";
    expect(hv_validate_stat_artifact(&s, err, sizeof(err)), HV_EINVAL, "digest:");
    Hvpb__V1__FetchRequest f = HVPB__V1__FETCH_REQUEST__INIT;
    f.digest = "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef";
    expect(hv_validate_fetch(&f, err, sizeof(err)), HV_EINVAL, "digest:");
}

static void case_submit(void) {
    Hvpb__V1__SubmitRequest r = HVPB__V1__SUBMIT_REQUEST__INIT;
    Hvpb__V1__JobSpec spec = HVPB__V1__JOB_SPEC__INIT;
    Hvpb__V1__FileRef bin = HVPB__V1__FILE_REF__INIT, f1 = HVPB__V1__FILE_REF__INIT,
                      f2 = HVPB__V1__FILE_REF__INIT;
    Hvpb__V1__KeyValue kv = HVPB__V1__KEY_VALUE__INIT;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.binary:");
    r.spec = &spec;
    spec.binary = &bin;
    bin.name = "../train";
    bin.digest = D64;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.binary.name:");
    bin.name = "train";
    bin.digest = "abc";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.binary.digest:");
    bin.digest = D64;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    Hvpb__V1__FileRef *files[2] = {&f1, &f2};
    f1.name = "data.bin";
    f1.digest = D64;
    f2.name = "data.bin";
    f2.digest = D64;
    spec.files = files;
    spec.n_files = 2;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    f2.name = "train";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    f2.name = "more.bin";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.n_files = HV_SUBMIT_MAX_FILES + 1;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    spec.n_files = 2;
    Hvpb__V1__KeyValue *env[1] = {&kv};
    kv.key = "A=B";
    kv.value = "x";
    spec.env = env;
    spec.n_env = 1;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.env:");
    kv.key = "A";
    spec.cooldown_set = 1;
    spec.cooldown_min_s = 10;
    spec.cooldown_max_s = 5;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.cooldown:");
    spec.cooldown_max_s = 10;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
}

static void case_misc(void) {
    Hvpb__V1__ListJobsRequest lj = HVPB__V1__LIST_JOBS_REQUEST__INIT;
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_OK, "");
    lj.limit = HV_LIST_MAX + 1;
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_EINVAL, "limit:");
    Hvpb__V1__ListEventsRequest le = HVPB__V1__LIST_EVENTS_REQUEST__INIT;
    le.limit = 4000000000u;
    expect(hv_validate_list_events(&le, err, sizeof(err)), HV_EINVAL, "limit:");
    Hvpb__V1__NodeDrainRequest nd = HVPB__V1__NODE_DRAIN_REQUEST__INIT;
    expect(hv_validate_node_drain(&nd, err, sizeof(err)), HV_EINVAL, "node:");
    nd.node = "7";
    expect(hv_validate_node_drain(&nd, err, sizeof(err)), HV_OK, "");
    Hvpb__V1__NodesDrainRequest nds = HVPB__V1__NODES_DRAIN_REQUEST__INIT;
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_EINVAL, "nodes: expected 1 to 64");
    char *names[HV_DRAIN_NODES_MAX + 1];
    char bufs[HV_DRAIN_NODES_MAX + 1][16];
    for (int i = 0; i <= HV_DRAIN_NODES_MAX; i++) {
        snprintf(bufs[i], sizeof(bufs[i]), "n%d", i);
        names[i] = bufs[i];
    }
    nds.nodes = names;
    nds.n_nodes = 3;
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_OK, "");
    nds.n_nodes = HV_DRAIN_NODES_MAX + 1;
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_EINVAL,
           "nodes: expected 1 to 64 nodes, got 65");
    nds.n_nodes = 3;
    names[2] = bufs[0];
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_EINVAL,
           "nodes[2]: 'n0' is named twice");
    names[2] = "";
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_EINVAL, "nodes[2]: '' must be");
    Hvpb__V1__RdzvJoinRequest rj = HVPB__V1__RDZV_JOIN_REQUEST__INIT;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_OK, ""); /* no data address */
    rj.addr = "10.0.0.1:4000";
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_OK, "");
    rj.addr = "[fd00::1]:4000";
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_OK, "");
    rj.addr = "fd00::1:4000"; /* IPv6 without brackets is ambiguous */
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "addr:");
    rj.addr = "nohost";
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "addr:");
    Hvpb__V1__KvPutRequest kp = HVPB__V1__KV_PUT_REQUEST__INIT;
    expect(hv_validate_kv_put(&kp, err, sizeof(err)), HV_EINVAL, "key:");
    kp.key = "k";
    kp.value.len = HV_KV_MAX_VALUE + 1;
    expect(hv_validate_kv_put(&kp, err, sizeof(err)), HV_EINVAL, "value:");
    kp.value.len = HV_KV_MAX_VALUE;
    expect(hv_validate_kv_put(&kp, err, sizeof(err)), HV_OK, "");
    Hvpb__V1__KvGetRequest kg = HVPB__V1__KV_GET_REQUEST__INIT;
    char longkey[HV_KV_MAX_KEY + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    kg.key = longkey;
    expect(hv_validate_kv_get(&kg, err, sizeof(err)), HV_EINVAL, "key:");
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"table", case_table},   {"join", case_join}, {"artifacts", case_artifacts},
        {"submit", case_submit}, {"misc", case_misc},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
