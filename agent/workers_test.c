/*
 * workers_test: spawn orders through agent/workers.c with real processes. Artifacts are put into
 * the cache directory by digest beforehand (a cache without a head serves them), except in the
 * case that needs a download in flight, which uses a Fetch server that never answers. Checks what
 * a worker and an operator see: the directory layout, files and modes, the HV_* environment
 * (and no join token), arguments, one exit report per order with a clear reason for fetch and
 * spawn failures, kills with grace, refusing new work while shutting down, and a kill while
 * the binary is still downloading; private job directories removed after the exit; a worker
 * that rewrites its files leaves the cache as it was; 50,000
 * --env entries spawned in linear time; orders beyond the agent's bounds refused; an actor's
 * call figures read from its file every second and once more, final, before its exit; with a
 * cache bound smaller than a job's files, the worker still gets them (pinned until placed) and
 * no pin outlives a placement or a failed fetch.
 * `workers_test <case>` runs one case.
 */
#include "workers.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_test.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#define MAX_LINES 256

static uv_loop_t loop;
static char top[256], work[300], cache_dir[400];
static hv_artifact_cache_t *cache;
static hv_workers_t *wt;

/* What the callbacks saw. */
static int started, exited, nlines;
static uint64_t started_id, exited_id;
static int started_pid, exit_code, term_signal;
static char exit_reason[512];
static char *lines[MAX_LINES];

/* Call figures reported: how many, the last ones, how many were final, and how many had come
 * when the exit was reported. */
static int nfigs, nfigs_final, figs_at_exit;
static hv_callfig_t last_figs;

static void on_started(uint64_t id, int pid, void *ud) {
    (void)ud;
    started++;
    started_id = id;
    started_pid = pid;
}

static void on_exited(uint64_t id, int code, int sig, const char *reason, void *ud) {
    (void)ud;
    exited++;
    exited_id = id;
    exit_code = code;
    term_signal = sig;
    figs_at_exit = nfigs;
    snprintf(exit_reason, sizeof(exit_reason), "%s", reason);
}

static int figs_refuse; /* running reports to refuse (the session could not take them) */
static hv_err on_figures(uint64_t id, const hv_callfig_t *f, int final, void *ud) {
    (void)id;
    (void)ud;
    if (!final && figs_refuse > 0) {
        figs_refuse--;
        nfigs++;
        return HV_EUNAVAIL;
    }
    nfigs++;
    nfigs_final += final;
    last_figs = *f;
    return HV_OK;
}

static void on_line(uint64_t id, int stream, const char *line, size_t len, void *ud) {
    (void)id;
    (void)stream;
    (void)ud;
    if (nlines < MAX_LINES) {
        lines[nlines] = hv_strndup(line, len);
    }
    nlines++;
}

/* The value of "KEY=value" among the received lines, or NULL. */
/* A KEY=value line the worker printed, and the value it should have. */
typedef struct line_want_s {
    const char *name, *want;
} line_want_t;

static const char *line_value(const char *key) {
    size_t k = strlen(key);
    for (int i = 0; i < nlines && i < MAX_LINES; i++) {
        if (strncmp(lines[i], key, k) == 0 && lines[i][k] == '=') {
            return lines[i] + k + 1;
        }
    }
    return NULL;
}

/* Stores content in the cache under its digest (hex written to digest). */
static void put_artifact(const char *content, char digest[65]) {
    hv_sha256_hex_of(content, strlen(content), digest);
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", cache_dir, digest);
    CHECK_RC(hv_write_file_atomic(path, content, strlen(content), 0755), HV_OK);
    chmod(path, 0755);
}

