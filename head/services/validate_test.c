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
    CHECK_EQ(n, 26); /* every rpc in proto/hv.proto (tests/integration/malformed_rpc.sh counts) */
    for (size_t i = 0; i < n; i++) {
        CHECK(ms[i].path != NULL && ms[i].path[0] == '/' && ms[i].req != NULL);
        for (size_t k = 0; k < i; k++) {
            CHECK(strcmp(ms[i].path, ms[k].path) != 0);
        }
    }
}

/* Report: the silent neighbours are bounded and each says how it fell silent. */
static void case_rdzv_report(void) {
    Hvpb__V1__RdzvReportRequest r = HVPB__V1__RDZV_REPORT_REQUEST__INIT;
    expect(hv_validate_rdzv_report(&r, err, sizeof(err)), HV_OK, "");
    Hvpb__V1__RdzvSilentPeer p[7];
    Hvpb__V1__RdzvSilentPeer *pp[7];
    for (int i = 0; i < 7; i++) {
        p[i] = (Hvpb__V1__RdzvSilentPeer)HVPB__V1__RDZV_SILENT_PEER__INIT;
        p[i].worker_id = (uint64_t)i + 1;
        p[i].how = 1 + (unsigned)(i % 2);
        p[i].silent_ms = 500;
        pp[i] = &p[i];
    }
    r.silent = pp;
    r.n_silent = 6;
    expect(hv_validate_rdzv_report(&r, err, sizeof(err)), HV_OK, "");
    r.n_silent = 7;
    expect(hv_validate_rdzv_report(&r, err, sizeof(err)), HV_EINVAL, "silent:");
    r.n_silent = 2;
    p[1].how = 3;
    expect(hv_validate_rdzv_report(&r, err, sizeof(err)), HV_EINVAL, "silent[1].how:");
}

/* PutState: a chunk inside its copy, the last one flagged and carrying a digest. */
static void case_put_state(void) {
    Hvpb__V1__PutStateRequest r = HVPB__V1__PUT_STATE_REQUEST__INIT;
    uint8_t b[16] = {0};
    r.generation = 1;
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_EINVAL, "total:");
    r.total = 32;
    r.data.data = b;
    r.data.len = sizeof(b);
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_OK, "");
    r.offset = 20;
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_EINVAL, "offset:");
    r.offset = 16;
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_EINVAL, "last:");
    r.last = 1;
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_EINVAL, "sha256:");
    r.sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_OK, "");
    r.generation = 0;
    expect(hv_validate_put_state(&r, err, sizeof(err)), HV_EINVAL, "generation:");
    Hvpb__V1__FetchStateRequest f = HVPB__V1__FETCH_STATE_REQUEST__INIT;
    f.max_bytes = (1u << 20) + 1;
    expect(hv_validate_fetch_state(&f, err, sizeof(err)), HV_EINVAL, "max_bytes:");
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
    /* --workdir's subdirectories: relative paths of plain names, bounded; never above the
     * worker's directory, never a file that is also a directory. */
    f2.name = "pkg/sub/mod.py";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    static const char *const bad_paths[] = {"/etc/passwd", "pkg/../../x", "pkg//m.py", "pkg/",
                                            "./m.py",      "pkg/./m.py",  "..",        ""};
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        f2.name = (char *)bad_paths[i];
        expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    }
    char deep[64] = "";
    for (int i = 0; i <= HV_FILE_PATH_DEPTH_MAX; i++) {
        strcat(deep, i ? "/d" : "d");
    }
    f2.name = deep;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    deep[strlen(deep) - 2] = '\0'; /* HV_FILE_PATH_DEPTH_MAX components */
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    f1.name = "pkg";
    f2.name = "pkg/m.py";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files: 'pkg' is both");
    f1.name = "train/m.py"; /* below the binary's name */
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.files:");
    f1.name = "data.bin";
    f2.name = "more.bin";
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
    /* A node program instead of a shipped binary: a PATH name or an absolute path, bounded,
     * never both; a shipped file may then carry any plain name. */
    spec.command = "python3";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.command: a job runs either");
    spec.binary = NULL;
    f2.name = "train";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.command = "/usr/bin/python3";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.command = "bin/python3";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.command:");
    spec.command = "python3\nrm";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.command:");
    static char longcmd[HV_COMMAND_MAX + 2];
    memset(longcmd, 'p', HV_COMMAND_MAX + 1);
    spec.command = longcmd;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.command:");
    spec.command = "";
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.binary:");
}