static void setup_with(hv_rpc_engine_t *e, hv_rpc_channel_t *ch) {
    snprintf(top, sizeof(top), "/tmp/hv-workers-test-%d", (int)getpid());
    snprintf(work, sizeof(work), "%s/work", top);
    snprintf(cache_dir, sizeof(cache_dir), "%s/cache", work);
    CHECK_RC(hv_mkdirs(cache_dir, 0755), HV_OK);
    CHECK_RC(hv_artifact_cache_create(&loop, e, ch, cache_dir, "tok", &cache), HV_OK);
    hv_workers_config_t cfg = {
        .work_dir = work, .node_name = "node-x", .ca_file = "/etc/hv/tls/ca.pem"};
    hv_workers_cbs_t cbs = {.on_started = on_started,
                            .on_exited = on_exited,
                            .on_line = on_line,
                            .on_figures = on_figures};
    CHECK_RC(hv_workers_create(&loop, &cfg, cache, &cbs, &wt), HV_OK);
    started = exited = nlines = nfigs = nfigs_final = figs_at_exit = 0;
    exit_reason[0] = '\0';
}

static void setup(void) {
    uv_loop_init(&loop);
    setup_with(NULL, NULL);
}

static void teardown(void) {
    hv_artifact_cache_stop(cache);
    hv_workers_destroy(wt);
    hv_artifact_cache_destroy(cache);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    for (int i = 0; i < nlines && i < MAX_LINES; i++) {
        hv_free(lines[i]);
    }
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    CHECK_EQ(system(cmd), 0);
}

/* A spawn order for the given binary digest, with sensible defaults. */
typedef struct order_s {
    Hvpb__V1__SpawnWorker sp;
    Hvpb__V1__FileRef bin;
    Hvpb__V1__FileRef file;
    Hvpb__V1__FileRef *files[1];
    Hvpb__V1__KeyValue kv;
    Hvpb__V1__KeyValue *env[1];
    char *args[2];
    uint32_t gpus[2];
    char digest[65]; /* order_script: the binary's */
} order_t;

static void order_init(order_t *o, uint64_t worker_id, const char *digest, const char *name) {
    Hvpb__V1__SpawnWorker sp = HVPB__V1__SPAWN_WORKER__INIT;
    Hvpb__V1__FileRef f = HVPB__V1__FILE_REF__INIT;
    Hvpb__V1__KeyValue kv = HVPB__V1__KEY_VALUE__INIT;
    memset(o, 0, sizeof(*o));
    o->sp = sp;
    o->bin = f;
    o->file = f;
    o->kv = kv;
    o->bin.name = (char *)name;
    o->bin.digest = (char *)digest;
    o->sp.worker_id = worker_id;
    o->sp.job_id = 7;
    o->sp.rank = 3;
    o->sp.size = 4;
    o->sp.local_rank = 1;
    o->sp.local_size = 2;
    o->sp.generation = 2;
    o->sp.head_addr = "10.1.2.3:7000";
    o->sp.binary = &o->bin;
}

/* An order of the script (stored in the cache) as its binary, named name. */
static void order_script(order_t *o, uint64_t worker_id, const char *script, const char *name) {
    order_init(o, worker_id, o->digest, name);
    put_artifact(script, o->digest);
}

/* The order ships one file (mode 0: the default) into the worker's directory. */
static void order_file(order_t *o, const char *name, const char *digest, uint32_t mode) {
    o->file.name = (char *)name;
    o->file.digest = (char *)digest;
    o->file.mode = mode;
    o->files[0] = &o->file;
    o->sp.files = o->files;
    o->sp.n_files = 1;
}

/* The order's arguments: a0, and a1 unless NULL. */
static void order_args(order_t *o, const char *a0, const char *a1) {
    o->args[0] = (char *)a0;
    o->args[1] = (char *)a1;
    o->sp.args = o->args;
    o->sp.n_args = a1 != NULL ? 2 : 1;
}

static void case_layout_env(void) {
    setup();
    char bin[65], data[65];
    put_artifact("#!/bin/sh\n"
                 "echo PWD=$(pwd)\n"
                 "for v in HV_HEAD HV_JOB_ID HV_WORKER_ID HV_RANK HV_SIZE HV_LOCAL_RANK "
                 "HV_LOCAL_SIZE HV_GENERATION HV_NODE HV_CA_FILE CUDA_VISIBLE_DEVICES FOO "
                 "RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE; do\n"
                 "  eval echo $v=\\$$v\ndone\n"
                 "echo TOKEN=${HV_TOKEN-unset}\n"
                 "echo ARGS=\"$*\"\n"
                 "echo DATA=$(cat sub/in/data.txt)\n"
                 "echo MODE=$(stat -c %a sub/in/data.txt)\n"
                 "echo SUBMODE=$(stat -c %a sub/in)\n"
                 "echo BINMODE=$(stat -c %a train.sh)\n"
                 "echo DIRMODE=$(stat -c %a .)\n"
                 "echo PARENTMODE=$(stat -c %a ..)\n"
                 "exit 4\n",
                 bin);
    put_artifact("payload\n", data);
    setenv("HV_TOKEN", "secret", 1);
    setenv("HV_CA_FILE", "/inherited/ca.pem", 1); // the agent's own CA setting wins
    order_t o;
    order_init(&o, 42, bin, "train.sh");
    // hvsubmit --workdir's subdirectories: made on the way
    order_file(&o, "sub/in/data.txt", data, 0600);
    o.kv.key = "FOO";
    o.kv.value = "bar baz";
    o.env[0] = &o.kv;
    o.sp.env = o.env;
    o.sp.n_env = 1;
    order_args(&o, "--epochs", "3");
    o.gpus[0] = 1;
    o.gpus[1] = 3;
    o.sp.gpus = o.gpus;
    o.sp.n_gpus = 2;
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(hv_workers_count(wt), 1);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    unsetenv("HV_TOKEN");
    unsetenv("HV_CA_FILE");
    CHECK_EQ(started, 1);
    CHECK_EQ(started_id, 42);
    CHECK(started_pid > 0);
    CHECK_EQ(exited_id, 42);
    CHECK_EQ(exit_code, 4);
    CHECK_EQ(term_signal, 0);
    CHECK_STR(exit_reason, "");
    CHECK_EQ(hv_workers_count(wt), 0);
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/jobs/7/w42", work);
    CHECK_STR(line_value("PWD"), dir);
    // What the worker saw: its environment, arguments, files and modes.
    static const line_want_t seen[] = {
        {"HV_HEAD", "10.1.2.3:7000"},
        {"HV_JOB_ID", "7"},
        {"HV_WORKER_ID", "42"},
        {"HV_RANK", "3"},
        {"HV_SIZE", "4"},
        {"HV_LOCAL_RANK", "1"},
        {"HV_LOCAL_SIZE", "2"},
        {"RANK", "3"}, // torchrun's names, for DDP scripts
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"HV_GENERATION", "2"},
        {"HV_NODE", "node-x"},
        {"HV_CA_FILE", "/etc/hv/tls/ca.pem"}, // libhv verifies the head with it
        {"CUDA_VISIBLE_DEVICES", "1,3"},
        {"FOO", "bar baz"},
        {"TOKEN", "unset"},
        {"ARGS", "--epochs 3"},
        {"DATA", "payload"},
        {"MODE", "600"},
        {"SUBMODE", "755"},
        {"BINMODE", "700"}, // private copies: the owner's bits only
        {"DIRMODE", "700"},
        {"PARENTMODE", "711"}, // reachable, not listable
    };
    for (size_t i = 0; i < sizeof(seen) / sizeof(seen[0]); i++) {
        const char *got = line_value(seen[i].name);
        if (got == NULL || strcmp(got, seen[i].want) != 0) {
            fprintf(stderr, "  %s\n", seen[i].name);
        }
        CHECK_STR(got, seen[i].want);
    }
    // The directory goes once the exit is reported (on the thread pool: wait for it).
    snprintf(dir, sizeof(dir), "%s/jobs/7", work);
    for (int i = 0; i < 200 && access(dir, F_OK) == 0; i++) {
        test_run_for(&loop, 10);
    }
    CHECK(access(dir, F_OK) != 0);
    teardown();
}

/* Spawns the order, which ends (within 5 s) without a process: exit code -1, no signal. */
static void spawn_never_started(order_t *o) {
    hv_workers_spawn(wt, &o->sp);
    CHECK(test_run_until(&loop, &exited, 1, 5000));
    CHECK_EQ(started, 0);
    CHECK_EQ(exit_code, -1);
    CHECK_EQ(term_signal, 0);
}