static void case_misc(void) {
    Hvpb__V1__ListJobsRequest lj = HVPB__V1__LIST_JOBS_REQUEST__INIT;
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_OK, "");
    lj.limit = HV_LIST_MAX + 1;
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_EINVAL, "limit:");
    lj.limit = 10;
    lj.page_token = "12345";
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_OK, "");
    lj.page_token = "12x";
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_EINVAL, "page_token:");
    lj.page_token = "12345678901234567890";
    expect(hv_validate_list_jobs(&lj, err, sizeof(err)), HV_EINVAL, "page_token:");
    Hvpb__V1__ListNodesRequest ln = HVPB__V1__LIST_NODES_REQUEST__INIT;
    expect(hv_validate_list_nodes(&ln, err, sizeof(err)), HV_OK, "");
    ln.page_size = HV_LIST_MAX + 1;
    expect(hv_validate_list_nodes(&ln, err, sizeof(err)), HV_EINVAL, "page_size:");
    ln.page_size = 5;
    ln.page_token = "-1";
    expect(hv_validate_list_nodes(&ln, err, sizeof(err)), HV_EINVAL, "page_token:");
    Hvpb__V1__ListEventsRequest le = HVPB__V1__LIST_EVENTS_REQUEST__INIT;
    le.limit = 4000000000u;
    expect(hv_validate_list_events(&le, err, sizeof(err)), HV_EINVAL, "limit:");
    le.limit = 20;
    le.actor_id = 3;
    expect(hv_validate_list_events(&le, err, sizeof(err)), HV_OK, "");
    le.job_id = 4;
    expect(hv_validate_list_events(&le, err, sizeof(err)), HV_EINVAL, "job_id and actor_id:");
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
    rj.addr = "10.0.0.1:4000";
    uint64_t broken[7] = {1, 2, 3, 4, 5, 6, 7};
    rj.broken_peers = broken;
    rj.n_broken_peers = 6;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_OK, "");
    rj.n_broken_peers = 7;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "broken_peers:");
    rj.n_broken_peers = 0;
    rj.worker_id = 9;
    uint64_t dead[3] = {4, 5, 6};
    rj.dead_peers = dead;
    rj.n_dead_peers = 2;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_OK, "");
    rj.n_dead_peers = 3; /* a worker watches two ring neighbours */
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "dead_peers: at most 2");
    dead[1] = 9; /* itself */
    rj.n_dead_peers = 2;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "dead_peers[1]: 9");
    dead[1] = 0;
    expect(hv_validate_rdzv_join(&rj, err, sizeof(err)), HV_EINVAL, "dead_peers[1]: 0");
    rj.n_dead_peers = 0;
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

/* A string of n bytes of ch in static storage (one at a time per slot). */
static char *filled(int slot, size_t n, char ch) {
    static char bufs[3][(1u << 20) + 2];
    memset(bufs[slot], ch, n);
    bufs[slot][n] = '\0';
    return bufs[slot];
}

/* The written size bounds: each field at its bound passes, one byte or entry over is refused
 * with a message that names the field, the size and the bound. */