static void case_fetch_failed(void) {
    setup();
    order_t o;
    order_init(&o, 5, "ab00000000000000000000000000000000000000000000000000000000000000", "train");
    spawn_never_started(&o);
    CHECK(strncmp(exit_reason, "fetch failed: ", 14) == 0);
    fprintf(stderr, "  reason: %s\n", exit_reason);
    teardown();
}

static void case_bad_names(void) {
    setup();
    char bin[65];
    put_artifact("#!/bin/sh\nexit 0\n", bin);
    const char *bad[] = {"../evil", "a/../b", "/abs", "a//b", "a/", "./a", "..", ""};
    for (int i = 0; i < 8; i++) {
        order_t o;
        order_init(&o, 10 + (uint64_t)i, bin, "ok");
        order_file(&o, bad[i], bin, 0);
        int before = exited;
        hv_workers_spawn(wt, &o.sp);
        CHECK_EQ(exited, before + 1); // at once
        CHECK(strstr(exit_reason, "spawn failed: bad file name") != NULL);
    }
    order_t o;
    order_init(&o, 20, bin, "../bin");
    hv_workers_spawn(wt, &o.sp);
    CHECK(strstr(exit_reason, "spawn failed: bad binary name") != NULL);
    CHECK_EQ(started, 0);
    CHECK_EQ(hv_workers_count(wt), 0);
    teardown();
}

static void case_spawn_failed(void) {
    setup();
    // A script whose interpreter does not exist: exec fails with ENOENT.
    order_t o;
    order_script(&o, 6, "#!/nonexistent/interpreter\n", "prog");
    spawn_never_started(&o);
    CHECK_STR(exit_reason, "spawn failed: No such file or directory");
    teardown();
}

/* A node program instead of a shipped binary (hvsubmit -- python3 train.py): the agent runs the
 * command from PATH in the worker's directory with the shipped script, the hv package first on
 * PYTHONPATH; a command the node lacks fails naming the node and the command; a relative path
 * with '/' or a binary beside the command is refused. */
static void case_command(void) {
    setup();
    char script[65];
    put_artifact("echo PWD=$(pwd)\necho ARGS=\"$*\"\necho PYTHONPATH=$PYTHONPATH\nexit 5\n",
                 script);
    setenv("PYTHONPATH", "/user/lib", 1);
    order_t o;
    order_init(&o, 30, script, "unused");
    o.sp.binary = NULL;
    o.sp.command = "sh";
    order_file(&o, "job.sh", script, 0);
    order_args(&o, "job.sh", "--lr=0.1");
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    unsetenv("PYTHONPATH");
    CHECK_EQ(started, 1);
    CHECK_EQ(exit_code, 5);
    CHECK_STR(exit_reason, "");
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/jobs/7/w30", work);
    CHECK_STR(line_value("PWD"), dir);
    CHECK_STR(line_value("ARGS"), "--lr=0.1");
    const char *pp = line_value("PYTHONPATH");
    CHECK(pp != NULL && strstr(pp, "/python:/user/lib") != NULL); // build/python, then the user's

    order_init(&o, 31, script, "unused");
    o.sp.binary = NULL;
    o.sp.command = "hv-no-such-command";
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &exited, 2, 10000));
    CHECK_EQ(exit_code, -1);
    CHECK_STR(exit_reason, "spawn failed: node node-x has no 'hv-no-such-command' on PATH");

    order_init(&o, 32, script, "unused");
    o.sp.binary = NULL;
    o.sp.command = "bin/python3";
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(exited, 3); // at once
    CHECK(strstr(exit_reason, "spawn failed: bad command") != NULL);
    order_init(&o, 33, script, "prog");
    o.sp.command = "python3";
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(exited, 4);
    CHECK_STR(exit_reason, "spawn failed: an order with both a binary and a command");
    CHECK_EQ(hv_workers_count(wt), 0);
    teardown();
}

/* An order for an actor's process that runs the shell script artifact (its digest) with sh. */
static void actor_script_order(order_t *o, uint64_t id, const char *script) {
    order_init(o, id, script, "actor.sh");
    o->sp.binary = NULL;
    o->sp.command = "sh";
    o->file.name = "actor.sh";
    o->file.digest = (char *)script;
    o->files[0] = &o->file;
    o->sp.files = o->files;
    o->sp.n_files = 1;
    o->args[0] = "actor.sh";
    o->sp.args = o->args;
    o->sp.n_args = 1;
    o->sp.actor_secret = "s3cret-s3cret-s3cret";
}

/* An actor's process gets HV_ACTOR_FIGURES_OUT in its directory; what it writes there is read
 * every second and reported when it changed, and once more, final, just before its exit. */
static void case_actor_figures(void) {
    setup();
    char script[65];
    put_artifact("Z='0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0'\n"
                 "echo FIG=$HV_ACTOR_FIGURES_OUT\n"
                 "printf 'hv-callfig 1 2 0 6 6 3000 2 %s\\n' \"$Z\" >\"$HV_ACTOR_FIGURES_OUT.t\"\n"
                 "mv \"$HV_ACTOR_FIGURES_OUT.t\" \"$HV_ACTOR_FIGURES_OUT\"\n"
                 "sleep 1.6\n"
                 "printf 'hv-callfig 1 3 1 9 9 5000 4 %s\\n' \"$Z\" >\"$HV_ACTOR_FIGURES_OUT.t\"\n"
                 "mv \"$HV_ACTOR_FIGURES_OUT.t\" \"$HV_ACTOR_FIGURES_OUT\"\n",
                 script);
    order_t o;
    actor_script_order(&o, 40, script);
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    CHECK_EQ(exit_code, 0);
    char want[600];
    snprintf(want, sizeof(want), "%s/jobs/7/w40/hv-actor-figures", work);
    CHECK_STR(line_value("FIG"), want);
    CHECK_EQ(nfigs, 2); // the first line at the 1 s read, then the last one at the exit
    CHECK_EQ(nfigs_final, 1);
    CHECK_EQ(figs_at_exit, 2); // before the exit was reported
    CHECK_EQ(last_figs.ok, 3);
    CHECK_EQ(last_figs.error, 1);
    CHECK_EQ(last_figs.bytes_in, 9);
    CHECK_EQ(last_figs.buckets[0], 4);
    teardown();
}

/* A report the session could not take is offered again at the next read, unchanged figures
 * or not (a lost one is not made good by a later one when the actor is idle). */
static void case_actor_figures_retry(void) {
    setup();
    char script[65];
    put_artifact("Z='0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0'\n"
                 "printf 'hv-callfig 1 2 0 6 6 3000 2 %s\\n' \"$Z\" >\"$HV_ACTOR_FIGURES_OUT.t\"\n"
                 "mv \"$HV_ACTOR_FIGURES_OUT.t\" \"$HV_ACTOR_FIGURES_OUT\"\n"
                 "sleep 3.5\n",
                 script);
    order_t o;
    actor_script_order(&o, 41, script);
    figs_refuse = 1;
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    /* Refused at the first read, offered again (taken) at the next, not at the third (taken
     * and unchanged), then the final one at the exit. */
    CHECK_EQ(nfigs, 3);
    CHECK_EQ(nfigs_final, 1);
    CHECK_EQ(last_figs.ok, 2);
    figs_refuse = 0;
    teardown();
}