static void case_sizes(void) {
    Hvpb__V1__JoinRequest j = HVPB__V1__JOIN_REQUEST__INIT;
    Hvpb__V1__NodeInfo ni = HVPB__V1__NODE_INFO__INIT;
    j.node = &ni;
    ni.name = "n1";
    ni.slots = 1;
    static Hvpb__V1__KeyValue lab[HV_NODE_LABELS_MAX + 1];
    static Hvpb__V1__KeyValue *labp[HV_NODE_LABELS_MAX + 1];
    for (int i = 0; i <= HV_NODE_LABELS_MAX; i++) {
        hvpb__v1__key_value__init(&lab[i]);
        lab[i].key = filled(0, HV_LABEL_KEY_MAX, 'k');
        lab[i].value = filled(1, HV_LABEL_VALUE_MAX, 'v');
        labp[i] = &lab[i];
    }
    ni.labels = labp;
    ni.n_labels = HV_NODE_LABELS_MAX;
    expect(hv_validate_join(&j, err, sizeof(err)), HV_OK, "");
    ni.n_labels = HV_NODE_LABELS_MAX + 1;
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL,
           "node.labels: 65 entries, at most 64");
    ni.n_labels = 3;
    lab[2].value = filled(2, 60000, 'x');
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL,
           "node.labels[2].value: 60000 bytes, at most 256");
    lab[2].value = "";
    lab[1].key = filled(2, HV_LABEL_KEY_MAX + 1, 'k');
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL,
           "node.labels[1].key: 64 bytes, at most 63");
    lab[1].key = "";
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL, "node.labels[1].key: empty");
    lab[1].key = "zone,x";
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL, "node.labels[1]: 'zone,x'");
    lab[1].key = "zone";
    lab[1].value = "a,b";
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL, "node.labels[1]: 'zone'");
    lab[1].value = "us-east-1a";
    char *addrs[HV_NODE_ADDRS_MAX + 1];
    for (int i = 0; i <= HV_NODE_ADDRS_MAX; i++) {
        addrs[i] = "10.0.0.1";
    }
    ni.addrs = addrs;
    ni.n_addrs = HV_NODE_ADDRS_MAX + 1;
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL, "node.addrs: 65 entries, at most 64");
    ni.n_addrs = 2;
    addrs[1] = filled(2, HV_NODE_ADDR_MAX + 1, 'a');
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL,
           "node.addrs[1]: 256 bytes, at most 255");
    addrs[1] = "10.0.0.2";
    ni.version = filled(2, 5000, 'v');
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL,
           "node.version: 5000 bytes, at most 256");
    ni.version = "1.0";
    ni.instance_id = filled(2, HV_NODE_FIELD_MAX + 1, 'i');
    expect(hv_validate_join(&j, err, sizeof(err)), HV_EINVAL, "node.instance_id: 257 bytes");
    ni.instance_id = "i-1";
    expect(hv_validate_join(&j, err, sizeof(err)), HV_OK, "");

    Hvpb__V1__UploadChunk u = HVPB__V1__UPLOAD_CHUNK__INIT;
    u.digest = D64;
    u.total_size = 64u << 20;
    u.data.len = HV_UPLOAD_CHUNK_MAX;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_OK, "");
    u.data.len = 8u << 20;
    expect(hv_validate_upload(&u, err, sizeof(err)), HV_EINVAL,
           "data: a chunk of 8388608 bytes, at most 1048576");

    Hvpb__V1__SubmitRequest r = HVPB__V1__SUBMIT_REQUEST__INIT;
    Hvpb__V1__JobSpec spec = HVPB__V1__JOB_SPEC__INIT;
    Hvpb__V1__FileRef bin = HVPB__V1__FILE_REF__INIT;
    r.spec = &spec;
    spec.binary = &bin;
    bin.name = "train";
    bin.digest = D64;
    spec.name = filled(0, HV_JOB_NAME_MAX, 'n');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.name = filled(0, 1u << 20, 'n');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.name: 1048576 bytes, at most 256");
    spec.name = "job";
    spec.user = filled(0, HV_JOB_NAME_MAX + 1, 'u');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.user: 257 bytes");
    spec.user = "me";
    /* 50,000 entries are refused on the count, before any is looked at. */
    enum { MANY = 50000 };
    static Hvpb__V1__KeyValue env[MANY];
    static Hvpb__V1__KeyValue *envp[MANY];
    for (int i = 0; i < MANY; i++) {
        hvpb__v1__key_value__init(&env[i]);
        env[i].key = "K";
        env[i].value = "v";
        envp[i] = &env[i];
    }
    spec.env = envp;
    spec.n_env = MANY;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.env: 50000 entries, at most 4096");
    spec.n_env = HV_SUBMIT_MAX_ENV;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.n_env = 8;
    env[7].value = filled(1, HV_ENV_VALUE_MAX + 1, 'v');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.env[7].value: K: 65537 bytes, at most 65536");
    env[7].value = filled(1, HV_ENV_VALUE_MAX, 'v');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    env[7].key = filled(2, HV_ENV_KEY_MAX + 1, 'K');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.env[7].key: 257 bytes, at most 256");
    env[7].key = "K";
    /* 17 values of 64 KiB are over 1 MiB in all. */
    for (int i = 0; i < 17; i++) {
        env[i].value = filled(1, HV_ENV_VALUE_MAX, 'v');
    }
    spec.n_env = 17;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL, "spec.env: 1114129 bytes in all");
    spec.n_env = 0;
    char *args[HV_SUBMIT_MAX_ARGS + 1];
    for (int i = 0; i <= HV_SUBMIT_MAX_ARGS; i++) {
        args[i] = "a";
    }
    spec.args = args;
    spec.n_args = HV_SUBMIT_MAX_ARGS;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_OK, "");
    spec.n_args = HV_SUBMIT_MAX_ARGS + 1;
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.args: 4097 arguments, at most 4096");
    spec.n_args = 2;
    args[0] = filled(0, HV_SUBMIT_ARGS_BYTES, 'a');
    expect(hv_validate_submit(&r, err, sizeof(err)), HV_EINVAL,
           "spec.args: 1048577 bytes in all, at most 1048576");
    spec.n_args = 0;

    Hvpb__V1__NodeDrainRequest nd = HVPB__V1__NODE_DRAIN_REQUEST__INIT;
    nd.node = "n1";
    nd.reason = filled(0, HV_REASON_MAX, 'r');
    expect(hv_validate_node_drain(&nd, err, sizeof(err)), HV_OK, "");
    nd.reason = filled(0, HV_REASON_MAX + 1, 'r');
    expect(hv_validate_node_drain(&nd, err, sizeof(err)), HV_EINVAL,
           "reason: 1025 bytes, at most 1024");
    Hvpb__V1__NodesDrainRequest nds = HVPB__V1__NODES_DRAIN_REQUEST__INIT;
    char *names[1] = {"n1"};
    nds.nodes = names;
    nds.n_nodes = 1;
    nds.reason = nd.reason;
    expect(hv_validate_nodes_drain(&nds, err, sizeof(err)), HV_EINVAL, "reason: 1025 bytes");
}