static void case_kill_and_refuse(void) {
    setup();
    char bin[65];
    put_artifact("#!/bin/sh\necho up\nsleep 30\n", bin);
    order_t o;
    order_init(&o, 8, bin, "sleepy");
    hv_workers_spawn(wt, &o.sp);
    hv_workers_spawn(wt, &o.sp); // a repeat is ignored
    CHECK(test_run_until(&loop, &nlines, 1, 5000));
    CHECK_EQ(started, 1);
    hv_worker_pid_t *run = NULL;
    CHECK_EQ(hv_workers_running(wt, &run), 1);
    if (run != NULL) {
        CHECK_EQ(run[0].worker_id, 8);
        CHECK_EQ(run[0].pid, started_pid);
    }
    hv_free(run);
    hv_workers_kill(wt, 999, 100, "nobody"); // unknown: ignored
    hv_workers_kill(wt, 8, 5000, "test kill");
    CHECK(test_run_until(&loop, &exited, 1, 5000));
    CHECK_EQ(exit_code, -1);
    CHECK_EQ(term_signal, SIGTERM);
    CHECK_STR(exit_reason, "killed by the agent: test kill");
    // Shutting down: new orders are answered with an exit at once.
    hv_workers_kill_all(wt, 100, "stopping", 1);
    order_init(&o, 9, bin, "sleepy");
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(exited, 2);
    CHECK_STR(exit_reason, "spawn failed: the agent is shutting down");
    CHECK_EQ(started, 1);
    teardown();
}

/* A Fetch server that never answers: downloads stay in flight. */
static int fetches;
static void stall_fetch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)c;
    (void)m;
    (void)ud;
    fetches++;
}

static void case_kill_while_fetching(void) {
    uv_loop_init(&loop);
    hv_rpc_engine_t *e = NULL;
    hv_rpc_server_t *s = NULL;
    hv_rpc_channel_t *ch = NULL;
    int port = 0;
    char target[64];
    CHECK_RC(hv_rpc_engine_create(&loop, &e), HV_OK);
    CHECK_RC(hv_rpc_server_create(e, "127.0.0.1:0", &s, &port), HV_OK);
    hv_rpc_method_t m = {.path = "/hvpb.v1.Cluster/Fetch",
                         .kind = HV_RPC_SERVER_STREAM,
                         .req = &hvpb__v1__fetch_request__descriptor,
                         .on_msg = stall_fetch};
    CHECK_RC(hv_rpc_server_add(s, &m), HV_OK);
    CHECK_RC(hv_rpc_server_start(s), HV_OK);
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    CHECK_RC(hv_rpc_channel_create(target, &ch), HV_OK);
    setup_with(e, ch);
    char data[65];
    put_artifact("delivered before the kill\n", data);
    order_t o;
    order_init(&o, 11, "cd00000000000000000000000000000000000000000000000000000000000000", "big");
    order_file(&o, "data.txt", data, 0);
    hv_workers_spawn(wt, &o.sp);
    fetches = 0;
    CHECK(test_run_until(&loop, &fetches, 1, 5000));
    hv_artifact_usage_t u;
    for (int i = 0; i < 100; i++) { // the file's delivery: on the cache's next tick
        hv_artifact_cache_usage(cache, &u);
        if (u.pinned == 1) {
            break;
        }
        test_run_for(&loop, 10);
    }
    CHECK_EQ(u.pinned, 1);
    hv_worker_pid_t *run = NULL;
    CHECK_EQ(hv_workers_running(wt, &run), 1); // listed (pid 0) while fetching
    if (run != NULL) {
        CHECK_EQ(run[0].pid, 0);
    }
    hv_free(run);
    hv_workers_kill(wt, 11, 1000, "job cancelled");
    CHECK_EQ(exited, 1); // reported at once, not when the download ends
    hv_artifact_cache_usage(cache, &u);
    CHECK_EQ(u.pinned, 0); // the file delivered is not needed any more
    CHECK_STR(exit_reason, "killed before start: job cancelled");
    CHECK_EQ(hv_workers_count(wt), 0);
    // Shutdown order: stop the cache, end the calls; the record goes without a second report.
    hv_artifact_cache_stop(cache);
    hv_rpc_server_shutdown(s);
    hv_rpc_engine_destroy(e);
    CHECK_EQ(exited, 1);
    CHECK_EQ(started, 0);
    hv_rpc_channel_destroy(ch);
    teardown();
}

/* 50,000 --env entries: the environment is built in linear time (a scan per entry took about
 * 5 s of the agent's loop, past the lease). The work is counted, not timed: the key comparisons
 * of the environment's table (hv__workers_env_probes) stay within a small multiple of the
 * entries (the table is kept at most half full and doubles, so each setting visits about 1.5
 * slots and each doubling re-inserts what is there), where a scan per entry makes more than a
 * billion. A repeated key keeps the last value. */
#define MANY_ENV 50000
#define MANY_PROBES_PER_ENTRY 8
static void case_env_many(void) {
    setup();
    order_t o;
    order_script(&o, 30, "#!/bin/sh\necho N=$(env | grep -c '^MANY')\necho K7=$MANY7\n", "envy");
    Hvpb__V1__KeyValue *kv = hv_calloc(MANY_ENV + 1, sizeof(*kv));
    Hvpb__V1__KeyValue **env = hv_calloc(MANY_ENV + 1, sizeof(*env));
    char(*keys)[16] = hv_calloc(MANY_ENV, sizeof(*keys));
    for (size_t i = 0; i < MANY_ENV; i++) {
        Hvpb__V1__KeyValue init = HVPB__V1__KEY_VALUE__INIT;
        kv[i] = init;
        snprintf(keys[i], sizeof(keys[i]), "MANY%zu", i);
        kv[i].key = keys[i];
        kv[i].value = "v";
        env[i] = &kv[i];
    }
    Hvpb__V1__KeyValue init = HVPB__V1__KEY_VALUE__INIT;
    kv[MANY_ENV] = init;
    kv[MANY_ENV].key = "MANY7";
    kv[MANY_ENV].value = "last";
    env[MANY_ENV] = &kv[MANY_ENV];
    o.sp.env = env;
    o.sp.n_env = MANY_ENV + 1;
    size_t inherited = 0; /* the agent's own environment goes in first */
    for (char **p = environ; *p != NULL; p++) {
        inherited++;
    }
    uint64_t p0 = hv__workers_env_probes();
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &started, 1, 60000));
    uint64_t probes = hv__workers_env_probes() - p0;
    uint64_t settings = MANY_ENV + 1 + inherited + 32; /* + the HV_* variables */
    fprintf(stderr, "  %d env entries: %llu key comparisons for %llu settings\n", MANY_ENV,
            (unsigned long long)probes, (unsigned long long)settings);
    CHECK(probes >= MANY_ENV);
    CHECK(probes <= MANY_PROBES_PER_ENTRY * settings);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    CHECK_STR(exit_reason, "");
    CHECK_STR(line_value("N"), "50000");
    CHECK_STR(line_value("K7"), "last");
    hv_free(kv);
    hv_free(env);
    hv_free(keys);
    teardown();
}

/* A worker (here running as the agent's user, as root workers do) that rewrites its files
 * changes its own copies only: the next job gets the cached bytes. */
static void case_cache_untouched(void) {
    setup();
    char bin[65], data[65];
    put_artifact("#!/bin/sh\necho DATA=$(cat tool)\necho tampered >tool\n"
                 "echo 'echo tampered' >>\"$0\"; exit 0\n",
                 bin);
    put_artifact("original\n", data);
    for (uint64_t id = 40; id < 42; id++) {
        order_t o;
        order_init(&o, id, bin, "run.sh");
        order_file(&o, "tool", data, 0755);
        int before = exited;
        hv_workers_spawn(wt, &o.sp);
        CHECK(test_run_until(&loop, &exited, before + 1, 10000));
        CHECK_STR(exit_reason, "");
    }
    CHECK_EQ(nlines, 2); // no "tampered" line from a rewritten script
    for (int i = 0; i < nlines && i < MAX_LINES; i++) {
        CHECK_STR(lines[i], "DATA=original");
    }
    teardown();
}

/* 1 when the cache directory holds the file of digest. */
static int in_cache(const char *digest) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", cache_dir, digest);
    return access(path, F_OK) == 0;
}

/* A cache bound smaller than any file: the worker still gets its binary and file (the cache
 * keeps them pinned until they are placed), and they leave the cache once placed, while the
 * worker runs. A worker whose file cannot be fetched releases the binary it was handed. */