/* Strings that are not UTF-8 text, at every depth, are refused naming the field; text (accents,
 * emoji) passes; the repair turns each bad byte into '?'. */
static void case_utf8(void) {
    Hvpb__V1__KeyValue env[2] = {HVPB__V1__KEY_VALUE__INIT, HVPB__V1__KEY_VALUE__INIT};
    Hvpb__V1__KeyValue *envp[2] = {&env[0], &env[1]};
    char *args[3] = {"d\xc3\xa9j\xc3\xa0", "\xf0\x9f\x98\x80", "ok"};
    Hvpb__V1__FileRef bin = HVPB__V1__FILE_REF__INIT;
    Hvpb__V1__JobSpec spec = HVPB__V1__JOB_SPEC__INIT;
    Hvpb__V1__SubmitRequest r = HVPB__V1__SUBMIT_REQUEST__INIT;
    env[0].key = "A";
    env[0].value = "\xe2\x82\xac";
    env[1].key = "B";
    env[1].value = "b";
    bin.name = "train";
    spec.name = "caf\xc3\xa9";
    spec.binary = &bin;
    spec.env = envp;
    spec.n_env = 2;
    spec.args = args;
    spec.n_args = 3;
    r.spec = &spec;
    expect(hv_validate_utf8(&r.base, err, sizeof(err)), HV_OK, "");
    const struct {
        char **at;
        const char *bad, *field;
    } rows[] = {
        {&spec.name, "job\xff", "spec.name: not UTF-8 text (byte 0xff at offset 3 of 4)"},
        {&spec.user, "\xc3(", "spec.user: not UTF-8 text (byte 0xc3 at offset 0 of 2)"},
        {&spec.namespace_, "ns\xed\xa0\x80", "spec.namespace: not UTF-8 text (byte 0xed"},
        {&spec.command, "\xc0\xaf", "spec.command: not UTF-8 text"},
        {&env[1].key, "B\x80", "spec.env[1].key: not UTF-8 text (byte 0x80 at offset 1 of 2)"},
        {&env[0].value, "\xf4\x90\x80\x80", "spec.env[0].value: not UTF-8 text"},
        {&args[2],
         "a\xfe"
         "b",
         "spec.args[2]: not UTF-8 text (byte 0xfe at offset 1 of 3)"},
        {&bin.name, "t\xe2\x82", "spec.binary.name: not UTF-8 text"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *keep = *rows[i].at;
        *rows[i].at = (char *)rows[i].bad;
        expect(hv_validate_utf8(&r.base, err, sizeof(err)), HV_EINVAL, rows[i].field);
        *rows[i].at = keep;
    }
    /* A oneof: only the member that is set is read. */
    Hvpb__V1__LogLines log = HVPB__V1__LOG_LINES__INIT;
    char *lines[2] = {"fine", "bin\xff\xfery"};
    log.lines = lines;
    log.n_lines = 2;
    Hvpb__V1__AgentMsg am = HVPB__V1__AGENT_MSG__INIT;
    am.body_case = HVPB__V1__AGENT_MSG__BODY_LOG;
    am.log = &log;
    expect(hv_validate_utf8(&am.base, err, sizeof(err)), HV_EINVAL,
           "log.lines[1]: not UTF-8 text (byte 0xff at offset 3 of 7)");
    char fixed[] = "bin\xff\xfery", where[200];
    lines[1] = fixed;
    CHECK_EQ(hv_validate_utf8_repair(&am.base, where, sizeof(where)), 2);
    CHECK_STR(fixed, "bin??ry");
    CHECK_HAS(where, "log.lines[1]: not UTF-8 text");
    expect(hv_validate_utf8(&am.base, err, sizeof(err)), HV_OK, "");
    CHECK_EQ(hv_validate_utf8_repair(&am.base, where, sizeof(where)), 0);
    CHECK_STR(where, "");
}

/* Every string field of every request of every service is walked: set to bytes that are not
 * UTF-8, each one alone is refused by its name, with nothing written here for it. */
static void case_utf8_every_field(void) {
    const ProtobufCServiceDescriptor *svcs[] = {
        &hvpb__v1__cluster__descriptor, &hvpb__v1__jobs__descriptor,
        &hvpb__v1__rendezvous__descriptor, &hvpb__v1__actors__descriptor};
    size_t fields = 0;
    for (size_t s = 0; s < sizeof(svcs) / sizeof(svcs[0]); s++) {
        for (unsigned k = 0; k < svcs[s]->n_methods; k++) {
            const ProtobufCMessageDescriptor *d = svcs[s]->methods[k].input;
            for (unsigned f = 0; f < d->n_fields; f++) {
                const ProtobufCFieldDescriptor *fd = &d->fields[f];
                if (fd->type != PROTOBUF_C_TYPE_STRING || fd->label == PROTOBUF_C_LABEL_REPEATED ||
                    (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
                    continue;
                }
                union {
                    ProtobufCMessage m;
                    char room[4096];
                } u;
                CHECK(d->sizeof_message <= sizeof(u.room));
                d->message_init(&u.m);
                *(const char **)((char *)&u.m + fd->offset) = "x\xffy";
                char want[200];
                snprintf(want, sizeof(want), "%s: not UTF-8 text (byte 0xff at offset 1 of 3)",
                         fd->name);
                expect(hv_validate_utf8(&u.m, err, sizeof(err)), HV_EINVAL, want);
                fields++;
            }
        }
    }
    CHECK(fields >= 20);
}

HV_CHECK_MAIN(NULL, NULL, {"table", case_table}, {"put_state", case_put_state}, {"join", case_join},
              {"rdzv_report", case_rdzv_report}, {"artifacts", case_artifacts},
              {"submit", case_submit}, {"misc", case_misc}, {"sizes", case_sizes},
              {"utf8", case_utf8}, {"utf8_every_field", case_utf8_every_field})