static void case_cache_pins(void) {
    setup();
    char bin[65], data[65], go[400];
    const char *script =
        "#!/bin/sh\necho DATA=$(cat data.txt)\n"
        "i=0; while [ ! -e \"$1\" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n"
        "exit 0\n";
    put_artifact(script, bin);
    put_artifact("kept while placed\n", data);
    snprintf(go, sizeof(go), "%s/go", top);
    hv_artifact_cache_set_max(cache, 1);
    order_t o;
    order_init(&o, 60, bin, "run.sh");
    order_file(&o, "data.txt", data, 0);
    order_args(&o, go, NULL);
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &nlines, 1, 10000));
    CHECK_EQ(started, 1);
    CHECK_STR(line_value("DATA"), "kept while placed");
    hv_artifact_usage_t u;
    hv_artifact_cache_usage(cache, &u); // the worker runs: its copies are placed
    CHECK_EQ(u.pinned, 0);
    CHECK_EQ(u.files, 0);
    CHECK_EQ(u.evicted, 2);
    CHECK(!in_cache(bin) && !in_cache(data));
    CHECK_RC(hv_write_file_atomic(go, "", 0, 0644), HV_OK);
    CHECK(test_run_until(&loop, &exited, 1, 10000));
    CHECK_STR(exit_reason, "");
    CHECK_EQ(exit_code, 0);
    // The binary is there, the file is not (and no head to fetch it from).
    put_artifact(script, bin);
    order_init(&o, 61, bin, "run.sh");
    order_file(&o, "data.txt", "ef00000000000000000000000000000000000000000000000000000000000000",
               0);
    hv_workers_spawn(wt, &o.sp);
    CHECK(test_run_until(&loop, &exited, 2, 10000));
    CHECK_EQ(started, 1);
    CHECK(strncmp(exit_reason, "fetch failed: ", 14) == 0);
    hv_artifact_cache_usage(cache, &u);
    CHECK_EQ(u.pinned, 0);
    CHECK(!in_cache(bin)); // released, then over the bound
    teardown();
}

/* An order beyond the agent's own bounds ends at once with a reason, before any work. */
static void case_too_big(void) {
    setup();
    order_t o;
    order_script(&o, 31, "#!/bin/sh\nexit 0\n", "big");
    size_t n = HV_WORKERS_MAX_ENV + 1;
    Hvpb__V1__KeyValue kv = HVPB__V1__KEY_VALUE__INIT;
    kv.key = "A";
    kv.value = "b";
    Hvpb__V1__KeyValue **env = hv_calloc(n, sizeof(*env));
    for (size_t i = 0; i < n; i++) {
        env[i] = &kv;
    }
    o.sp.env = env;
    o.sp.n_env = n;
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(exited, 1); // at once
    CHECK_STR(exit_reason, "spawn failed: 65537 environment variables, at most 65536");
    o.sp.n_env = 0;
    static char big[HV_WORKERS_MAX_ARG_BYTES / 4];
    memset(big, 'x', sizeof(big) - 1);
    char *args[5] = {big, big, big, big, big};
    o.sp.args = args;
    o.sp.n_args = 5;
    o.sp.worker_id = 32;
    hv_workers_spawn(wt, &o.sp);
    CHECK_EQ(exited, 2);
    CHECK(strstr(exit_reason, "spawn failed: arguments and environment take") != NULL);
    CHECK_EQ(started, 0);
    CHECK_EQ(hv_workers_count(wt), 0);
    hv_free(env);
    teardown();
}

static const test_case_t cases[] = {
    {"layout_env", case_layout_env},
    {"fetch_failed", case_fetch_failed},
    {"bad_names", case_bad_names},
    {"spawn_failed", case_spawn_failed},
    {"command", case_command},
    {"actor_figures", case_actor_figures},
    {"actor_figures_retry", case_actor_figures_retry},
    {"kill_and_refuse", case_kill_and_refuse},
    {"kill_while_fetching", case_kill_while_fetching},
    {"cache_untouched", case_cache_untouched},
    {"cache_pins", case_cache_pins},
    {"env_many", case_env_many},
    {"too_big", case_too_big},
    {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
