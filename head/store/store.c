/*
 * store: hvhead's persistent state in sqlite (see store.h). This is the only file that includes
 * sqlite3.h: sqlite result codes are turned into hv_err here (store_err_from_sqlite) and sqlite's
 * own message is kept in the handle for hv_store_last_error(). Statements are prepared once,
 * on first use, and cached in the handle; every call resets its statement before returning so
 * no read transaction is left open (an open reader would stop WAL checkpoints). The schema is
 * an ordered list of migration steps (store_migrations); a step, once released, is frozen:
 * change the schema by appending a step. Not thread-safe: the head's loop thread owns the handle.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "err.h"
#include "log.h"
#include "mem.h"
#include "util.h"

#define STORE_FILE "state.db"
#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_ADVICE "move it aside to start fresh, or restore a backup"

/* ---- schema --------------------------------------------------------------------------------- */

/* Ids use AUTOINCREMENT so that a job, worker or node id is never handed out twice, even after
 * rows are pruned: clients and agents keep ids across a head restart. Text columns are NOT NULL
 * with '' as "nothing"; states are checked so a typo in the head fails loudly at the write. */
static const char store_v1_sql[] =
    "CREATE TABLE nodes ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE,"
    " addrs TEXT NOT NULL DEFAULT '',"
    " slots INTEGER NOT NULL DEFAULT 0,"
    " gpus INTEGER NOT NULL DEFAULT 0,"
    " cpus INTEGER NOT NULL DEFAULT 0,"
    " labels TEXT NOT NULL DEFAULT '',"
    " preemptible INTEGER NOT NULL DEFAULT 0,"
    " instance_id TEXT NOT NULL DEFAULT '',"
    " incarnation INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL DEFAULT 'alive' CHECK (state IN ('alive','dead','draining')),"
    " registered_ms INTEGER NOT NULL DEFAULT 0,"
    " last_seen_ms INTEGER NOT NULL DEFAULT 0,"
    " peer TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE jobs ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL DEFAULT '',"
    " state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN"
    "  ('pending','placing','running','succeeded','failed','cancelled')),"
    " spec BLOB NOT NULL DEFAULT x'',"
    " np INTEGER NOT NULL DEFAULT 0,"
    " min_np INTEGER NOT NULL DEFAULT 0,"
    " max_np INTEGER NOT NULL DEFAULT 0,"
    " max_resets INTEGER NOT NULL DEFAULT 0,"
    " timeout_s INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '',"
    " submitted_ms INTEGER NOT NULL DEFAULT 0,"
    " started_ms INTEGER NOT NULL DEFAULT 0,"
    " ended_ms INTEGER NOT NULL DEFAULT 0,"
    " resets INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX jobs_state ON jobs(state);"
    "CREATE TABLE workers ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " rank INTEGER NOT NULL DEFAULT 0,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " node_id INTEGER NOT NULL DEFAULT 0,"
    " local_rank INTEGER NOT NULL DEFAULT 0,"
    " local_size INTEGER NOT NULL DEFAULT 0,"
    " gpu INTEGER NOT NULL DEFAULT -1,"
    " state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN"
    "  ('pending','starting','running','exited','lost','killed')),"
    " pid INTEGER NOT NULL DEFAULT 0,"
    " exit_code INTEGER NOT NULL DEFAULT 0,"
    " term_signal INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '',"
    " started_ms INTEGER NOT NULL DEFAULT 0,"
    " ended_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX workers_job ON workers(job_id, rank, attempt);"
    "CREATE TABLE events ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " time_ms INTEGER NOT NULL,"
    " job_id INTEGER NOT NULL DEFAULT 0,"
    " node_id INTEGER NOT NULL DEFAULT 0,"
    " kind TEXT NOT NULL DEFAULT '',"
    " message TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX events_job ON events(job_id);"
    "CREATE TABLE artifacts ("
    " digest TEXT PRIMARY KEY,"
    " size INTEGER NOT NULL DEFAULT 0,"
    " path TEXT NOT NULL DEFAULT '',"
    " created_ms INTEGER NOT NULL DEFAULT 0,"
    " last_used_ms INTEGER NOT NULL DEFAULT 0);";

static const char store_v2_sql[] =
    "CREATE TABLE blacklist ("
    " node_name TEXT PRIMARY KEY,"
    " strikes INTEGER NOT NULL DEFAULT 0,"
    " until_ms INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE instances ("
    " id TEXT PRIMARY KEY,"
    " provider TEXT NOT NULL DEFAULT '',"
    " state TEXT NOT NULL DEFAULT '',"
    " node_name TEXT NOT NULL DEFAULT '',"
    " price_milli INTEGER NOT NULL DEFAULT 0,"
    " created_ms INTEGER NOT NULL DEFAULT 0,"
    " ended_ms INTEGER NOT NULL DEFAULT 0);"
    "ALTER TABLE jobs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;";

/* v3: elastic jobs. Jobs get their elastic settings and the state of their newest round; workers
 * their membership (first and last round, rank, Done, removed, data-plane address) and the state
 * 'left' (a CHECK constraint cannot be altered in place, so the table is rebuilt with its ids and
 * its AUTOINCREMENT counter); the blacklist is keyed by (job, node id) instead of a host name
 * (it had no writer before); events get structured data (JSON). */
static const char store_v3_sql[] =
    "ALTER TABLE jobs ADD COLUMN elastic INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN check_every INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN elastic_timeout_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN rdzv_timeout_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cooldown_min_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cooldown_max_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN max_strikes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN slots_per_host INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN size INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cross_size INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_open INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_rollback INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN round_opened_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_deadline_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_fail_at_ms INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE workers_v3 ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " rank INTEGER NOT NULL DEFAULT 0,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " node_id INTEGER NOT NULL DEFAULT 0,"
    " local_rank INTEGER NOT NULL DEFAULT 0,"
    " local_size INTEGER NOT NULL DEFAULT 0,"
    " gpu INTEGER NOT NULL DEFAULT -1,"
    " state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN"
    "  ('pending','starting','running','exited','lost','killed','left')),"
    " pid INTEGER NOT NULL DEFAULT 0,"
    " exit_code INTEGER NOT NULL DEFAULT 0,"
    " term_signal INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '',"
    " started_ms INTEGER NOT NULL DEFAULT 0,"
    " ended_ms INTEGER NOT NULL DEFAULT 0,"
    " generation INTEGER NOT NULL DEFAULT 0,"
    " member_gen INTEGER NOT NULL DEFAULT 0,"
    " joined_gen INTEGER NOT NULL DEFAULT 0,"
    " cross_rank INTEGER NOT NULL DEFAULT 0,"
    " done INTEGER NOT NULL DEFAULT 0,"
    " removed INTEGER NOT NULL DEFAULT 0,"
    " addr TEXT NOT NULL DEFAULT '');"
    "INSERT INTO workers_v3 (id, job_id, rank, attempt, node_id, local_rank, local_size, gpu,"
    " state, pid, exit_code, term_signal, reason, started_ms, ended_ms, generation)"
    " SELECT id, job_id, rank, attempt, node_id, local_rank, local_size, gpu, state, pid,"
    " exit_code, term_signal, reason, started_ms, ended_ms, generation FROM workers;"
    "UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence"
    " WHERE name = 'workers'), 0)) WHERE name = 'workers_v3';"
    "DROP TABLE workers;"
    "ALTER TABLE workers_v3 RENAME TO workers;"
    "CREATE INDEX workers_job ON workers(job_id, rank, attempt);"
    "DROP TABLE blacklist;"
    "CREATE TABLE blacklist ("
    " job_id INTEGER NOT NULL,"
    " node_id INTEGER NOT NULL,"
    " strikes INTEGER NOT NULL DEFAULT 0,"
    " until_ms INTEGER NOT NULL DEFAULT 0,"
    " permanent INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '',"
    " incarnation INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (job_id, node_id));"
    "ALTER TABLE events ADD COLUMN data TEXT NOT NULL DEFAULT '';";

/* v4: jobs get the size an elastic job asks for now (target_np, 0 = max_np: a growth schedule
 * or the program moves it). The autoscaler's instances get what a restarted head needs to adopt them and what the cost
 * report needs: the node type, the provider's handle (local: the agent's pid), when the instance
 * joined, why it ended, and whether a preemption ended it. */
static const char store_v4_sql[] =
    "ALTER TABLE instances ADD COLUMN type TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE instances ADD COLUMN handle TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE instances ADD COLUMN joined_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE instances ADD COLUMN reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE instances ADD COLUMN preempted INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN target_np INTEGER NOT NULL DEFAULT 0;";

/* v5: the database's epoch (meta.epoch). Ids (jobs, workers, nodes) are unique only within one
 * database, while job logs and the head's key outlive it: the epoch tells one database's job 1
 * from another's (credentials mix it into their MAC, job logs are named by it). A database
 * created now gets 16 random hex digits (sqlite's randomness comes from the OS); one that was
 * already in use (any id ever handed out) gets "", the legacy epoch: its credentials and log
 * names stay as they were, so an upgrade breaks no live agent and no log. */
static const char store_v5_sql[] = "CREATE TABLE meta ("
                                   " key TEXT PRIMARY KEY,"
                                   " value TEXT NOT NULL DEFAULT '');"
                                   "INSERT INTO meta (key, value) SELECT 'epoch', CASE WHEN"
                                   " EXISTS (SELECT 1 FROM sqlite_sequence WHERE seq > 0)"
                                   " OR EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM nodes)"
                                   " OR EXISTS (SELECT 1 FROM instances)"
                                   " THEN '' ELSE lower(hex(randomblob(8))) END;";

/* v6: the audit trail (one row per change and per refused call; the newest
 * HV_STORE_AUDIT_KEEP are kept) and the join tokens (an id that may be shown, the SHA-256 of the
 * secret, never the secret; expiry, uses and revocation). */
static const char store_v6_sql[] = "CREATE TABLE audit ("
                                   " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                                   " time_ms INTEGER NOT NULL,"
                                   " who_kind TEXT NOT NULL,"
                                   " who_id TEXT NOT NULL DEFAULT '',"
                                   " peer TEXT NOT NULL DEFAULT '',"
                                   " method TEXT NOT NULL,"
                                   " target TEXT NOT NULL DEFAULT '',"
                                   " code INTEGER NOT NULL,"
                                   " result TEXT NOT NULL DEFAULT '');"
                                   "CREATE INDEX audit_time ON audit (time_ms);"
                                   "CREATE TABLE join_tokens ("
                                   " id TEXT PRIMARY KEY,"
                                   " secret_sha256 TEXT NOT NULL,"
                                   " created_ms INTEGER NOT NULL,"
                                   " expires_ms INTEGER NOT NULL DEFAULT 0,"
                                   " max_uses INTEGER NOT NULL DEFAULT 0,"
                                   " uses INTEGER NOT NULL DEFAULT 0,"
                                   " revoked_ms INTEGER NOT NULL DEFAULT 0,"
                                   " created_by TEXT NOT NULL DEFAULT '');";

/* v7: the copies of jobs' training state the head keeps (one row per job: the newest copy, its
 * round, commit, size, digest and file under <data>/states/), and the resume of a job whose
 * members were all lost (jobs.resume_gen: the round that loads the copy; jobs.resumes). */
static const char store_v7_sql[] = "CREATE TABLE state_copies ("
                                   " job_id INTEGER PRIMARY KEY,"
                                   " generation INTEGER NOT NULL,"
                                   " commit_no INTEGER NOT NULL,"
                                   " size INTEGER NOT NULL,"
                                   " sha256 TEXT NOT NULL,"
                                   " path TEXT NOT NULL,"
                                   " stored_ms INTEGER NOT NULL);"
                                   "ALTER TABLE jobs ADD COLUMN resume_gen INTEGER NOT NULL"
                                   " DEFAULT 0;"
                                   "ALTER TABLE jobs ADD COLUMN resumes INTEGER NOT NULL"
                                   " DEFAULT 0;";

/* v8: revoked node credentials (hvctl node revoke), until then a text file beside the database
 * (<data_dir>/revoked_nodes, imported once at start by the head). A credential names a node and
 * its agent's incarnation. */
static const char store_v8_sql[] = "CREATE TABLE revoked_nodes ("
                                   " node_id INTEGER NOT NULL,"
                                   " incarnation INTEGER NOT NULL,"
                                   " revoked_ms INTEGER NOT NULL,"
                                   " PRIMARY KEY (node_id, incarnation));";

/* v9: which artifacts each job's spec uses (its binary, its files), so that the history's
 * pruning can tell an artifact no kept job needs. New jobs write their rows with the job; the
 * jobs of an existing database are filled once at start (hv_store_job_artifacts_fill: the
 * spec is opaque to SQL), marked by meta.job_artifacts = 'fill' until then. */
static const char store_v9_sql[] = "CREATE TABLE job_artifacts ("
                                   " job_id INTEGER NOT NULL,"
                                   " digest TEXT NOT NULL,"
                                   " PRIMARY KEY (job_id, digest)) WITHOUT ROWID;"
                                   "CREATE INDEX job_artifacts_digest ON job_artifacts (digest);"
                                   "INSERT INTO meta (key, value) SELECT 'job_artifacts', CASE"
                                   " WHEN EXISTS (SELECT 1 FROM jobs) THEN 'fill' ELSE 'done'"
                                   " END;";

/* v10: actors (issue 17): one row per actor, stored before the head acts on it; names are unique
 * among the actors of a namespace that are not dead (the driver checks; the index makes the
 * look-up by name cheap). The spec is the packed ActorSpec of its creation. */
static const char store_v10_sql[] = "CREATE TABLE actors ("
                                    " id INTEGER PRIMARY KEY,"
                                    " name TEXT NOT NULL DEFAULT '',"
                                    " namespace TEXT NOT NULL,"
                                    " class TEXT NOT NULL,"
                                    " spec BLOB NOT NULL,"
                                    " state TEXT NOT NULL,"
                                    " cause TEXT NOT NULL DEFAULT '',"
                                    " reason TEXT NOT NULL DEFAULT '',"
                                    " max_restarts INTEGER NOT NULL,"
                                    " max_call_retries INTEGER NOT NULL,"
                                    " restarts INTEGER NOT NULL,"
                                    " moves INTEGER NOT NULL,"
                                    " incarnation INTEGER NOT NULL,"
                                    " slots INTEGER NOT NULL,"
                                    " gpus INTEGER NOT NULL,"
                                    " gpu_mask INTEGER NOT NULL,"
                                    " node_id INTEGER NOT NULL,"
                                    " owner_job INTEGER NOT NULL,"
                                    " proc_live INTEGER NOT NULL,"
                                    " kill_sent INTEGER NOT NULL,"
                                    " last_status INTEGER NOT NULL,"
                                    " last_signal INTEGER NOT NULL,"
                                    " address TEXT NOT NULL DEFAULT '',"
                                    " created_ms INTEGER NOT NULL,"
                                    " started_ms INTEGER NOT NULL,"
                                    " ended_ms INTEGER NOT NULL);"
                                    "CREATE INDEX actors_name ON actors (namespace, name);";

/* v11: events carry structured fields (head/core/events.h; the wire's Event fields): the round,
 * a reason code (the wire's EventReason), the node's name, the worker and its rank, a duration,
 * the job's new state (the wire's JobState) and whether the round rolls back; jobs keep the
 * newest round's reason code. Rows stored before: their rounds' fields come from their JSON
 * data, and their reason codes from the words their reasons began with (the only place the
 * head reads its own old English, once); every other old row reads as "none" (0, ""). */
static const char store_v11_sql[] =
    "ALTER TABLE events ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN reason INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN node TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE events ADD COLUMN worker_id INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN duration_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN job_state INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE events ADD COLUMN rollback INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN round_code INTEGER NOT NULL DEFAULT 0;"
    "UPDATE events SET"
    " generation = COALESCE(json_extract(data, '$.generation'), 0),"
    " rollback = COALESCE(json_extract(data, '$.rollback'), 0),"
    " duration_ms = COALESCE(json_extract(data, '$.wait_ms'), 0),"
    " reason = CASE WHEN kind = 'job.resume' THEN 7 ELSE"
    " CASE substr(COALESCE(json_extract(data, '$.reason'), ''), 1, 5)"
    " WHEN 'start' THEN 1 WHEN 'failu' THEN 2 WHEN 'worke' THEN 3 WHEN 'drain' THEN 4"
    " WHEN 'grow:' THEN 5 WHEN 'shrin' THEN 6 WHEN 'resum' THEN 7 ELSE 0 END END"
    " WHERE kind IN ('round.open', 'round.close', 'job.resume') AND json_valid(data);"
    "UPDATE jobs SET round_code = CASE substr(round_reason, 1, 5)"
    " WHEN 'start' THEN 1 WHEN 'failu' THEN 2 WHEN 'worke' THEN 3 WHEN 'drain' THEN 4"
    " WHEN 'grow:' THEN 5 WHEN 'shrin' THEN 6 WHEN 'resum' THEN 7 ELSE 0 END;";

/* The durable tier's copies (one row per job: the newest copy the head wrote to the shared
 * directory or object store; path is the object's key there). v12. */
static const char store_v12_sql[] = "CREATE TABLE durable_copies ("
                                    " job_id INTEGER PRIMARY KEY,"
                                    " generation INTEGER NOT NULL,"
                                    " commit_no INTEGER NOT NULL,"
                                    " size INTEGER NOT NULL,"
                                    " sha256 TEXT NOT NULL,"
                                    " path TEXT NOT NULL,"
                                    " stored_ms INTEGER NOT NULL);";

/* v13: an actor's move (issue 17 §2): the node whose slot is reserved for its replacement and
 * the GPUs taken there, and the saved state waiting to be loaded (an artifact, by digest). */
static const char store_v13_sql[] =
    "ALTER TABLE actors ADD COLUMN next_node INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE actors ADD COLUMN next_gpu_mask INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE actors ADD COLUMN has_state INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE actors ADD COLUMN state_digest TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE actors ADD COLUMN state_size INTEGER NOT NULL DEFAULT 0;";
/* v14: an actor's demand of its node beyond slots and GPUs (issue 17): node labels it needs
 * ("k=v,k=v") and memory in MiB. Old rows: none. */
static const char store_v14_sql[] = "ALTER TABLE actors ADD COLUMN labels TEXT NOT NULL DEFAULT '';"
                                    "ALTER TABLE actors ADD COLUMN memory_mb INTEGER NOT NULL"
                                    " DEFAULT 0;";

/* v15: a node's memory (MiB, as its agent reported it at its join; issue 17), so that after a
 * head restart actors that need memory can be placed before the agent joins again. Old rows: 0
 * (unknown: meets no memory demand until the agent reports it). */
static const char store_v15_sql[] = "ALTER TABLE nodes ADD COLUMN memory_mb INTEGER NOT NULL"
                                    " DEFAULT 0;";
/* v16: an actor's call figures (issue 17 §3; head/core/actorfig.h): per actor the sum of its
 * ended processes (base) and the last report of its current process (cur), each a
 * common/callfig.h line, and when the last report came (wall ms). A row per actor that reported;
 * none for the others. */
static const char store_v16_sql[] = "CREATE TABLE actor_figures ("
                                    " actor_id INTEGER PRIMARY KEY,"
                                    " proc INTEGER NOT NULL,"
                                    " ended INTEGER NOT NULL,"
                                    " base TEXT NOT NULL,"
                                    " cur TEXT NOT NULL,"
                                    " report_ms INTEGER NOT NULL);";

/* v17: an actor's events (issue 17 §3: `hvctl actor` shows its restarts, moves and death): the
 * actor they are about, indexed to list them (hv_store_event_list_actor). Rows stored before:
 * 0 (none). */
static const char store_v17_sql[] = "ALTER TABLE events ADD COLUMN actor_id INTEGER NOT NULL"
                                    " DEFAULT 0;"
                                    "CREATE INDEX events_actor ON events (actor_id, seq);";

/* v18: sharing the cluster (issue 26): a job's priority and whether it may be stopped to resume
 * later (hvsubmit --priority, --preemptible), and the fleet policy's newest decision about it
 * (head/core/fleet.h): its target size, the reason's stable word, the job the reason names, when
 * it was decided and when the job was last resized (wall ms). Old rows: priority 0, not
 * preemptible, no decision. */
static const char store_v18_sql[] =
    "ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN fleet_target INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN fleet_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN fleet_cause INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN fleet_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN resized_ms INTEGER NOT NULL DEFAULT 0;";

/* v19: a job's namespace (hvsubmit --namespace), which the fleet policy's quotas and fair share
 * count it in (head/config.h fleet.namespaces). Old rows: "" (the default namespace). */
static const char store_v19_sql[] =
    "ALTER TABLE jobs ADD COLUMN namespace TEXT NOT NULL DEFAULT '';";

/* v20: copies kept by peers (issue 28 §3): per job the newest copy a peer agent holds in memory,
 * by node, the incarnation of its agent that took it and its copy endpoint's address. The copy's
 * bytes never pass the head; this is only the index. */
static const char store_v20_sql[] = "CREATE TABLE peer_copies ("
                                    " job_id INTEGER PRIMARY KEY,"
                                    " generation INTEGER NOT NULL,"
                                    " commit_no INTEGER NOT NULL,"
                                    " size INTEGER NOT NULL,"
                                    " sha256 TEXT NOT NULL,"
                                    " node_id INTEGER NOT NULL,"
                                    " incarnation INTEGER NOT NULL,"
                                    " addr TEXT NOT NULL,"
                                    " stored_ms INTEGER NOT NULL);"
                                    "CREATE INDEX peer_copies_node ON peer_copies (node_id);";

/* v21: the fleet's throughput table (issue 26 §3): what each job measured at each world size,
 * which the policy's goodput model fits; stored before the policy decides with it, so that a
 * head restart keeps it. */
static const char store_v21_sql[] = "CREATE TABLE job_tput ("
                                    " job_id INTEGER NOT NULL,"
                                    " size INTEGER NOT NULL,"
                                    " work REAL NOT NULL,"
                                    " seconds REAL NOT NULL,"
                                    " PRIMARY KEY (job_id, size));";

/* store_migrations[i] takes the database from user_version i to i + 1. */
static const char *const store_migrations[] = {
    store_v1_sql,  store_v2_sql,  store_v3_sql,  store_v4_sql,  store_v5_sql,  store_v6_sql,
    store_v7_sql,  store_v8_sql,  store_v9_sql,  store_v10_sql, store_v11_sql, store_v12_sql,
    store_v13_sql, store_v14_sql, store_v15_sql, store_v16_sql, store_v17_sql, store_v18_sql,
    store_v19_sql, store_v20_sql, store_v21_sql};

_Static_assert(sizeof(store_migrations) / sizeof(store_migrations[0]) == HV_STORE_SCHEMA_VERSION,
               "one migration step per schema version");

/* ---- statements ------------------------------------------------------------------------------ */

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_NODE_UPSERT,
    ST_NODE_SET_STATE,
    ST_NODE_GET,
    ST_NODE_LIST,
    ST_JOB_INSERT,
    ST_JOB_UPDATE,
    ST_JOB_GET,
    ST_JOB_LIST,
    ST_JOB_PAGE,
    ST_JOB_STATES,
    ST_WORKER_INSERT,
    ST_WORKER_UPDATE,
    ST_WORKER_GET,
    ST_WORKER_LIST_ALL,
    ST_WORKER_LIST_JOB,
    ST_EVENT_APPEND,
    ST_EVENT_LIST_ALL,
    ST_EVENT_LIST_JOB,
    ST_EVENT_COUNT,
    ST_EVENT_SUM,
    ST_EVENT_REASONS,
    ST_EVENT_LIST_ACTOR,
    ST_EVENT_COUNT_ACTOR,
    ST_ARTIFACT_PUT,
    ST_ARTIFACT_GET,
    ST_ARTIFACT_TOUCH,
    ST_BLACKLIST_PUT,
    ST_BLACKLIST_LIST,
    ST_BLACKLIST_REMOVE,
    ST_INSTANCE_PUT,
    ST_INSTANCE_GET,
    ST_INSTANCE_LIST,
    ST_AUDIT_APPEND,
    ST_AUDIT_TRIM,
    ST_AUDIT_LIST,
    ST_JTOKEN_INSERT,
    ST_JTOKEN_GET,
    ST_JTOKEN_LIST,
    ST_JTOKEN_REVOKE,
    ST_COPY_PUT,
    ST_COPY_GET,
    ST_COPY_REMOVE,
    ST_DURABLE_PUT,
    ST_DURABLE_GET,
    ST_DURABLE_REMOVE,
    ST_PEER_PUT,
    ST_PEER_GET,
    ST_PEER_REMOVE,
    ST_PEER_FORGET_NODE,
    ST_TPUT_CLEAR,
    ST_TPUT_PUT,
    ST_TPUT_GET,
    ST_JTOKEN_USE,
    ST_REVOKED_PUT,
    ST_REVOKED_LIST,
    ST_ACTOR_PUT,
    ST_ACTOR_LIST,
    ST_ACTOR_FIG_PUT,
    ST_ACTOR_FIG_LIST,
    ST__COUNT
};

/* Column lists: the *_cols tables below (their column indexes) depend on this order. */
#define ACTOR_COLS                                                                                 \
    "id, name, namespace, class, spec, state, cause, reason, max_restarts, max_call_retries,"      \
    " restarts, moves, incarnation, slots, gpus, gpu_mask, node_id, owner_job, proc_live,"         \
    " kill_sent, last_status, last_signal, address, created_ms, started_ms, ended_ms, next_node,"  \
    " next_gpu_mask, has_state, state_digest, state_size, labels, memory_mb"
#define NODE_COLS                                                                                  \
    "id, name, addrs, labels, instance_id, state, peer, slots, gpus, cpus, preemptible,"           \
    " incarnation, registered_ms, last_seen_ms, memory_mb"
#define JOB_COLS                                                                                   \
    "id, name, state, reason, spec, np, min_np, max_np, max_resets, timeout_s, resets,"            \
    " generation, submitted_ms, started_ms, ended_ms, elastic, check_every, elastic_timeout_s,"    \
    " rdzv_timeout_s, cooldown_min_s, cooldown_max_s, max_strikes, slots_per_host, size,"          \
    " cross_size, round_open, round_rollback, round_reason, round_opened_ms, round_deadline_ms,"   \
    " round_fail_at_ms, target_np, resume_gen, resumes, round_code, priority, preemptible,"        \
    " fleet_target, fleet_reason, fleet_cause, fleet_ms, resized_ms, namespace"
#define WORKER_COLS                                                                                \
    "id, job_id, node_id, rank, attempt, local_rank, local_size, generation, gpu, pid,"            \
    " exit_code, term_signal, state, reason, started_ms, ended_ms, member_gen, joined_gen,"        \
    " cross_rank, done, removed, addr"
#define EVENT_COLS                                                                                 \
    "seq, time_ms, job_id, node_id, kind, message, data, generation, reason, node, worker_id,"     \
    " rank, duration_ms, job_state, rollback, actor_id"
#define ARTIFACT_COLS "digest, path, size, created_ms, last_used_ms"
#define AUDIT_COLS "seq, time_ms, who_kind, who_id, peer, method, target, code, result"
#define JTOKEN_COLS                                                                                \
    "id, secret_sha256, created_ms, expires_ms, max_uses, uses, revoked_ms, created_by"
#define BLACKLIST_COLS "job_id, node_id, reason, strikes, until_ms, permanent, incarnation"
#define INSTANCE_COLS                                                                              \
    "id, provider, state, node_name, price_milli, created_ms, ended_ms, type, handle, joined_ms,"  \
    " reason, preempted"
#define WORKER_ACTIVE "state IN ('pending','starting','running')"

static const char *const store_sql[ST__COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_NODE_UPSERT] =
        "INSERT INTO nodes (name, addrs, labels, instance_id, state, peer, slots, gpus, cpus,"
        " preemptible, incarnation, registered_ms, last_seen_ms, memory_mb)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
        " ON CONFLICT (name) DO UPDATE SET addrs = excluded.addrs, labels = excluded.labels,"
        " instance_id = excluded.instance_id, state = excluded.state, peer = excluded.peer,"
        " slots = excluded.slots, gpus = excluded.gpus, cpus = excluded.cpus,"
        " preemptible = excluded.preemptible, incarnation = excluded.incarnation,"
        " registered_ms = excluded.registered_ms, last_seen_ms = excluded.last_seen_ms,"
        " memory_mb = excluded.memory_mb"
        " RETURNING id",
    [ST_NODE_SET_STATE] = "UPDATE nodes SET state = ?2, last_seen_ms = ?3 WHERE id = ?1",
    [ST_NODE_GET] = "SELECT " NODE_COLS " FROM nodes WHERE id = ?1",
    [ST_NODE_LIST] = "SELECT " NODE_COLS " FROM nodes ORDER BY id",
    [ST_JOB_INSERT] = "INSERT INTO jobs (name, state, reason, spec, np, min_np, max_np,"
                      " max_resets, timeout_s, resets, generation, submitted_ms, started_ms,"
                      " ended_ms, elastic, check_every, elastic_timeout_s, rdzv_timeout_s,"
                      " cooldown_min_s, cooldown_max_s, max_strikes, slots_per_host, size,"
                      " cross_size, round_open, round_rollback, round_reason, round_opened_ms,"
                      " round_deadline_ms, round_fail_at_ms, target_np, resume_gen, resumes,"
                      " round_code, priority, preemptible, fleet_target, fleet_reason, fleet_cause,"
                      " fleet_ms, resized_ms, namespace)"
                      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?16,"
                      " ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30,"
                      " ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38, ?39, ?40, ?41, ?42, ?43)",
    [ST_JOB_UPDATE] = "UPDATE jobs SET name = ?1, state = ?2, reason = ?3, np = ?5,"
                      " min_np = ?6, max_np = ?7, max_resets = ?8, timeout_s = ?9,"
                      " resets = ?10, generation = ?11, submitted_ms = ?12, started_ms = ?13,"
                      " ended_ms = ?14, elastic = ?16, check_every = ?17,"
                      " elastic_timeout_s = ?18, rdzv_timeout_s = ?19, cooldown_min_s = ?20,"
                      " cooldown_max_s = ?21, max_strikes = ?22, slots_per_host = ?23,"
                      " size = ?24, cross_size = ?25, round_open = ?26, round_rollback = ?27,"
                      " round_reason = ?28, round_opened_ms = ?29, round_deadline_ms = ?30,"
                      " round_fail_at_ms = ?31, target_np = ?32, resume_gen = ?33,"
                      " resumes = ?34, round_code = ?35, priority = ?36, preemptible = ?37,"
                      " fleet_target = ?38, fleet_reason = ?39, fleet_cause = ?40,"
                      " fleet_ms = ?41, resized_ms = ?42, namespace = ?43 WHERE id = ?15",
    [ST_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
    [ST_JOB_STATES] = "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state",
    [ST_JOB_LIST] = "SELECT " JOB_COLS " FROM jobs"
                    " WHERE ?1 = 0 OR state IN ('pending','placing','running')"
                    " ORDER BY id DESC LIMIT ?2",
    [ST_JOB_PAGE] = "SELECT " JOB_COLS " FROM jobs WHERE ?1 = 0 OR id < ?1"
                    " ORDER BY id DESC LIMIT ?2",
    [ST_WORKER_INSERT] = "INSERT INTO workers (job_id, node_id, rank, attempt, local_rank,"
                         " local_size, generation, gpu, pid, exit_code, term_signal, state,"
                         " reason, started_ms, ended_ms, member_gen, joined_gen, cross_rank,"
                         " done, removed, addr)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                         " ?15, ?17, ?18, ?19, ?20, ?21, ?22)",
    [ST_WORKER_UPDATE] = "UPDATE workers SET job_id = ?1, node_id = ?2, rank = ?3,"
                         " attempt = ?4, local_rank = ?5, local_size = ?6, generation = ?7,"
                         " gpu = ?8, pid = ?9, exit_code = ?10, term_signal = ?11, state = ?12,"
                         " reason = ?13, started_ms = ?14, ended_ms = ?15, member_gen = ?17,"
                         " joined_gen = ?18, cross_rank = ?19, done = ?20, removed = ?21,"
                         " addr = ?22 WHERE id = ?16",
    [ST_WORKER_GET] = "SELECT " WORKER_COLS " FROM workers WHERE id = ?1",
    [ST_WORKER_LIST_ALL] = "SELECT " WORKER_COLS " FROM workers WHERE ?1 = 0 OR " WORKER_ACTIVE
                           " ORDER BY job_id, rank, attempt",
    [ST_WORKER_LIST_JOB] = "SELECT " WORKER_COLS " FROM workers WHERE job_id = ?2"
                           " AND (?1 = 0 OR " WORKER_ACTIVE ") ORDER BY job_id, rank, attempt",
    [ST_EVENT_APPEND] = "INSERT INTO events (time_ms, job_id, node_id, kind, message, data,"
                        " generation, reason, node, worker_id, rank, duration_ms, job_state,"
                        " rollback, actor_id)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                        " ?15)",
    /* The inner query picks the newest `limit` events, the outer one puts them back in order. */
    [ST_EVENT_LIST_ALL] = "SELECT " EVENT_COLS " FROM (SELECT " EVENT_COLS " FROM events"
                          " WHERE seq > ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq",
    [ST_EVENT_LIST_JOB] = "SELECT " EVENT_COLS " FROM (SELECT " EVENT_COLS " FROM events"
                          " WHERE job_id = ?3 AND seq > ?1 ORDER BY seq DESC LIMIT ?2)"
                          " ORDER BY seq",
    [ST_EVENT_COUNT] = "SELECT COUNT(*) FROM events WHERE (?1 = 0 OR job_id = ?1) AND kind = ?2"
                       " AND (?3 = '' OR instr(data, ?3) > 0)",
    [ST_EVENT_SUM] = "SELECT COALESCE(SUM(json_extract(data, ?3)), 0) FROM events"
                     " WHERE (?1 = 0 OR job_id = ?1) AND kind = ?2 AND json_valid(data)",
    [ST_EVENT_REASONS] =
        "SELECT reason, rollback, COUNT(*) FROM events WHERE kind = ?1"
        " AND generation >= ?2 GROUP BY reason, rollback ORDER BY reason, rollback",
    [ST_EVENT_LIST_ACTOR] = "SELECT " EVENT_COLS " FROM (SELECT " EVENT_COLS " FROM events"
                            " WHERE actor_id = ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq",
    [ST_EVENT_COUNT_ACTOR] = "SELECT COUNT(*) FROM events WHERE actor_id = ?1",
    [ST_ARTIFACT_PUT] = "INSERT OR REPLACE INTO artifacts (digest, path, size, created_ms,"
                        " last_used_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_ARTIFACT_GET] = "SELECT " ARTIFACT_COLS " FROM artifacts WHERE digest = ?1",
    [ST_ARTIFACT_TOUCH] = "UPDATE artifacts SET last_used_ms = ?2 WHERE digest = ?1",
    [ST_BLACKLIST_PUT] = "INSERT OR REPLACE INTO blacklist (job_id, node_id, reason, strikes,"
                         " until_ms, permanent, incarnation) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_BLACKLIST_LIST] = "SELECT " BLACKLIST_COLS " FROM blacklist WHERE ?1 = 0 OR job_id = ?1"
                          " ORDER BY job_id, node_id",
    [ST_BLACKLIST_REMOVE] = "DELETE FROM blacklist WHERE job_id = ?1 AND node_id = ?2",
    [ST_INSTANCE_PUT] = "INSERT OR REPLACE INTO instances (id, provider, state, node_name,"
                        " price_milli, created_ms, ended_ms, type, handle, joined_ms, reason,"
                        " preempted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_INSTANCE_GET] = "SELECT " INSTANCE_COLS " FROM instances WHERE id = ?1",
    [ST_INSTANCE_LIST] = "SELECT " INSTANCE_COLS " FROM instances WHERE ?1 = 0 OR ended_ms = 0"
                         " ORDER BY created_ms, id",
    [ST_AUDIT_APPEND] = "INSERT INTO audit (time_ms, who_kind, who_id, peer, method, target, code,"
                        " result) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    /* seq only grows and rows leave only from the bottom: the newest ?1 are those above max - ?1. */
    [ST_AUDIT_TRIM] = "DELETE FROM audit WHERE seq <= (SELECT MAX(seq) FROM audit) - ?1",
    [ST_AUDIT_LIST] = "SELECT " AUDIT_COLS " FROM audit WHERE (?1 = 0 OR seq < ?1)"
                      " AND time_ms >= ?2 AND (?3 = '' OR who_id = ?3 OR who_kind = ?3)"
                      " AND (?4 = '' OR method = ?4 COLLATE NOCASE)"
                      " AND (?5 = 0 OR code != 0) ORDER BY seq DESC LIMIT ?6",
    [ST_JTOKEN_INSERT] = "INSERT INTO join_tokens (" JTOKEN_COLS ")"
                         " VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6)",
    [ST_JTOKEN_GET] = "SELECT " JTOKEN_COLS " FROM join_tokens WHERE id = ?1",
    [ST_COPY_PUT] = "INSERT INTO state_copies (job_id, generation, commit_no, size, sha256, path,"
                    " stored_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                    " ON CONFLICT (job_id) DO UPDATE SET generation = excluded.generation,"
                    " commit_no = excluded.commit_no, size = excluded.size,"
                    " sha256 = excluded.sha256, path = excluded.path,"
                    " stored_ms = excluded.stored_ms",
    [ST_COPY_GET] = "SELECT job_id, generation, commit_no, size, sha256, path, stored_ms"
                    " FROM state_copies WHERE job_id = ?1",
    [ST_COPY_REMOVE] = "DELETE FROM state_copies WHERE job_id = ?1",
    [ST_DURABLE_PUT] = "INSERT INTO durable_copies (job_id, generation, commit_no, size, sha256,"
                       " path, stored_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                       " ON CONFLICT (job_id) DO UPDATE SET generation = excluded.generation,"
                       " commit_no = excluded.commit_no, size = excluded.size,"
                       " sha256 = excluded.sha256, path = excluded.path,"
                       " stored_ms = excluded.stored_ms",
    [ST_DURABLE_GET] = "SELECT job_id, generation, commit_no, size, sha256, path, stored_ms"
                       " FROM durable_copies WHERE job_id = ?1",
    [ST_DURABLE_REMOVE] = "DELETE FROM durable_copies WHERE job_id = ?1",
    [ST_PEER_PUT] = "INSERT INTO peer_copies (job_id, generation, commit_no, size, sha256, node_id,"
                    " incarnation, addr, stored_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    " ON CONFLICT (job_id) DO UPDATE SET generation = excluded.generation,"
                    " commit_no = excluded.commit_no, size = excluded.size,"
                    " sha256 = excluded.sha256, node_id = excluded.node_id,"
                    " incarnation = excluded.incarnation, addr = excluded.addr,"
                    " stored_ms = excluded.stored_ms",
    [ST_PEER_GET] = "SELECT job_id, generation, commit_no, size, sha256, node_id, incarnation,"
                    " addr, stored_ms FROM peer_copies WHERE job_id = ?1",
    [ST_PEER_REMOVE] = "DELETE FROM peer_copies WHERE job_id = ?1",
    [ST_PEER_FORGET_NODE] = "DELETE FROM peer_copies WHERE node_id = ?1",
    [ST_TPUT_CLEAR] = "DELETE FROM job_tput WHERE job_id = ?1",
    [ST_TPUT_PUT] = "INSERT INTO job_tput (job_id, size, work, seconds) VALUES (?1, ?2, ?3, ?4)",
    [ST_TPUT_GET] = "SELECT job_id, size, work, seconds FROM job_tput WHERE job_id = ?1"
                    " ORDER BY size",
    [ST_JTOKEN_LIST] = "SELECT " JTOKEN_COLS " FROM join_tokens ORDER BY created_ms, id",
    [ST_JTOKEN_REVOKE] = "UPDATE join_tokens SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms = 0",
    [ST_JTOKEN_USE] =
        "UPDATE join_tokens SET uses = uses + 1 WHERE id = ?1 AND revoked_ms = 0"
        " AND (expires_ms = 0 OR expires_ms > ?2) AND (max_uses = 0 OR uses < max_uses)",
    [ST_REVOKED_PUT] = "INSERT OR IGNORE INTO revoked_nodes (node_id, incarnation, revoked_ms)"
                       " VALUES (?1, ?2, ?3)",
    [ST_REVOKED_LIST] = "SELECT node_id, incarnation, revoked_ms FROM revoked_nodes"
                        " ORDER BY revoked_ms, node_id, incarnation",
    [ST_ACTOR_PUT] = "INSERT OR REPLACE INTO actors (" ACTOR_COLS ") VALUES (?1, ?2, ?3, ?4, ?5,"
                     " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
                     " ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)",
    [ST_ACTOR_LIST] = "SELECT " ACTOR_COLS " FROM actors ORDER BY id",
    [ST_ACTOR_FIG_PUT] = "INSERT OR REPLACE INTO actor_figures (actor_id, proc, ended, base, cur,"
                         " report_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_ACTOR_FIG_LIST] = "SELECT actor_id, proc, ended, base, cur, report_ms FROM actor_figures"
                          " ORDER BY actor_id",
};

struct hv_store_s {
    sqlite3 *db;                   // owned connection
    char *path;                    // owned: <data_dir>/state.db
    int version;                   // schema version (user_version) after open
    char epoch[40];                // meta.epoch, read at open ("" legacy; see store_v5_sql)
    sqlite3_stmt *stmt[ST__COUNT]; // owned; prepared on first use, NULL until then
    char err[512];                 // detail of the last failure ("" if none)
};

/* ---- errors --------------------------------------------------------------------------------- */

/* The one place sqlite result codes (extended ones included) become hv_err. */
static hv_err store_err_from_sqlite(int src) {
    switch (src & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return HV_OK;
    case SQLITE_NOMEM:
        return HV_ENOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return HV_ETIMEDOUT;
    case SQLITE_CONSTRAINT:
        if (src == SQLITE_CONSTRAINT_UNIQUE || src == SQLITE_CONSTRAINT_PRIMARYKEY) {
            return HV_EEXIST;
        }
        return HV_EINVAL; // check, not null, foreign key
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return HV_ECORRUPT;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
        return HV_EIO;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return HV_EPERM;
    case SQLITE_TOOBIG:
        return HV_ETOOBIG;
    case SQLITE_INTERRUPT:
    case SQLITE_ABORT:
        return HV_ECANCELED;
    default:
        return HV_EINTERNAL; // SQLITE_ERROR, MISUSE, RANGE, SCHEMA: our own mistake
    }
}

static void store_set_err(hv_store_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void store_set_err(hv_store_t *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
}

/* Records a sqlite failure ("<what>: <sqlite's words> (sqlite <code>)"), logs it once, maps it. */
static hv_err store_fail(hv_store_t *s, int src, const char *what) {
    hv_err rc = store_err_from_sqlite(src);
    if (rc == HV_OK) {
        rc = HV_EINTERNAL; // a "failure" that sqlite calls success: an unexpected row or done
    }
    char prev[sizeof(s->err)];
    memcpy(prev, s->err, sizeof(prev));
    store_set_err(s, "%s: %s (sqlite %d)", what, sqlite3_errmsg(s->db), src);
    /* The same failure again (a full disk retried every tick) is not logged again at WARN: the
     * driver says how long it lasts. */
    HV_LOG(strcmp(prev, s->err) != 0 ? HV_LOG_WARN : HV_LOG_DEBUG, "store", "HV-STORE-SQL",
           "%s: %s", s->path, s->err);
    return rc;
}

/* ---- statement helpers ----------------------------------------------------------------------- */

static hv_err store_stmt(hv_store_t *s, int id, sqlite3_stmt **out) {
    if (s->stmt[id] == NULL) {
        int src = sqlite3_prepare_v3(s->db, store_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                     &s->stmt[id], NULL);
        if (src != SQLITE_OK) {
            s->stmt[id] = NULL;
            return store_fail(s, src, "preparing a statement");
        }
    }
    *out = s->stmt[id];
    return HV_OK;
}

/* Makes a statement ready for its next use and drops its borrowed bindings. */
static void store_release(sqlite3_stmt *st) {
    if (st != NULL) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
}

/* Binding keeps the first failure so a call site binds everything, then checks once. Text and
 * blobs are bound SQLITE_STATIC: they are borrowed from the caller for the duration of the call
 * and store_release() clears them before returning. A call is: b = store_start(s, ST_...), the
 * binds, then one of store_write, store_write_one, store_get, store_list or store_number, which
 * returns the first failure (preparing, binding, stepping) and releases the statement. */
typedef struct store_bind_s {
    sqlite3_stmt *st; // the statement (cached in the handle); NULL when it could not be prepared
    int src;          // first bind failure, SQLITE_OK if none
    hv_err rc;        // preparing it: HV_OK, or store_stmt's failure (its message is set)
} store_bind_t;

static store_bind_t store_start(hv_store_t *s, int which) {
    store_bind_t b = {NULL, SQLITE_OK, HV_OK};
    if ((b.rc = store_stmt(s, which, &b.st)) != HV_OK) {
        b.src = SQLITE_MISUSE; // nothing to bind: the binds that follow do nothing
    }
    return b;
}

static void bind_text(store_bind_t *b, int i, const char *v) {
    if (b->src == SQLITE_OK) {
        b->src = sqlite3_bind_text(b->st, i, v != NULL ? v : "", -1, SQLITE_STATIC);
    }
}

static void bind_u64(store_bind_t *b, int i, uint64_t v) {
    if (b->src == SQLITE_OK) {
        b->src = sqlite3_bind_int64(b->st, i, (sqlite3_int64)v);
    }
}

static void bind_f64(store_bind_t *b, int i, double v) {
    if (b->src == SQLITE_OK) {
        b->src = sqlite3_bind_double(b->st, i, v);
    }
}

static void bind_int(store_bind_t *b, int i, int v) {
    if (b->src == SQLITE_OK) {
        b->src = sqlite3_bind_int64(b->st, i, v);
    }
}

static void bind_blob(store_bind_t *b, int i, const uint8_t *v, size_t len) {
    if (b->src != SQLITE_OK) {
        return;
    }
    if (v == NULL || len == 0) {
        b->src = sqlite3_bind_zeroblob(b->st, i, 0);
    } else {
        b->src = sqlite3_bind_blob64(b->st, i, v, (sqlite3_uint64)len, SQLITE_STATIC);
    }
}

/* LIMIT -1 means no limit in sqlite. */
static void bind_limit(store_bind_t *b, int i, uint32_t limit) {
    if (b->src == SQLITE_OK) {
        b->src = sqlite3_bind_int64(b->st, i, limit == 0 ? -1 : (sqlite3_int64)limit);
    }
}

/* A row's key: bound as a number or a text, and named in "no <noun> <key>" messages. */
typedef struct store_key_s {
    int is_text;      // 1: text, 0: id
    uint64_t id;      // the key when !is_text
    const char *text; // the key when is_text (borrowed; NULL binds "" and reads "(null)")
} store_key_t;

static store_key_t key_id(uint64_t id) { return (store_key_t){0, id, NULL}; }
static store_key_t key_text(const char *text) { return (store_key_t){1, 0, text}; }

static void bind_key(store_bind_t *b, int i, store_key_t key) {
    if (key.is_text) {
        bind_text(b, i, key.text);
    } else {
        bind_u64(b, i, key.id);
    }
}

/* Sets the message of a missing row: "<what>: no <noun> <key>", or without "<what>: " when what
 * is NULL. */
static void store_not_found(hv_store_t *s, const char *what, const char *noun, store_key_t key) {
    char id[24]; // UINT64_MAX has 20 digits
    snprintf(id, sizeof(id), "%" PRIu64, key.id);
    const char *k = !key.is_text ? id : key.text != NULL ? key.text : "(null)";
    store_set_err(s, "%s%sno %s %s", what != NULL ? what : "", what != NULL ? ": " : "", noun, k);
}

/* The end of the binding: the failure of preparing or binding, else HV_OK. */
static hv_err store_bound(hv_store_t *s, const store_bind_t *b, const char *what) {
    if (b->rc != HV_OK) {
        return b->rc;
    }
    if (b->src != SQLITE_OK) {
        return store_fail(s, b->src, what);
    }
    return HV_OK;
}

/* Steps a statement that returns no rows. */
static hv_err store_exec_stmt(hv_store_t *s, sqlite3_stmt *st, const char *what) {
    int src = sqlite3_step(st);
    if (src != SQLITE_DONE) {
        return store_fail(s, src, what);
    }
    return HV_OK;
}

/* Runs a bound write (a statement with no rows) and releases it. sqlite3_changes() and
 * sqlite3_last_insert_rowid() still tell about it afterwards: a reset changes neither. */
static hv_err store_write(hv_store_t *s, store_bind_t *b, const char *what) {
    hv_err rc = store_bound(s, b, what);
    if (rc == HV_OK) {
        rc = store_exec_stmt(s, b->st, what);
    }
    store_release(b->st);
    return rc;
}

/* store_write of an UPDATE or DELETE whose row must be there: HV_ENOTFOUND and "<what>: no <noun>
 * <key>" when it changed none. */
static hv_err store_write_one(hv_store_t *s, store_bind_t *b, const char *what, const char *noun,
                              store_key_t key) {
    hv_err rc = store_write(s, b, what);
    if (rc == HV_OK && sqlite3_changes(s->db) == 0) {
        store_not_found(s, what, noun, key);
        rc = HV_ENOTFOUND;
    }
    return rc;
}

/* Steps a bound statement for its one number (column 0; below 0 reads 0) and releases it. */
static hv_err store_number(hv_store_t *s, store_bind_t *b, const char *what, uint64_t *out) {
    hv_err rc = store_bound(s, b, what);
    if (rc == HV_OK) {
        int src = sqlite3_step(b->st);
        if (src == SQLITE_ROW) {
            sqlite3_int64 v = sqlite3_column_int64(b->st, 0);
            *out = v > 0 ? (uint64_t)v : 0;
        } else {
            rc = store_fail(s, src, what);
        }
    }
    store_release(b->st);
    return rc;
}

/* Owned copy of a text column; "" for NULL so callers can print it. */
static hv_err col_text(sqlite3_stmt *st, int i, char **out) {
    const unsigned char *v = sqlite3_column_text(st, i);
    char *copy = hv_strdup(v != NULL ? (const char *)v : "");
    if (copy == NULL) {
        return HV_ENOMEM;
    }
    *out = copy;
    return HV_OK;
}

/* A text column into a fixed array (cut to fit; "" for NULL). */
static void col_text_to(sqlite3_stmt *st, int i, char *dst, size_t cap) {
    const unsigned char *v = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", v != NULL ? (const char *)v : "");
}

/* Owned copy of a blob column (*out NULL and *len 0 when it is empty). */
static hv_err col_blob(sqlite3_stmt *st, int i, uint8_t **out, size_t *len) {
    const void *v = sqlite3_column_blob(st, i);
    int n = sqlite3_column_bytes(st, i);
    if (v != NULL && n > 0) {
        if ((*out = hv_malloc((size_t)n)) == NULL) {
            return HV_ENOMEM;
        }
        memcpy(*out, v, (size_t)n);
        *len = (size_t)n;
    }
    return HV_OK;
}

static uint64_t col_u64(sqlite3_stmt *st, int i) { return (uint64_t)sqlite3_column_int64(st, i); }
static uint32_t col_u32(sqlite3_stmt *st, int i) { return (uint32_t)sqlite3_column_int64(st, i); }
static int col_int(sqlite3_stmt *st, int i) { return (int)sqlite3_column_int64(st, i); }

/* One column of a SELECT and the field of the row struct it fills. kind: how it is read; off:
 * the field's offset; aux: a blob's length field's offset, a text array's size. */
typedef enum {
    SCOL_U64,   // uint64_t
    SCOL_U32,   // uint32_t
    SCOL_INT,   // int (an int32_t too)
    SCOL_FLAG,  // int: 1 when the column is not 0
    SCOL_TEXT,  // char *, owned ("" for NULL)
    SCOL_BLOB,  // uint8_t * owned, and its size_t length at aux
    SCOL_CHARS, // char[aux], cut to fit
} store_col_kind_t;

typedef struct store_col_s {
    uint8_t kind; // store_col_kind_t
    uint8_t col;  // its index in the SELECT
    uint16_t off;
    uint16_t aux;
} store_col_t;

/* The kind of a scalar or char * field, from its type. */
#define SCOL_KIND(x)                                                                               \
    _Generic((x), uint64_t : SCOL_U64, uint32_t : SCOL_U32, int : SCOL_INT, char * : SCOL_TEXT)
/* Column c into field f of a row of type T; the flag, char-array and blob forms. */
#define SCOL(T, f, c)                                                                              \
    { SCOL_KIND(((T *)0)->f), (c), offsetof(T, f), 0 }
#define SCOL_FLAG(T, f, c)                                                                         \
    { SCOL_FLAG, (c), offsetof(T, f), 0 }
#define SCOL_CHARS(T, f, c)                                                                        \
    { SCOL_CHARS, (c), offsetof(T, f), sizeof(((T *)0)->f) }
#define SCOL_BLOB(T, f, len, c)                                                                    \
    { SCOL_BLOB, (c), offsetof(T, f), offsetof(T, len) }

/* How a table's rows are read and let go: the size of one, its columns, and what is read beyond
 * them (may be NULL; fills the rest of a row whose columns are read). */
typedef struct store_rows_s {
    size_t elem;
    const store_col_t *cols;
    size_t ncols;
    hv_err (*more)(sqlite3_stmt *st, void *row);
} store_rows_t;

#define STORE_ROWS(T, cols, more)                                                                  \
    { sizeof(T), (cols), sizeof(cols) / sizeof((cols)[0]), (more) }

/* Frees what a row owns (its text and blob columns) and zeroes it; NULL: nothing. */
static void store_row_fini(const store_rows_t *t, void *row) {
    if (row == NULL) {
        return;
    }
    for (size_t i = 0; i < t->ncols; i++) {
        if (t->cols[i].kind == SCOL_TEXT || t->cols[i].kind == SCOL_BLOB) {
            void **field = (void **)((unsigned char *)row + t->cols[i].off);
            hv_free(*field);
        }
    }
    memset(row, 0, t->elem);
}

/* Fills a row (zeroed first) from the statement's current row; frees what it took when it
 * fails (HV_ENOMEM, or the error of t->more). */
static hv_err store_row_read(const store_rows_t *t, sqlite3_stmt *st, void *row) {
    unsigned char *base = row;
    hv_err rc = HV_OK;
    memset(row, 0, t->elem);
    for (size_t i = 0; i < t->ncols && rc == HV_OK; i++) {
        const store_col_t *c = &t->cols[i];
        void *field = base + c->off;
        switch ((store_col_kind_t)c->kind) {
        case SCOL_U64:
            *(uint64_t *)field = col_u64(st, c->col);
            break;
        case SCOL_U32:
            *(uint32_t *)field = col_u32(st, c->col);
            break;
        case SCOL_INT:
            *(int *)field = col_int(st, c->col);
            break;
        case SCOL_FLAG:
            *(int *)field = sqlite3_column_int64(st, c->col) != 0;
            break;
        case SCOL_TEXT:
            rc = col_text(st, c->col, field);
            break;
        case SCOL_BLOB:
            rc = col_blob(st, c->col, field, (size_t *)(void *)(base + c->aux));
            break;
        case SCOL_CHARS:
            col_text_to(st, c->col, field, c->aux);
            break;
        }
    }
    if (rc == HV_OK && t->more != NULL) {
        rc = t->more(st, row);
    }
    if (rc != HV_OK) {
        store_row_fini(t, row);
    }
    return rc;
}

/* Finishes n rows and frees their array (NULL: nothing). */
static void store_free_rows(const store_rows_t *t, void *rows, size_t n) {
    for (size_t i = 0; rows != NULL && i < n; i++) {
        store_row_fini(t, (unsigned char *)rows + i * t->elem);
    }
    hv_free(rows);
}

/* Steps st to the end, reading each row into a growing owned array. */
static hv_err store_collect(hv_store_t *s, sqlite3_stmt *st, const store_rows_t *t,
                            const char *what, void **out, size_t *n) {
    hv_err rc = HV_OK;
    unsigned char *rows = NULL;
    size_t count = 0, cap = 0;
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            unsigned char *grown = hv_realloc(rows, ncap * t->elem);
            if (grown == NULL) {
                rc = HV_ENOMEM;
                store_set_err(s, "%s: out of memory", what);
                goto fail;
            }
            rows = grown;
            cap = ncap;
        }
        memset(rows + count * t->elem, 0, t->elem);
        if ((rc = store_row_read(t, st, rows + count * t->elem)) != HV_OK) {
            store_set_err(s, "%s: %s", what,
                          rc == HV_ENOMEM ? "out of memory" : "a row holds what it cannot");
            goto fail;
        }
        count++;
    }
    if (src != SQLITE_DONE) {
        rc = store_fail(s, src, what);
        goto fail;
    }
    *out = rows;
    *n = count;
    return HV_OK;
fail:
    store_free_rows(t, rows, count);
    return rc;
}

/* Steps a bound statement to the end and releases it. out is the address of the caller's row
 * pointer (a T ** for rows of type T, which has the representation of a void *): it gets the
 * owned array and *n its length, both only on success. */
static hv_err store_list(hv_store_t *s, store_bind_t *b, const store_rows_t *t, const char *what,
                         void *out, size_t *n) {
    void *rows = NULL;
    hv_err rc = store_bound(s, b, what);
    if (rc == HV_OK && (rc = store_collect(s, b->st, t, what, &rows, n)) == HV_OK) {
        memcpy(out, &rows, sizeof(rows));
    }
    store_release(b->st);
    return rc;
}

/* Steps a statement expected to return zero or one row and reads it. */
static hv_err store_get_one(hv_store_t *s, sqlite3_stmt *st, const store_rows_t *t, void *row,
                            const char *what) {
    int src = sqlite3_step(st);
    if (src == SQLITE_DONE) {
        return HV_ENOTFOUND;
    }
    if (src != SQLITE_ROW) {
        return store_fail(s, src, what);
    }
    if (store_row_read(t, st, row) != HV_OK) {
        store_set_err(s, "%s: out of memory", what);
        return HV_ENOMEM;
    }
    return HV_OK;
}

/* Room for any row a get reads, so that out is assigned only on success. */
typedef union store_any_row_u {
    hv_node_row_t node;
    hv_job_row_t job;
    hv_worker_row_t worker;
    hv_artifact_row_t artifact;
    hv_instance_row_t instance;
    hv_jtoken_row_t jtoken;
    hv_copy_row_t copy;
    hv_peer_copy_row_t peer_copy;
} store_any_row_t;

/* Steps a bound statement for zero or one row and releases it: the row goes to out (assigned
 * only on success); HV_ENOTFOUND, with no message (the caller's words), when there is none. */
static hv_err store_get(hv_store_t *s, store_bind_t *b, const store_rows_t *t, void *out,
                        const char *what) {
    store_any_row_t row;
    memset(&row, 0, sizeof(row));
    hv_err rc = store_bound(s, b, what);
    if (rc == HV_OK && t->elem > sizeof(row)) {
        store_set_err(s, "%s: a row of %zu bytes is not in store_any_row_t", what, t->elem);
        rc = HV_EINTERNAL; // our own mistake: a new row type read by a get
    }
    if (rc == HV_OK && (rc = store_get_one(s, b->st, t, &row, what)) == HV_OK) {
        memcpy(out, &row, t->elem);
    }
    store_release(b->st);
    return rc;
}

/* The get of the row whose key is ?1 of statement `which`: HV_ENOTFOUND and "no <noun> <key>"
 * when there is none. */
static hv_err store_get_by_key(hv_store_t *s, int which, store_key_t key, const store_rows_t *t,
                               void *out, const char *what, const char *noun) {
    store_bind_t b = store_start(s, which);
    bind_key(&b, 1, key);
    hv_err rc = store_get(s, &b, t, out, what);
    if (rc == HV_ENOTFOUND) {
        store_not_found(s, NULL, noun, key);
    }
    return rc;
}

/* ---- open, migrate, close -------------------------------------------------------------------- */

/* Runs a fixed SQL text (pragmas, DDL; never data) and keeps sqlite's message on failure. */
static int store_exec_sql(sqlite3 *db, const char *sql, char *msg, size_t msglen) {
    char *emsg = NULL;
    int src = sqlite3_exec(db, sql, NULL, NULL, &emsg);
    if (src != SQLITE_OK) {
        snprintf(msg, msglen, "%s", emsg != NULL ? emsg : sqlite3_errstr(src));
    }
    sqlite3_free(emsg);
    return src;
}

/* Reads one integer from a pragma; keeps sqlite's message on failure. */
static int store_pragma_int(sqlite3 *db, const char *sql, int *out, char *msg, size_t msglen) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src == SQLITE_OK) {
        src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            *out = sqlite3_column_int(st, 0);
            src = SQLITE_OK;
        } else if (src == SQLITE_DONE) {
            *out = 0;
            src = SQLITE_OK;
        }
    }
    if (src != SQLITE_OK) {
        snprintf(msg, msglen, "%s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(st);
    return src;
}

/* PRAGMA quick_check: fills msg with the first problems ("" when the answer is "ok"). */
static int store_quick_check(sqlite3 *db, char *msg, size_t msglen) {
    sqlite3_stmt *st = NULL;
    size_t used = 0;
    int lines = 0;
    msg[0] = '\0';
    int src = sqlite3_prepare_v2(db, "PRAGMA quick_check(3)", -1, &st, NULL);
    while (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(st, 0);
        if (line == NULL || strcmp(line, "ok") == 0) {
            src = SQLITE_OK;
            continue;
        }
        int w = snprintf(msg + used, msglen - used, "%s%s", lines > 0 ? "; " : "", line);
        if (w > 0) {
            used += (size_t)w < msglen - used ? (size_t)w : msglen - used - 1;
        }
        lines++;
        src = SQLITE_OK;
    }
    if (src == SQLITE_DONE) {
        src = SQLITE_OK;
    }
    if (src != SQLITE_OK) {
        snprintf(msg, msglen, "%s", sqlite3_errmsg(db));
    } else if (lines > 0) {
        src = SQLITE_CORRUPT;
    }
    sqlite3_finalize(st);
    return src;
}

/* Takes the database from version `from` to `to`, one transaction per step. */
static hv_err store_migrate(hv_store_t *s, int from, int to, char *err, size_t errlen) {
    char msg[256];
    for (int v = from; v < to; v++) {
        char set_version[64];
        snprintf(set_version, sizeof(set_version), "PRAGMA user_version = %d", v + 1);
        int src = store_exec_sql(s->db, "BEGIN IMMEDIATE", msg, sizeof(msg));
        if (src == SQLITE_OK) {
            src = store_exec_sql(s->db, store_migrations[v], msg, sizeof(msg));
            if (src == SQLITE_OK) {
                src = store_exec_sql(s->db, set_version, msg, sizeof(msg));
            }
            if (src == SQLITE_OK) {
                src = store_exec_sql(s->db, "COMMIT", msg, sizeof(msg));
            }
            if (src != SQLITE_OK && !sqlite3_get_autocommit(s->db)) {
                char ignored[64];
                store_exec_sql(s->db, "ROLLBACK", ignored, sizeof(ignored));
            }
        }
        if (src != SQLITE_OK) {
            hv_errf(err, errlen, "%s: migrating the schema from version %d to %d failed: %s",
                    s->path, v, v + 1, msg);
            return store_err_from_sqlite(src);
        }
        if (from > 0) {
            HV_LOG(HV_LOG_NOTICE, "store", "HV-STORE-MIGRATE",
                   "%s: schema migrated from version %d to %d", s->path, v, v + 1);
        }
        s->version = v + 1;
    }
    if (from == 0 && to > 0) {
        HV_LOG(HV_LOG_INFO, "store", "HV-STORE-CREATE", "%s: created at schema version %d", s->path,
               to);
    }
    return HV_OK;
}

/* Reads meta.epoch into s->epoch. */
static hv_err store_read_epoch(hv_store_t *s, char *err, size_t errlen) {
    sqlite3_stmt *st = NULL;
    int src =
        sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'epoch'", -1, &st, NULL);
    if (src == SQLITE_OK) {
        src = sqlite3_step(st);
    }
    if (src == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(s->epoch, sizeof(s->epoch), "%s", v != NULL ? (const char *)v : "");
        src = SQLITE_OK;
    } else if (src == SQLITE_DONE) {
        src = SQLITE_CORRUPT;
    }
    hv_err rc = HV_OK;
    if (src != SQLITE_OK) {
        rc = store_err_from_sqlite(src);
        hv_errf(err, errlen, "%s: cannot read its epoch: %s; " STORE_ADVICE, s->path,
                src == SQLITE_CORRUPT ? "no epoch row in table meta" : sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(st);
    return rc;
}

/* Checks the data dir exists (creating it) and can hold the database and its -wal/-shm files. */
static hv_err store_prepare_dir(const char *dir, char *err, size_t errlen) {
    hv_err rc = hv_mkdirs(dir, 0700);
    int e = errno;
    struct stat st;
    if (rc == HV_EEXIST || (rc == HV_OK && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))) {
        hv_errf(err, errlen, "data dir '%s' exists but is not a directory", dir);
        return HV_EEXIST;
    }
    if (rc != HV_OK) {
        hv_errf(err, errlen, "cannot create data dir '%s': %s", dir, strerror(e));
        return rc;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        e = errno;
        hv_errf(err, errlen,
                "data dir '%s' is not writable (%s): hvhead keeps state.db and its -wal and "
                "-shm files there",
                dir, strerror(e));
        return hv_err_from_errno(e);
    }
    return HV_OK;
}

/* The file before sqlite opens it: a regular file or none (must_be_new: none), never empty. */
static hv_err store_check_file(const hv_store_t *s, int must_be_new, char *err, size_t errlen) {
    struct stat fst;
    int existed = stat(s->path, &fst) == 0;
    if (existed && !S_ISREG(fst.st_mode)) {
        hv_errf(err, errlen, "%s exists but is not a regular file", s->path);
        return HV_EINVAL;
    }
    if (existed && must_be_new) {
        hv_errf(err, errlen, "%s already exists", s->path);
        return HV_EEXIST;
    }
    if (existed && fst.st_size == 0) {
        /* sqlite would take an empty file for a new database: ids would start again at 1 while
         * the job logs and the key stay. An empty state.db is a lost one; say so. */
        hv_errf(err, errlen,
                "%s is empty (0 bytes): the head's state is lost, not new; " STORE_ADVICE
                " (a head with no state.db starts a new one)",
                s->path);
        return HV_ECORRUPT;
    }
    return HV_OK;
}

/* Read-only checks of an open file, so that a damaged or foreign one is left exactly as it is:
 * its schema version (into s->version) is one this hvhead reads, the quick check passes, and a
 * file without a version has no tables. */
static hv_err store_check_schema(hv_store_t *s, char *err, size_t errlen) {
    char msg[384];
    int version = 0;
    int src = store_pragma_int(s->db, "PRAGMA user_version", &version, msg, sizeof(msg));
    if (src == SQLITE_OK) {
        src = store_quick_check(s->db, msg, sizeof(msg));
    }
    if (src != SQLITE_OK) {
        hv_err rc = store_err_from_sqlite(src);
        if (rc == HV_ECORRUPT) {
            hv_errf(err, errlen, "%s is damaged or not a sqlite database (%s); " STORE_ADVICE,
                    s->path, msg);
        } else {
            hv_errf(err, errlen, "cannot read %s: %s", s->path, msg);
        }
        return rc;
    }
    if (version > HV_STORE_SCHEMA_VERSION) {
        hv_errf(err, errlen,
                "%s has schema version %d, newer than this hvhead's %d; use a newer hvhead",
                s->path, version, HV_STORE_SCHEMA_VERSION);
        return HV_ENOTSUP;
    }
    if (version < 0) {
        hv_errf(err, errlen, "%s has schema version %d, which no hvhead writes; " STORE_ADVICE,
                s->path, version);
        return HV_ECORRUPT;
    }
    if (version == 0) {
        /* A fresh file has no tables; one with tables but no version is someone else's. */
        int tables = 0;
        src = store_pragma_int(s->db,
                               "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'",
                               &tables, msg, sizeof(msg));
        if (src != SQLITE_OK) {
            hv_errf(err, errlen, "cannot read %s: %s", s->path, msg);
            return store_err_from_sqlite(src);
        }
        if (tables > 0) {
            hv_errf(err, errlen,
                    "%s is a sqlite database but not hvhead's state (it has %d tables and no "
                    "schema version); point hvhead at another data dir",
                    s->path, tables);
            return HV_EINVAL;
        }
    }
    s->version = version;
    return HV_OK;
}

/* WAL: readers (hvctl tools, backups) never block the head, and a commit is one append. If the
 * file system cannot do WAL, fall back to a rollback journal with synchronous=FULL, since
 * synchronous=NORMAL is only crash-safe in WAL mode. Foreign keys on. */
static hv_err store_journal(hv_store_t *s, char *err, size_t errlen) {
    char msg[384];
    char mode[16] = "";
    sqlite3_stmt *jm = NULL;
    int src = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &jm, NULL);
    if (src == SQLITE_OK && (src = sqlite3_step(jm)) == SQLITE_ROW) {
        const unsigned char *m = sqlite3_column_text(jm, 0);
        snprintf(mode, sizeof(mode), "%s", m != NULL ? (const char *)m : "");
        src = SQLITE_OK;
    }
    if (src != SQLITE_OK) {
        snprintf(msg, sizeof(msg), "%s", sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(jm);
    if (src != SQLITE_OK) {
        hv_errf(err, errlen, "cannot set WAL mode on %s: %s", s->path, msg);
        return store_err_from_sqlite(src);
    }
    const char *sync = "PRAGMA synchronous=NORMAL";
    if (strcmp(mode, "wal") != 0) {
        HV_LOG(HV_LOG_WARN, "store", "HV-STORE-NOWAL",
               "%s: the file system refused WAL mode (journal mode is '%s'); using a rollback "
               "journal with synchronous=FULL",
               s->path, mode);
        sync = "PRAGMA synchronous=FULL";
    }
    if ((src = store_exec_sql(s->db, sync, msg, sizeof(msg))) != SQLITE_OK ||
        (src = store_exec_sql(s->db, "PRAGMA foreign_keys=ON", msg, sizeof(msg))) != SQLITE_OK) {
        hv_errf(err, errlen, "cannot configure %s: %s", s->path, msg);
        return store_err_from_sqlite(src);
    }
    return HV_OK;
}

/* Opens <dir>/state.db and brings it to schema `target`. must_be_new: refuse an existing file
 * (testing entry). Nothing is written to an existing file before it passed its checks. */
static hv_err store_open_at(const char *data_dir, int target, int must_be_new, hv_store_t **out,
                            char *err, size_t errlen) {
    hv_err rc = HV_OK;
    hv_store_t *s = NULL;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (data_dir == NULL || data_dir[0] == '\0' || out == NULL) {
        hv_errf(err, errlen, "no data dir given for state.db");
        return HV_EINVAL;
    }
    if ((rc = store_prepare_dir(data_dir, err, errlen)) != HV_OK) {
        return rc;
    }
    s = hv_calloc(1, sizeof(*s));
    size_t plen = strlen(data_dir) + sizeof("/" STORE_FILE);
    if (s == NULL || (s->path = hv_malloc(plen)) == NULL) {
        hv_errf(err, errlen, "out of memory opening state.db");
        rc = HV_ENOMEM;
        goto fail;
    }
    snprintf(s->path, plen, "%s/" STORE_FILE, data_dir);
    if ((rc = store_check_file(s, must_be_new, err, errlen)) != HV_OK) {
        goto fail;
    }
    int src = sqlite3_open_v2(
        s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXRESCODE, NULL);
    if (src != SQLITE_OK) {
        rc = store_err_from_sqlite(src);
        hv_errf(err, errlen, "cannot open %s: %s", s->path,
                s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(src));
        goto fail;
    }
    sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    if ((rc = store_check_schema(s, err, errlen)) != HV_OK ||
        (rc = store_journal(s, err, errlen)) != HV_OK ||
        (rc = store_migrate(s, s->version, target, err, errlen)) != HV_OK) {
        goto fail;
    }
    if (s->version >= 5 && (rc = store_read_epoch(s, err, errlen)) != HV_OK) {
        goto fail;
    }
    *out = s;
    return HV_OK;
fail:
    hv_store_close(s);
    return rc;
}

hv_err hv_store_open(const char *data_dir, hv_store_t **out, char *err, size_t errlen) {
    return store_open_at(data_dir, HV_STORE_SCHEMA_VERSION, 0, out, err, errlen);
}

/* ---- history retention ---------------------------------------------------------------------- */

/* These statements are prepared per call (not in the statement table): pruning runs every few
 * minutes, not per request. */
#define STORE_FINISHED "state IN ('succeeded','failed','cancelled')"

hv_err hv_store_history_expired(hv_store_t *s, uint64_t cutoff_ms, uint64_t keep_jobs, size_t cap,
                                uint64_t **out, size_t *n) {
    static const char sql[] = "SELECT id FROM jobs WHERE " STORE_FINISHED " AND ("
                              " (?1 > 0 AND MAX(ended_ms, submitted_ms) < ?1) OR"
                              " (?2 > 0 AND id NOT IN (SELECT id FROM jobs WHERE " STORE_FINISHED
                              "  ORDER BY MAX(ended_ms, submitted_ms) DESC, id DESC LIMIT ?2)))"
                              " ORDER BY MAX(ended_ms, submitted_ms), id LIMIT ?3";
    *out = NULL;
    *n = 0;
    if (cap == 0 || (cutoff_ms == 0 && keep_jobs == 0)) {
        return HV_OK;
    }
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (src != SQLITE_OK) {
        store_set_err(s, "history: %s", sqlite3_errmsg(s->db));
        return store_err_from_sqlite(src);
    }
    sqlite3_bind_int64(st, 1, (sqlite3_int64)cutoff_ms);
    sqlite3_bind_int64(st, 2, keep_jobs > INT64_MAX ? INT64_MAX : (sqlite3_int64)keep_jobs);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)cap);
    uint64_t *ids = NULL;
    size_t got = 0;
    hv_err rc = HV_OK;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (ids == NULL && (ids = hv_calloc(cap, sizeof(*ids))) == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        ids[got++] = (uint64_t)sqlite3_column_int64(st, 0);
    }
    if (rc == HV_OK && src != SQLITE_DONE) {
        store_set_err(s, "history: %s", sqlite3_errmsg(s->db));
        rc = store_err_from_sqlite(src);
    }
    sqlite3_finalize(st);
    if (rc != HV_OK) {
        hv_free(ids);
        return rc;
    }
    *out = ids;
    *n = got;
    return HV_OK;
}

hv_err hv_store_history_delete(hv_store_t *s, const uint64_t *ids, size_t n, size_t *deleted) {
    /* The job's own row last, and only while it is finished: the other rows go only with it
     * (the first statement's changes count says whether it is finished). */
    static const char *const sql[] = {
        "SELECT 1 FROM jobs WHERE id = ?1 AND " STORE_FINISHED,
        "DELETE FROM events WHERE job_id = ?1",
        "DELETE FROM blacklist WHERE job_id = ?1",
        "DELETE FROM state_copies WHERE job_id = ?1",
        "DELETE FROM job_artifacts WHERE job_id = ?1",
        "DELETE FROM durable_copies WHERE job_id = ?1",
        "DELETE FROM peer_copies WHERE job_id = ?1",
        "DELETE FROM job_tput WHERE job_id = ?1",
        "DELETE FROM workers WHERE job_id = ?1",
        "DELETE FROM jobs WHERE id = ?1",
    };
    enum { NSQL = sizeof(sql) / sizeof(sql[0]) };
    sqlite3_stmt *st[NSQL] = {0};
    size_t done = 0;
    hv_err rc = hv_store_begin(s);
    if (rc != HV_OK) {
        return rc;
    }
    int src = SQLITE_OK;
    for (size_t k = 0; k < NSQL && src == SQLITE_OK; k++) {
        src = sqlite3_prepare_v2(s->db, sql[k], -1, &st[k], NULL);
    }
    for (size_t i = 0; i < n && src == SQLITE_OK; i++) {
        for (size_t k = 0; k < NSQL && src == SQLITE_OK; k++) {
            sqlite3_reset(st[k]);
            sqlite3_bind_int64(st[k], 1, (sqlite3_int64)ids[i]);
            int r = sqlite3_step(st[k]);
            sqlite3_reset(st[k]); /* no statement stays open on the rows being deleted */
            if (k == 0 && r == SQLITE_DONE) {
                break; /* not finished, or gone: kept */
            }
            src = r == SQLITE_ROW || r == SQLITE_DONE ? SQLITE_OK : r;
            done += k == NSQL - 1 && src == SQLITE_OK;
        }
    }
    if (src != SQLITE_OK) {
        store_set_err(s, "history: deleting finished jobs: %s", sqlite3_errmsg(s->db));
        rc = store_err_from_sqlite(src);
    }
    for (size_t k = 0; k < NSQL; k++) {
        sqlite3_finalize(st[k]);
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(s);
    }
    if (rc != HV_OK) {
        hv_store_rollback(s);
        done = 0;
    }
    if (deleted != NULL) {
        *deleted = done;
    }
    return rc;
}

/* ---- backup --------------------------------------------------------------------------------- */

#define STORE_BACKUP_STEP_PAGES 256
#define STORE_BACKUP_WAIT_MS 30000

hv_err hv_store_backup(const char *src_path, const char *dst_path, uint64_t *pages_out, char *err,
                       size_t errlen) {
    struct stat st;
    if (stat(src_path, &st) != 0) {
        hv_errf(err, errlen, "no database at %s: %s", src_path, strerror(errno));
        return HV_ENOTFOUND;
    }
    if (lstat(dst_path, &st) == 0) {
        hv_errf(err, errlen, "%s exists already: a backup never overwrites a file", dst_path);
        return HV_EEXIST;
    }
    int fd = open(dst_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        hv_errf(err, errlen, "cannot create %s: %s", dst_path, strerror(errno));
        return errno == EEXIST ? HV_EEXIST : HV_EIO;
    }
    close(fd);
    sqlite3 *src = NULL, *dst = NULL;
    sqlite3_backup *b = NULL;
    hv_err rc = HV_OK;
    char msg[256] = "";
    int sr = sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READONLY | SQLITE_OPEN_EXRESCODE, NULL);
    if (sr == SQLITE_OK) {
        sqlite3_busy_timeout(src, STORE_BUSY_TIMEOUT_MS);
        sr = sqlite3_open_v2(dst_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_EXRESCODE, NULL);
    }
    if (sr != SQLITE_OK) {
        rc = store_err_from_sqlite(sr);
        hv_errf(err, errlen, "cannot open %s: %s", dst == NULL && src != NULL ? dst_path : src_path,
                sqlite3_errstr(sr));
        goto out;
    }
    b = sqlite3_backup_init(dst, "main", src, "main");
    if (b == NULL) {
        rc = store_err_from_sqlite(sqlite3_extended_errcode(dst));
        hv_errf(err, errlen, "cannot back up %s: %s", src_path, sqlite3_errmsg(dst));
        goto out;
    }
    /* Steps, so a running head's writes are not held off for the whole copy; a write between
     * steps makes sqlite start again from the new snapshot. The wait for locks is bounded. */
    uint64_t waited = 0;
    for (;;) {
        sr = sqlite3_backup_step(b, STORE_BACKUP_STEP_PAGES);
        if (sr == SQLITE_DONE) {
            break;
        }
        if (sr == SQLITE_OK) {
            continue;
        }
        if ((sr == SQLITE_BUSY || sr == SQLITE_LOCKED) && waited < STORE_BACKUP_WAIT_MS) {
            sqlite3_sleep(50);
            waited += 50;
            continue;
        }
        rc = sr == SQLITE_BUSY || sr == SQLITE_LOCKED ? HV_ETIMEDOUT : store_err_from_sqlite(sr);
        hv_errf(err, errlen, "cannot back up %s: %s", src_path, sqlite3_errstr(sr));
        goto out;
    }
    if (pages_out != NULL) {
        *pages_out = (uint64_t)sqlite3_backup_pagecount(b);
    }
    sqlite3_backup_finish(b);
    b = NULL;
    sr = store_quick_check(dst, msg, sizeof(msg));
    if (sr != SQLITE_OK) {
        rc = HV_ECORRUPT;
        hv_errf(err, errlen, "the copy %s does not check: %s", dst_path, msg);
        goto out;
    }
out:
    if (b != NULL) {
        sqlite3_backup_finish(b);
    }
    sqlite3_close(dst);
    sqlite3_close(src);
    if (rc != HV_OK) {
        unlink(dst_path);
    }
    return rc;
}

hv_err hv__store_create_at_version(const char *dir, int version, const char *sql, char *err,
                                   size_t errlen) {
    hv_store_t *s = NULL;
    if (version < 1 || version > HV_STORE_SCHEMA_VERSION) {
        hv_errf(err, errlen, "no schema version %d", version);
        return HV_EINVAL;
    }
    hv_err rc = store_open_at(dir, version, 1, &s, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    if (sql != NULL) {
        char msg[256];
        int src = store_exec_sql(s->db, sql, msg, sizeof(msg));
        if (src != SQLITE_OK) {
            hv_errf(err, errlen, "%s: %s", s->path, msg);
            rc = store_err_from_sqlite(src);
        }
    }
    hv_store_close(s);
    return rc;
}

hv_err hv__store_fail_writes(hv_store_t *s, int on) {
    int src = sqlite3_exec(s->db, on ? "PRAGMA query_only = 1" : "PRAGMA query_only = 0", NULL,
                           NULL, NULL);
    return src == SQLITE_OK ? HV_OK : store_fail(s, src, "query_only");
}

hv_err hv__store_exec(hv_store_t *s, const char *sql) {
    int src = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return src == SQLITE_OK ? HV_OK : store_fail(s, src, "exec");
}

void hv_store_close(hv_store_t *s) {
    if (s == NULL) {
        return;
    }
    for (int i = 0; i < ST__COUNT; i++) {
        sqlite3_finalize(s->stmt[i]);
    }
    if (s->db != NULL) {
        if (!sqlite3_get_autocommit(s->db)) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        }
        sqlite3_close_v2(s->db);
    }
    hv_free(s->path);
    hv_free(s);
}

int hv_store_schema_version(hv_store_t *s) { return s->version; }

const char *hv_store_path(hv_store_t *s) { return s->path; }

const char *hv_store_epoch(hv_store_t *s) { return s->epoch; }

const char *hv_store_last_error(hv_store_t *s) { return s->err; }

/* ---- transactions ---------------------------------------------------------------------------- */

static hv_err store_run(hv_store_t *s, int id, const char *what) {
    store_bind_t b = store_start(s, id);
    return store_write(s, &b, what);
}

hv_err hv_store_begin(hv_store_t *s) {
    if (!sqlite3_get_autocommit(s->db)) {
        store_set_err(s, "begin: a transaction is already open");
        return HV_ESTATE;
    }
    return store_run(s, ST_BEGIN, "begin");
}

hv_err hv_store_commit(hv_store_t *s) {
    if (sqlite3_get_autocommit(s->db)) {
        store_set_err(s, "commit: no transaction is open");
        return HV_ESTATE;
    }
    return store_run(s, ST_COMMIT, "commit");
}

hv_err hv_store_rollback(hv_store_t *s) {
    if (sqlite3_get_autocommit(s->db)) {
        return HV_OK; // nothing open, or sqlite already rolled back after an error
    }
    return store_run(s, ST_ROLLBACK, "rollback");
}

/* ---- nodes ----------------------------------------------------------------------------------- */

static const store_col_t node_cols[] = {SCOL(hv_node_row_t, id, 0),
                                        SCOL(hv_node_row_t, name, 1),
                                        SCOL(hv_node_row_t, addrs, 2),
                                        SCOL(hv_node_row_t, labels, 3),
                                        SCOL(hv_node_row_t, instance_id, 4),
                                        SCOL(hv_node_row_t, state, 5),
                                        SCOL(hv_node_row_t, peer, 6),
                                        SCOL(hv_node_row_t, slots, 7),
                                        SCOL(hv_node_row_t, gpus, 8),
                                        SCOL(hv_node_row_t, cpus, 9),
                                        SCOL(hv_node_row_t, preemptible, 10),
                                        SCOL(hv_node_row_t, incarnation, 11),
                                        SCOL(hv_node_row_t, registered_ms, 12),
                                        SCOL(hv_node_row_t, last_seen_ms, 13),
                                        SCOL(hv_node_row_t, memory_mb, 14)};

static const store_rows_t node_rows = STORE_ROWS(hv_node_row_t, node_cols, NULL);

void hv_store_node_fini(hv_node_row_t *row) { store_row_fini(&node_rows, row); }

void hv_store_node_free_list(hv_node_row_t *rows, size_t n) {
    store_free_rows(&node_rows, rows, n);
}

hv_err hv_store_node_upsert(hv_store_t *s, hv_node_row_t *row) {
    hv_err rc;
    if (row == NULL || row->name == NULL || row->name[0] == '\0') {
        store_set_err(s, "node upsert: a node needs a name");
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_NODE_UPSERT);
    bind_text(&b, 1, row->name);
    bind_text(&b, 2, row->addrs);
    bind_text(&b, 3, row->labels);
    bind_text(&b, 4, row->instance_id);
    bind_text(&b, 5, row->state != NULL ? row->state : "alive");
    bind_text(&b, 6, row->peer);
    bind_u64(&b, 7, row->slots);
    bind_u64(&b, 8, row->gpus);
    bind_u64(&b, 9, row->cpus);
    bind_int(&b, 10, row->preemptible != 0);
    bind_u64(&b, 11, row->incarnation);
    bind_u64(&b, 12, row->registered_ms);
    bind_u64(&b, 13, row->last_seen_ms);
    bind_u64(&b, 14, row->memory_mb);
    if ((rc = store_bound(s, &b, "node upsert")) != HV_OK) {
        goto out;
    }
    /* RETURNING yields the id on both paths (insert and update); the statement must then run
     * to completion so that its implicit transaction commits here, not at the next reset. */
    int src = sqlite3_step(b.st);
    if (src != SQLITE_ROW) {
        rc = store_fail(s, src, "node upsert");
        goto out;
    }
    uint64_t id = col_u64(b.st, 0);
    if ((rc = store_exec_stmt(s, b.st, "node upsert")) != HV_OK) {
        goto out;
    }
    row->id = id;
out:
    store_release(b.st);
    return rc;
}

hv_err hv_store_node_set_state(hv_store_t *s, uint64_t id, const char *state,
                               uint64_t last_seen_ms) {
    store_bind_t b = store_start(s, ST_NODE_SET_STATE);
    bind_u64(&b, 1, id);
    bind_text(&b, 2, state);
    bind_u64(&b, 3, last_seen_ms);
    return store_write_one(s, &b, "node set state", "node", key_id(id));
}

hv_err hv_store_node_get(hv_store_t *s, uint64_t id, hv_node_row_t *out) {
    return store_get_by_key(s, ST_NODE_GET, key_id(id), &node_rows, out, "node get", "node");
}

hv_err hv_store_node_list(hv_store_t *s, hv_node_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_NODE_LIST);
    return store_list(s, &b, &node_rows, "node list", out, n);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

static const store_col_t job_cols[] = {SCOL(hv_job_row_t, id, 0),
                                       SCOL(hv_job_row_t, name, 1),
                                       SCOL(hv_job_row_t, state, 2),
                                       SCOL(hv_job_row_t, reason, 3),
                                       SCOL_BLOB(hv_job_row_t, spec, spec_len, 4),
                                       SCOL(hv_job_row_t, np, 5),
                                       SCOL(hv_job_row_t, min_np, 6),
                                       SCOL(hv_job_row_t, max_np, 7),
                                       SCOL(hv_job_row_t, max_resets, 8),
                                       SCOL(hv_job_row_t, timeout_s, 9),
                                       SCOL(hv_job_row_t, resets, 10),
                                       SCOL(hv_job_row_t, generation, 11),
                                       SCOL(hv_job_row_t, submitted_ms, 12),
                                       SCOL(hv_job_row_t, started_ms, 13),
                                       SCOL(hv_job_row_t, ended_ms, 14),
                                       SCOL(hv_job_row_t, elastic, 15),
                                       SCOL(hv_job_row_t, check_every, 16),
                                       SCOL(hv_job_row_t, elastic_timeout_s, 17),
                                       SCOL(hv_job_row_t, rdzv_timeout_s, 18),
                                       SCOL(hv_job_row_t, cooldown_min_s, 19),
                                       SCOL(hv_job_row_t, cooldown_max_s, 20),
                                       SCOL(hv_job_row_t, max_strikes, 21),
                                       SCOL(hv_job_row_t, slots_per_host, 22),
                                       SCOL(hv_job_row_t, size, 23),
                                       SCOL(hv_job_row_t, cross_size, 24),
                                       SCOL(hv_job_row_t, round_open, 25),
                                       SCOL(hv_job_row_t, round_rollback, 26),
                                       SCOL(hv_job_row_t, round_reason, 27),
                                       SCOL(hv_job_row_t, round_opened_ms, 28),
                                       SCOL(hv_job_row_t, round_deadline_ms, 29),
                                       SCOL(hv_job_row_t, round_fail_at_ms, 30),
                                       SCOL(hv_job_row_t, target_np, 31),
                                       SCOL(hv_job_row_t, resume_gen, 32),
                                       SCOL(hv_job_row_t, resumes, 33),
                                       SCOL(hv_job_row_t, round_code, 34),
                                       SCOL(hv_job_row_t, priority, 35),
                                       SCOL(hv_job_row_t, preemptible, 36),
                                       SCOL(hv_job_row_t, fleet_target, 37),
                                       SCOL(hv_job_row_t, fleet_reason, 38),
                                       SCOL(hv_job_row_t, fleet_cause, 39),
                                       SCOL(hv_job_row_t, fleet_ms, 40),
                                       SCOL(hv_job_row_t, resized_ms, 41),
                                       SCOL(hv_job_row_t, ns, 42)};

static const store_rows_t job_rows = STORE_ROWS(hv_job_row_t, job_cols, NULL);

void hv_store_job_fini(hv_job_row_t *row) { store_row_fini(&job_rows, row); }

void hv_store_job_free_list(hv_job_row_t *rows, size_t n) { store_free_rows(&job_rows, rows, n); }

/* Binds ?1..?14 and ?16..?42 (?15 is the id of an update); ST_JOB_UPDATE leaves ?4 (spec)
 * out. */
static void job_bind(store_bind_t *b, const hv_job_row_t *row, int with_spec) {
    bind_text(b, 1, row->name);
    bind_text(b, 2, row->state != NULL ? row->state : "pending");
    bind_text(b, 3, row->reason);
    if (with_spec) {
        bind_blob(b, 4, row->spec, row->spec_len);
    }
    bind_u64(b, 5, row->np);
    bind_u64(b, 6, row->min_np);
    bind_u64(b, 7, row->max_np);
    bind_u64(b, 8, row->max_resets);
    bind_u64(b, 9, row->timeout_s);
    bind_u64(b, 10, row->resets);
    bind_u64(b, 11, row->generation);
    bind_u64(b, 12, row->submitted_ms);
    bind_u64(b, 13, row->started_ms);
    bind_u64(b, 14, row->ended_ms);
    bind_int(b, 16, row->elastic != 0);
    bind_u64(b, 17, row->check_every);
    bind_u64(b, 18, row->elastic_timeout_s);
    bind_u64(b, 19, row->rdzv_timeout_s);
    bind_u64(b, 20, row->cooldown_min_s);
    bind_u64(b, 21, row->cooldown_max_s);
    bind_u64(b, 22, row->max_strikes);
    bind_u64(b, 23, row->slots_per_host);
    bind_u64(b, 24, row->size);
    bind_u64(b, 25, row->cross_size);
    bind_int(b, 26, row->round_open != 0);
    bind_int(b, 27, row->round_rollback != 0);
    bind_text(b, 28, row->round_reason);
    bind_u64(b, 29, row->round_opened_ms);
    bind_u64(b, 30, row->round_deadline_ms);
    bind_u64(b, 31, row->round_fail_at_ms);
    bind_u64(b, 32, row->target_np);
    bind_u64(b, 33, row->resume_gen);
    bind_u64(b, 34, row->resumes);
    bind_u64(b, 35, row->round_code);
    bind_int(b, 36, row->priority);
    bind_int(b, 37, row->preemptible != 0);
    bind_u64(b, 38, row->fleet_target);
    bind_text(b, 39, row->fleet_reason != NULL ? row->fleet_reason : "");
    bind_u64(b, 40, row->fleet_cause);
    bind_u64(b, 41, row->fleet_ms);
    bind_u64(b, 42, row->resized_ms);
    bind_text(b, 43, row->ns != NULL ? row->ns : "");
}

/* Records that job_id uses the artifact digest (already there: nothing). */
static hv_err job_artifact_ref(hv_store_t *s, uint64_t job_id, const char *digest) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(
        s->db, "INSERT OR IGNORE INTO job_artifacts (job_id, digest) VALUES (?1, ?2)", -1, &st,
        NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)job_id);
        sqlite3_bind_text(st, 2, digest, -1, SQLITE_STATIC);
        src = sqlite3_step(st);
        src = src == SQLITE_DONE ? SQLITE_OK : src;
    }
    if (src != SQLITE_OK) {
        store_set_err(s, "job artifacts: %s", sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(st);
    return src == SQLITE_OK ? HV_OK : store_err_from_sqlite(src);
}

hv_err hv_store_job_insert(hv_store_t *s, hv_job_row_t *row) {
    hv_err rc;
    if (row == NULL) {
        return HV_EINVAL;
    }
    /* The job and its artifacts' references are one write: a prune never sees the job without
     * them. Inside the caller's transaction when one is open. */
    int own = row->nartifacts > 0 && sqlite3_get_autocommit(s->db);
    if (own && (rc = hv_store_begin(s)) != HV_OK) {
        return rc;
    }
    store_bind_t b = store_start(s, ST_JOB_INSERT);
    job_bind(&b, row, 1);
    if ((rc = store_write(s, &b, "job insert")) != HV_OK) {
        goto out;
    }
    uint64_t id = (uint64_t)sqlite3_last_insert_rowid(s->db);
    for (size_t i = 0; i < row->nartifacts && rc == HV_OK; i++) {
        rc = job_artifact_ref(s, id, row->artifacts[i]);
    }
    if (rc == HV_OK && own) {
        rc = hv_store_commit(s);
    }
    if (rc == HV_OK) {
        row->id = id;
    }
out:
    if (rc != HV_OK && own) {
        hv_store_rollback(s);
    }
    return rc;
}

hv_err hv_store_job_update(hv_store_t *s, const hv_job_row_t *row) {
    if (row == NULL) {
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_JOB_UPDATE);
    job_bind(&b, row, 0);
    bind_u64(&b, 15, row->id);
    return store_write_one(s, &b, "job update", "job", key_id(row->id));
}

hv_err hv_store_job_get(hv_store_t *s, uint64_t id, hv_job_row_t *out) {
    return store_get_by_key(s, ST_JOB_GET, key_id(id), &job_rows, out, "job get", "job");
}

hv_err hv_store_job_list(hv_store_t *s, int active_only, uint32_t limit, hv_job_row_t **out,
                         size_t *n) {
    store_bind_t b = store_start(s, ST_JOB_LIST);
    bind_int(&b, 1, active_only != 0);
    bind_limit(&b, 2, limit);
    return store_list(s, &b, &job_rows, "job list", out, n);
}

hv_err hv_store_job_page(hv_store_t *s, uint64_t before_id, uint32_t limit, hv_job_row_t **out,
                         size_t *n) {
    store_bind_t b = store_start(s, ST_JOB_PAGE);
    bind_u64(&b, 1, before_id);
    bind_limit(&b, 2, limit);
    return store_list(s, &b, &job_rows, "job page", out, n);
}

/* ---- workers --------------------------------------------------------------------------------- */

static const store_col_t worker_cols[] = {
    SCOL(hv_worker_row_t, id, 0),          SCOL(hv_worker_row_t, job_id, 1),
    SCOL(hv_worker_row_t, node_id, 2),     SCOL(hv_worker_row_t, rank, 3),
    SCOL(hv_worker_row_t, attempt, 4),     SCOL(hv_worker_row_t, local_rank, 5),
    SCOL(hv_worker_row_t, local_size, 6),  SCOL(hv_worker_row_t, generation, 7),
    SCOL(hv_worker_row_t, gpu, 8),         SCOL(hv_worker_row_t, pid, 9),
    SCOL(hv_worker_row_t, exit_code, 10),  SCOL(hv_worker_row_t, term_signal, 11),
    SCOL(hv_worker_row_t, state, 12),      SCOL(hv_worker_row_t, reason, 13),
    SCOL(hv_worker_row_t, started_ms, 14), SCOL(hv_worker_row_t, ended_ms, 15),
    SCOL(hv_worker_row_t, member_gen, 16), SCOL(hv_worker_row_t, joined_gen, 17),
    SCOL(hv_worker_row_t, cross_rank, 18), SCOL(hv_worker_row_t, done, 19),
    SCOL(hv_worker_row_t, removed, 20),    SCOL(hv_worker_row_t, addr, 21)};

static const store_rows_t worker_rows = STORE_ROWS(hv_worker_row_t, worker_cols, NULL);

void hv_store_worker_fini(hv_worker_row_t *row) { store_row_fini(&worker_rows, row); }

void hv_store_worker_free_list(hv_worker_row_t *rows, size_t n) {
    store_free_rows(&worker_rows, rows, n);
}

/* Binds ?1..?15 and ?17..?22 (?16 is the id of an update). */
static void worker_bind(store_bind_t *b, const hv_worker_row_t *row) {
    bind_u64(b, 1, row->job_id);
    bind_u64(b, 2, row->node_id);
    bind_u64(b, 3, row->rank);
    bind_u64(b, 4, row->attempt);
    bind_u64(b, 5, row->local_rank);
    bind_u64(b, 6, row->local_size);
    bind_u64(b, 7, row->generation);
    bind_int(b, 8, row->gpu);
    bind_int(b, 9, row->pid);
    bind_int(b, 10, row->exit_code);
    bind_int(b, 11, row->term_signal);
    bind_text(b, 12, row->state != NULL ? row->state : "pending");
    bind_text(b, 13, row->reason);
    bind_u64(b, 14, row->started_ms);
    bind_u64(b, 15, row->ended_ms);
    bind_u64(b, 17, row->member_gen);
    bind_u64(b, 18, row->joined_gen);
    bind_u64(b, 19, row->cross_rank);
    bind_int(b, 20, row->done != 0);
    bind_int(b, 21, row->removed != 0);
    bind_text(b, 22, row->addr);
}

hv_err hv_store_worker_insert(hv_store_t *s, hv_worker_row_t *row) {
    if (row == NULL) {
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_WORKER_INSERT);
    worker_bind(&b, row);
    hv_err rc = store_write(s, &b, "worker insert");
    if (rc == HV_OK) {
        row->id = (uint64_t)sqlite3_last_insert_rowid(s->db);
    }
    return rc;
}

hv_err hv_store_worker_update(hv_store_t *s, const hv_worker_row_t *row) {
    if (row == NULL) {
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_WORKER_UPDATE);
    worker_bind(&b, row);
    bind_u64(&b, 16, row->id);
    return store_write_one(s, &b, "worker update", "worker", key_id(row->id));
}

hv_err hv_store_worker_get(hv_store_t *s, uint64_t id, hv_worker_row_t *out) {
    return store_get_by_key(s, ST_WORKER_GET, key_id(id), &worker_rows, out, "worker get",
                            "worker");
}

hv_err hv_store_worker_list(hv_store_t *s, uint64_t job_id, int active_only, hv_worker_row_t **out,
                            size_t *n) {
    /* Two statements rather than "job_id = ? OR ? = 0" so the per-job one uses workers_job. */
    store_bind_t b = store_start(s, job_id == 0 ? ST_WORKER_LIST_ALL : ST_WORKER_LIST_JOB);
    bind_int(&b, 1, active_only != 0);
    if (job_id != 0) {
        bind_u64(&b, 2, job_id);
    }
    return store_list(s, &b, &worker_rows, "worker list", out, n);
}

/* ---- events ---------------------------------------------------------------------------------- */

static const store_col_t event_cols[] = {
    SCOL(hv_event_row_t, seq, 0),          SCOL(hv_event_row_t, time_ms, 1),
    SCOL(hv_event_row_t, job_id, 2),       SCOL(hv_event_row_t, node_id, 3),
    SCOL(hv_event_row_t, kind, 4),         SCOL(hv_event_row_t, message, 5),
    SCOL(hv_event_row_t, data, 6),         SCOL(hv_event_row_t, f.generation, 7),
    SCOL(hv_event_row_t, node, 9),         SCOL(hv_event_row_t, f.worker_id, 10),
    SCOL(hv_event_row_t, f.rank, 11),      SCOL(hv_event_row_t, f.duration_ms, 12),
    SCOL(hv_event_row_t, f.job_state, 13), SCOL_FLAG(hv_event_row_t, f.rollback, 14),
    SCOL(hv_event_row_t, f.actor_id, 15)};

/* The reason (a known code, else none) and the node the fields name (the event's own). */
static hv_err event_more(sqlite3_stmt *st, void *vrow) {
    hv_event_row_t *r = vrow;
    uint32_t reason = col_u32(st, 8);
    r->f.reason = reason < HV_EV__COUNT ? (hv_ev_reason_t)reason : HV_EV_NONE;
    r->f.node_id = r->node_id;
    return HV_OK;
}

static const store_rows_t event_rows = STORE_ROWS(hv_event_row_t, event_cols, event_more);

void hv_store_event_free_list(hv_event_row_t *rows, size_t n) {
    store_free_rows(&event_rows, rows, n);
}

hv_err hv_store_event_append(hv_store_t *s, uint64_t job_id, uint64_t node_id, const char *kind,
                             const char *message, const char *data, uint64_t *seq_out) {
    return hv_store_event_append_f(s, job_id, node_id, kind, message, data, NULL, NULL, seq_out);
}

hv_err hv_store_event_append_f(hv_store_t *s, uint64_t job_id, uint64_t node_id, const char *kind,
                               const char *message, const char *data, const hv_ev_fields_t *f,
                               const char *node, uint64_t *seq_out) {
    static const hv_ev_fields_t none = {0};
    if (f == NULL) {
        f = &none;
    }
    store_bind_t b = store_start(s, ST_EVENT_APPEND);
    bind_u64(&b, 1, hv_wall_ms());
    bind_u64(&b, 2, job_id);
    bind_u64(&b, 3, node_id);
    bind_text(&b, 4, kind);
    bind_text(&b, 5, message);
    bind_text(&b, 6, data);
    bind_u64(&b, 7, f->generation);
    bind_u64(&b, 8, (uint64_t)f->reason);
    bind_text(&b, 9, node != NULL ? node : "");
    bind_u64(&b, 10, f->worker_id);
    bind_u64(&b, 11, f->rank);
    bind_u64(&b, 12, f->duration_ms);
    bind_u64(&b, 13, f->job_state);
    bind_int(&b, 14, f->rollback != 0);
    bind_u64(&b, 15, f->actor_id);
    hv_err rc = store_write(s, &b, "event append");
    if (rc == HV_OK && seq_out != NULL) {
        *seq_out = (uint64_t)sqlite3_last_insert_rowid(s->db);
    }
    return rc;
}

hv_err hv_store_event_list(hv_store_t *s, uint64_t job_id, uint64_t after_seq, uint32_t limit,
                           hv_event_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, job_id == 0 ? ST_EVENT_LIST_ALL : ST_EVENT_LIST_JOB);
    bind_u64(&b, 1, after_seq > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : after_seq);
    bind_limit(&b, 2, limit);
    if (job_id != 0) {
        bind_u64(&b, 3, job_id);
    }
    return store_list(s, &b, &event_rows, "event list", out, n);
}

hv_err hv_store_event_list_actor(hv_store_t *s, uint64_t actor_id, uint32_t limit,
                                 hv_event_row_t **out, size_t *n, uint64_t *total) {
    hv_err rc;
    *out = NULL;
    *n = 0;
    if (total != NULL) {
        store_bind_t cb = store_start(s, ST_EVENT_COUNT_ACTOR);
        bind_u64(&cb, 1, actor_id);
        if ((rc = store_number(s, &cb, "actor event count", total)) != HV_OK) {
            return rc;
        }
    }
    store_bind_t b = store_start(s, ST_EVENT_LIST_ACTOR);
    bind_u64(&b, 1, actor_id);
    bind_limit(&b, 2, limit);
    return store_list(s, &b, &event_rows, "actor event list", out, n);
}

hv_err hv_store_job_states(hv_store_t *s, void (*fn)(const char *state, uint64_t n, void *ud),
                           void *ud) {
    store_bind_t b = store_start(s, ST_JOB_STATES);
    hv_err rc = store_bound(s, &b, "count jobs by state");
    int src = SQLITE_DONE;
    while (rc == HV_OK && (src = sqlite3_step(b.st)) == SQLITE_ROW) {
        const char *state = (const char *)sqlite3_column_text(b.st, 0);
        sqlite3_int64 n = sqlite3_column_int64(b.st, 1);
        fn(state != NULL ? state : "", n > 0 ? (uint64_t)n : 0, ud);
    }
    if (rc == HV_OK && src != SQLITE_DONE) {
        rc = store_fail(s, src, "count jobs by state");
    }
    store_release(b.st);
    return rc;
}

hv_err hv_store_event_reasons(hv_store_t *s, const char *kind, uint32_t min_gen,
                              void (*fn)(hv_ev_reason_t reason, int rollback, uint64_t n, void *ud),
                              void *ud) {
    store_bind_t b = store_start(s, ST_EVENT_REASONS);
    bind_text(&b, 1, kind);
    bind_u64(&b, 2, min_gen);
    hv_err rc = store_bound(s, &b, "count events by reason");
    int src = SQLITE_DONE;
    while (rc == HV_OK && (src = sqlite3_step(b.st)) == SQLITE_ROW) {
        sqlite3_int64 r = sqlite3_column_int64(b.st, 0);
        sqlite3_int64 n = sqlite3_column_int64(b.st, 2);
        fn(r > 0 && r < HV_EV__COUNT ? (hv_ev_reason_t)r : HV_EV_NONE,
           sqlite3_column_int(b.st, 1) != 0, n > 0 ? (uint64_t)n : 0, ud);
    }
    if (rc == HV_OK && src != SQLITE_DONE) {
        rc = store_fail(s, src, "count events by reason");
    }
    store_release(b.st);
    return rc;
}

/* One number from an event statement bound to (job_id, kind, arg). */
static hv_err event_number(hv_store_t *s, int which, uint64_t job_id, const char *kind,
                           const char *arg, const char *what, uint64_t *out) {
    store_bind_t b = store_start(s, which);
    bind_u64(&b, 1, job_id);
    bind_text(&b, 2, kind);
    bind_text(&b, 3, arg);
    return store_number(s, &b, what, out);
}

hv_err hv_store_event_count(hv_store_t *s, uint64_t job_id, const char *kind, const char *data_has,
                            uint64_t *n) {
    return event_number(s, ST_EVENT_COUNT, job_id, kind, data_has != NULL ? data_has : "",
                        "event count", n);
}

hv_err hv_store_event_sum(hv_store_t *s, uint64_t job_id, const char *kind, const char *field,
                          uint64_t *sum) {
    char path[80];
    snprintf(path, sizeof(path), "$.%s", field);
    return event_number(s, ST_EVENT_SUM, job_id, kind, path, "event sum", sum);
}

/* ---- artifacts ------------------------------------------------------------------------------- */

static const store_col_t artifact_cols[] = {
    SCOL(hv_artifact_row_t, digest, 0), SCOL(hv_artifact_row_t, path, 1),
    SCOL(hv_artifact_row_t, size, 2), SCOL(hv_artifact_row_t, created_ms, 3),
    SCOL(hv_artifact_row_t, last_used_ms, 4)};

static const store_rows_t artifact_rows = STORE_ROWS(hv_artifact_row_t, artifact_cols, NULL);

void hv_store_artifact_fini(hv_artifact_row_t *row) { store_row_fini(&artifact_rows, row); }

hv_err hv_store_artifact_put(hv_store_t *s, const hv_artifact_row_t *row) {
    if (row == NULL || row->digest == NULL || row->digest[0] == '\0') {
        store_set_err(s, "artifact put: an artifact needs a digest");
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_ARTIFACT_PUT);
    bind_text(&b, 1, row->digest);
    bind_text(&b, 2, row->path);
    bind_u64(&b, 3, row->size);
    bind_u64(&b, 4, row->created_ms);
    bind_u64(&b, 5, row->last_used_ms);
    return store_write(s, &b, "artifact put");
}

hv_err hv_store_artifact_get(hv_store_t *s, const char *digest, hv_artifact_row_t *out) {
    return store_get_by_key(s, ST_ARTIFACT_GET, key_text(digest), &artifact_rows, out,
                            "artifact get", "artifact");
}

hv_err hv_store_artifact_touch(hv_store_t *s, const char *digest, uint64_t now_ms) {
    store_bind_t b = store_start(s, ST_ARTIFACT_TOUCH);
    bind_text(&b, 1, digest);
    bind_u64(&b, 2, now_ms);
    return store_write_one(s, &b, "artifact touch", "artifact", key_text(digest));
}

void hv_store_artifact_free_list(hv_artifact_row_t *rows, size_t n) {
    store_free_rows(&artifact_rows, rows, n);
}

/* meta.job_artifacts: "fill" until hv_store_job_artifacts_fill ran, "done" after. */
static int job_artifacts_state_done(hv_store_t *s) {
    sqlite3_stmt *st = NULL;
    int done = 0;
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'job_artifacts'", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        done = v != NULL && strcmp((const char *)v, "done") == 0;
    }
    sqlite3_finalize(st);
    return done;
}

int hv_store_job_artifacts_complete(hv_store_t *s) { return job_artifacts_state_done(s); }

hv_err hv_store_job_artifacts_fill(hv_store_t *s, hv_store_spec_digests_fn fn, void *ud,
                                   size_t *filled) {
    if (filled != NULL) {
        *filled = 0;
    }
    if (job_artifacts_state_done(s)) {
        return HV_OK;
    }
    char(*dg)[65] = hv_calloc(HV_STORE_SPEC_DIGESTS_MAX, sizeof(*dg));
    if (dg == NULL) {
        return HV_ENOMEM;
    }
    hv_err rc = hv_store_begin(s);
    if (rc != HV_OK) {
        hv_free(dg);
        return rc;
    }
    sqlite3_stmt *st = NULL;
    size_t jobs = 0;
    int src = sqlite3_prepare_v2(s->db, "SELECT id, spec FROM jobs ORDER BY id", -1, &st, NULL);
    while (src == SQLITE_OK && rc == HV_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);
        const uint8_t *spec = sqlite3_column_blob(st, 1);
        size_t len = (size_t)sqlite3_column_bytes(st, 1);
        size_t n = spec != NULL ? fn(ud, spec, len, dg, HV_STORE_SPEC_DIGESTS_MAX) : 0;
        for (size_t i = 0; i < n && rc == HV_OK; i++) {
            rc = job_artifact_ref(s, id, dg[i]);
        }
        jobs++;
        src = SQLITE_OK;
    }
    if (rc == HV_OK && src != SQLITE_DONE) {
        store_set_err(s, "job artifacts: reading the jobs: %s", sqlite3_errmsg(s->db));
        rc = store_err_from_sqlite(src);
    }
    sqlite3_finalize(st);
    if (rc == HV_OK) {
        char msg[128];
        src = store_exec_sql(s->db, "UPDATE meta SET value = 'done' WHERE key = 'job_artifacts'",
                             msg, sizeof(msg));
        if (src != SQLITE_OK) {
            store_set_err(s, "job artifacts: %s", msg);
            rc = store_err_from_sqlite(src);
        }
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(s);
    }
    if (rc != HV_OK) {
        hv_store_rollback(s);
    } else if (filled != NULL) {
        *filled = jobs;
    }
    hv_free(dg);
    return rc;
}

hv_err hv_store_artifacts_unused_delete(hv_store_t *s, uint64_t before_ms, size_t cap,
                                        hv_artifact_row_t **out, size_t *n) {
    static const char sql[] =
        "SELECT " ARTIFACT_COLS " FROM artifacts a WHERE a.created_ms < ?1 AND"
        " a.last_used_ms < ?1 AND NOT EXISTS (SELECT 1 FROM job_artifacts r WHERE"
        " r.digest = a.digest) AND NOT EXISTS (SELECT 1 FROM actors x WHERE x.state <> 'dead'"
        " AND (instr(x.spec, CAST(a.digest AS BLOB)) > 0 OR x.state_digest = a.digest)) ORDER BY "
        "a.created_ms LIMIT ?2";
    *out = NULL;
    *n = 0;
    if (!job_artifacts_state_done(s)) {
        store_set_err(s, "artifacts: the jobs' references are not complete yet");
        return HV_ESTATE;
    }
    if (cap == 0) {
        return HV_OK;
    }
    hv_artifact_row_t *rows = NULL;
    size_t got = 0;
    sqlite3_stmt *st = NULL, *del = NULL;
    hv_err rc = hv_store_begin(s);
    if (rc != HV_OK) {
        return rc;
    }
    int src = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (src == SQLITE_OK) {
        src = sqlite3_prepare_v2(s->db, "DELETE FROM artifacts WHERE digest = ?1", -1, &del, NULL);
    }
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)(before_ms > INT64_MAX ? INT64_MAX : before_ms));
        sqlite3_bind_int64(st, 2, (sqlite3_int64)cap);
    }
    /* Read them all first: no statement stays open on the rows being deleted. */
    while (src == SQLITE_OK && rc == HV_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if (rows == NULL && (rows = hv_calloc(cap, sizeof(*rows))) == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        if ((rc = store_row_read(&artifact_rows, st, &rows[got])) == HV_OK) {
            got++;
        }
        src = SQLITE_OK;
    }
    if (rc == HV_OK && src != SQLITE_DONE && src != SQLITE_OK) {
        store_set_err(s, "artifacts: finding unused ones: %s", sqlite3_errmsg(s->db));
        rc = store_err_from_sqlite(src);
    }
    sqlite3_reset(st);
    for (size_t i = 0; i < got && rc == HV_OK; i++) {
        sqlite3_reset(del);
        sqlite3_bind_text(del, 1, rows[i].digest, -1, SQLITE_STATIC);
        if ((src = sqlite3_step(del)) != SQLITE_DONE) {
            store_set_err(s, "artifacts: deleting %s: %s", rows[i].digest, sqlite3_errmsg(s->db));
            rc = store_err_from_sqlite(src);
        }
        sqlite3_reset(del);
    }
    sqlite3_finalize(st);
    sqlite3_finalize(del);
    if (rc == HV_OK) {
        rc = hv_store_commit(s);
    }
    if (rc != HV_OK) {
        hv_store_rollback(s);
        hv_store_artifact_free_list(rows, got);
        return rc;
    }
    *out = rows;
    *n = got;
    return HV_OK;
}

/* ---- blacklist ------------------------------------------------------------------------------- */

static const store_col_t blacklist_cols[] = {
    SCOL(hv_blacklist_row_t, job_id, 0),     SCOL(hv_blacklist_row_t, node_id, 1),
    SCOL(hv_blacklist_row_t, reason, 2),     SCOL(hv_blacklist_row_t, strikes, 3),
    SCOL(hv_blacklist_row_t, until_ms, 4),   SCOL(hv_blacklist_row_t, permanent, 5),
    SCOL(hv_blacklist_row_t, incarnation, 6)};

static const store_rows_t blacklist_rows = STORE_ROWS(hv_blacklist_row_t, blacklist_cols, NULL);

void hv_store_blacklist_free_list(hv_blacklist_row_t *rows, size_t n) {
    store_free_rows(&blacklist_rows, rows, n);
}

hv_err hv_store_blacklist_put(hv_store_t *s, const hv_blacklist_row_t *row) {
    if (row == NULL || row->job_id == 0 || row->node_id == 0) {
        store_set_err(s, "blacklist put: an entry needs a job id and a node id");
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_BLACKLIST_PUT);
    bind_u64(&b, 1, row->job_id);
    bind_u64(&b, 2, row->node_id);
    bind_text(&b, 3, row->reason);
    bind_u64(&b, 4, row->strikes);
    bind_u64(&b, 5, row->until_ms);
    bind_int(&b, 6, row->permanent != 0);
    bind_u64(&b, 7, row->incarnation);
    return store_write(s, &b, "blacklist put");
}

hv_err hv_store_blacklist_list(hv_store_t *s, uint64_t job_id, hv_blacklist_row_t **out,
                               size_t *n) {
    store_bind_t b = store_start(s, ST_BLACKLIST_LIST);
    bind_u64(&b, 1, job_id);
    return store_list(s, &b, &blacklist_rows, "blacklist list", out, n);
}

hv_err hv_store_blacklist_remove(hv_store_t *s, uint64_t job_id, uint64_t node_id) {
    store_bind_t b = store_start(s, ST_BLACKLIST_REMOVE);
    bind_u64(&b, 1, job_id);
    bind_u64(&b, 2, node_id);
    hv_err rc = store_write(s, &b, "blacklist remove");
    if (rc == HV_OK && sqlite3_changes(s->db) == 0) {
        store_set_err(s, "blacklist remove: node %" PRIu64 " is not blacklisted for job %" PRIu64,
                      node_id, job_id);
        rc = HV_ENOTFOUND;
    }
    return rc;
}

/* ---- instances ------------------------------------------------------------------------------- */

static const store_col_t instance_cols[] = {
    SCOL(hv_instance_row_t, id, 0),          SCOL(hv_instance_row_t, provider, 1),
    SCOL(hv_instance_row_t, state, 2),       SCOL(hv_instance_row_t, node_name, 3),
    SCOL(hv_instance_row_t, price_milli, 4), SCOL(hv_instance_row_t, created_ms, 5),
    SCOL(hv_instance_row_t, ended_ms, 6),    SCOL(hv_instance_row_t, type, 7),
    SCOL(hv_instance_row_t, handle, 8),      SCOL(hv_instance_row_t, joined_ms, 9),
    SCOL(hv_instance_row_t, reason, 10),     SCOL_FLAG(hv_instance_row_t, preempted, 11)};

static const store_rows_t instance_rows = STORE_ROWS(hv_instance_row_t, instance_cols, NULL);

void hv_store_instance_fini(hv_instance_row_t *row) { store_row_fini(&instance_rows, row); }

void hv_store_instance_free_list(hv_instance_row_t *rows, size_t n) {
    store_free_rows(&instance_rows, rows, n);
}

hv_err hv_store_instance_put(hv_store_t *s, const hv_instance_row_t *row) {
    if (row == NULL || row->id == NULL || row->id[0] == '\0') {
        store_set_err(s, "instance put: an instance needs an id");
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_INSTANCE_PUT);
    bind_text(&b, 1, row->id);
    bind_text(&b, 2, row->provider);
    bind_text(&b, 3, row->state);
    bind_text(&b, 4, row->node_name);
    bind_u64(&b, 5, row->price_milli);
    bind_u64(&b, 6, row->created_ms);
    bind_u64(&b, 7, row->ended_ms);
    bind_text(&b, 8, row->type);
    bind_text(&b, 9, row->handle);
    bind_u64(&b, 10, row->joined_ms);
    bind_text(&b, 11, row->reason);
    bind_int(&b, 12, row->preempted != 0);
    return store_write(s, &b, "instance put");
}

hv_err hv_store_instance_get(hv_store_t *s, const char *id, hv_instance_row_t *out) {
    return store_get_by_key(s, ST_INSTANCE_GET, key_text(id), &instance_rows, out, "instance get",
                            "instance");
}

hv_err hv_store_instance_list(hv_store_t *s, int active_only, hv_instance_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_INSTANCE_LIST);
    bind_int(&b, 1, active_only != 0);
    return store_list(s, &b, &instance_rows, "instance list", out, n);
}

/* ---- audit trail (schema v6) ----------------------------------------------------------------- */

static const store_col_t audit_cols[] = {SCOL(hv_audit_row_t, seq, 0),
                                         SCOL(hv_audit_row_t, time_ms, 1),
                                         SCOL_CHARS(hv_audit_row_t, who_kind, 2),
                                         SCOL_CHARS(hv_audit_row_t, who_id, 3),
                                         SCOL_CHARS(hv_audit_row_t, peer, 4),
                                         SCOL_CHARS(hv_audit_row_t, method, 5),
                                         SCOL_CHARS(hv_audit_row_t, target, 6),
                                         SCOL(hv_audit_row_t, code, 7),
                                         SCOL_CHARS(hv_audit_row_t, result, 8)};

static const store_rows_t audit_rows = STORE_ROWS(hv_audit_row_t, audit_cols, NULL);

hv_err hv_store_audit_append(hv_store_t *s, const hv_audit_row_t *row, uint64_t keep) {
    store_bind_t b = store_start(s, ST_AUDIT_APPEND);
    bind_u64(&b, 1, row->time_ms);
    bind_text(&b, 2, row->who_kind);
    bind_text(&b, 3, row->who_id);
    bind_text(&b, 4, row->peer);
    bind_text(&b, 5, row->method);
    bind_text(&b, 6, row->target);
    bind_int(&b, 7, row->code);
    bind_text(&b, 8, row->result);
    hv_err rc = store_write(s, &b, "audit append");
    if (rc != HV_OK || keep == 0) {
        return rc;
    }
    b = store_start(s, ST_AUDIT_TRIM);
    bind_u64(&b, 1, keep);
    return store_write(s, &b, "audit trim");
}

hv_err hv_store_audit_list(hv_store_t *s, const hv_audit_filter_t *f, hv_audit_row_t **out,
                           size_t *n) {
    store_bind_t b = store_start(s, ST_AUDIT_LIST);
    bind_u64(&b, 1, f->before_seq);
    bind_u64(&b, 2, f->since_ms);
    bind_text(&b, 3, f->who != NULL ? f->who : "");
    bind_text(&b, 4, f->method != NULL ? f->method : "");
    bind_int(&b, 5, f->refused_only != 0);
    bind_limit(&b, 6, f->limit);
    return store_list(s, &b, &audit_rows, "audit list", out, n);
}

/* ---- join tokens (schema v6) ----------------------------------------------------------------- */

static const store_col_t jtoken_cols[] = {
    SCOL_CHARS(hv_jtoken_row_t, id, 0),   SCOL_CHARS(hv_jtoken_row_t, secret_sha256, 1),
    SCOL(hv_jtoken_row_t, created_ms, 2), SCOL(hv_jtoken_row_t, expires_ms, 3),
    SCOL(hv_jtoken_row_t, max_uses, 4),   SCOL(hv_jtoken_row_t, uses, 5),
    SCOL(hv_jtoken_row_t, revoked_ms, 6), SCOL_CHARS(hv_jtoken_row_t, created_by, 7)};

static const store_rows_t jtoken_rows = STORE_ROWS(hv_jtoken_row_t, jtoken_cols, NULL);

hv_err hv_store_jtoken_insert(hv_store_t *s, const hv_jtoken_row_t *row) {
    store_bind_t b = store_start(s, ST_JTOKEN_INSERT);
    bind_text(&b, 1, row->id);
    bind_text(&b, 2, row->secret_sha256);
    bind_u64(&b, 3, row->created_ms);
    bind_u64(&b, 4, row->expires_ms);
    bind_u64(&b, 5, row->max_uses);
    bind_text(&b, 6, row->created_by);
    return store_write(s, &b, "join token insert");
}

hv_err hv_store_jtoken_get(hv_store_t *s, const char *id, hv_jtoken_row_t *out) {
    store_bind_t b = store_start(s, ST_JTOKEN_GET);
    bind_text(&b, 1, id);
    hv_err rc = store_get(s, &b, &jtoken_rows, out, "join token get");
    if (rc == HV_ENOTFOUND) {
        store_not_found(s, "join token get", "join token", key_text(id));
    }
    return rc;
}

hv_err hv_store_jtoken_list(hv_store_t *s, hv_jtoken_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_JTOKEN_LIST);
    return store_list(s, &b, &jtoken_rows, "join token list", out, n);
}

/* One UPDATE whose WHERE is the condition: HV_ENOTFOUND when it changed no row. */
static hv_err jtoken_update(hv_store_t *s, int stmt, const char *id, uint64_t now_ms,
                            const char *what) {
    store_bind_t b = store_start(s, stmt);
    bind_text(&b, 1, id);
    bind_u64(&b, 2, now_ms);
    return store_write_one(s, &b, what, "usable join token", key_text(id));
}

hv_err hv_store_jtoken_revoke(hv_store_t *s, const char *id, uint64_t now_ms) {
    return jtoken_update(s, ST_JTOKEN_REVOKE, id, now_ms, "join token revoke");
}

hv_err hv_store_jtoken_use(hv_store_t *s, const char *id, uint64_t now_ms) {
    return jtoken_update(s, ST_JTOKEN_USE, id, now_ms, "join token use");
}

/* ---- copies of the training state (schema v7) ------------------------------------------------ */

/* The head's copies (state_copies) and the durable tier's (durable_copies) have the same rows:
 * one set of functions, the statement and the words for messages given. */
static hv_err copy_put(hv_store_t *s, int which, const char *what, const hv_copy_row_t *row) {
    if (row == NULL || row->job_id == 0) {
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, which);
    bind_u64(&b, 1, row->job_id);
    bind_u64(&b, 2, row->generation);
    bind_u64(&b, 3, row->commit);
    bind_u64(&b, 4, row->size);
    bind_text(&b, 5, row->sha256);
    bind_text(&b, 6, row->path);
    bind_u64(&b, 7, row->stored_ms);
    return store_write(s, &b, what);
}

static const store_col_t copy_cols[] = {
    SCOL(hv_copy_row_t, job_id, 0),       SCOL(hv_copy_row_t, generation, 1),
    SCOL(hv_copy_row_t, commit, 2),       SCOL(hv_copy_row_t, size, 3),
    SCOL_CHARS(hv_copy_row_t, sha256, 4), SCOL_CHARS(hv_copy_row_t, path, 5),
    SCOL(hv_copy_row_t, stored_ms, 6)};

static const store_rows_t copy_rows = STORE_ROWS(hv_copy_row_t, copy_cols, NULL);

static hv_err copy_get(hv_store_t *s, int which, const char *what, uint64_t job_id,
                       hv_copy_row_t *out) {
    store_bind_t b = store_start(s, which);
    bind_u64(&b, 1, job_id);
    hv_err rc = store_get(s, &b, &copy_rows, out, what);
    if (rc == HV_ENOTFOUND) {
        store_set_err(s, "%s: job %llu has no copy", what, (unsigned long long)job_id);
    }
    return rc;
}

static hv_err copy_remove(hv_store_t *s, int which, const char *what, uint64_t job_id) {
    store_bind_t b = store_start(s, which);
    bind_u64(&b, 1, job_id);
    return store_write(s, &b, what);
}

hv_err hv_store_copy_put(hv_store_t *s, const hv_copy_row_t *row) {
    return copy_put(s, ST_COPY_PUT, "state copy put", row);
}

hv_err hv_store_copy_get(hv_store_t *s, uint64_t job_id, hv_copy_row_t *out) {
    return copy_get(s, ST_COPY_GET, "state copy get", job_id, out);
}

hv_err hv_store_copy_remove(hv_store_t *s, uint64_t job_id) {
    return copy_remove(s, ST_COPY_REMOVE, "state copy remove", job_id);
}

hv_err hv_store_durable_put(hv_store_t *s, const hv_copy_row_t *row) {
    return copy_put(s, ST_DURABLE_PUT, "durable copy put", row);
}

hv_err hv_store_durable_get(hv_store_t *s, uint64_t job_id, hv_copy_row_t *out) {
    return copy_get(s, ST_DURABLE_GET, "durable copy get", job_id, out);
}

hv_err hv_store_durable_remove(hv_store_t *s, uint64_t job_id) {
    return copy_remove(s, ST_DURABLE_REMOVE, "durable copy remove", job_id);
}

/* ---- copies kept by peers (schema v20) -------------------------------------------------------- */

hv_err hv_store_peer_copy_put(hv_store_t *s, const hv_peer_copy_row_t *row) {
    if (row == NULL || row->copy.job_id == 0 || row->node_id == 0) {
        return HV_EINVAL;
    }
    store_bind_t b = store_start(s, ST_PEER_PUT);
    bind_u64(&b, 1, row->copy.job_id);
    bind_u64(&b, 2, row->copy.generation);
    bind_u64(&b, 3, row->copy.commit);
    bind_u64(&b, 4, row->copy.size);
    bind_text(&b, 5, row->copy.sha256);
    bind_u64(&b, 6, row->node_id);
    bind_u64(&b, 7, row->incarnation);
    bind_text(&b, 8, row->addr);
    bind_u64(&b, 9, row->copy.stored_ms);
    return store_write(s, &b, "peer copy put");
}

static const store_col_t peer_copy_cols[] = {
    SCOL(hv_peer_copy_row_t, copy.job_id, 0),       SCOL(hv_peer_copy_row_t, copy.generation, 1),
    SCOL(hv_peer_copy_row_t, copy.commit, 2),       SCOL(hv_peer_copy_row_t, copy.size, 3),
    SCOL_CHARS(hv_peer_copy_row_t, copy.sha256, 4), SCOL(hv_peer_copy_row_t, node_id, 5),
    SCOL(hv_peer_copy_row_t, incarnation, 6),       SCOL_CHARS(hv_peer_copy_row_t, addr, 7),
    SCOL(hv_peer_copy_row_t, copy.stored_ms, 8)};

static const store_rows_t peer_copy_rows = STORE_ROWS(hv_peer_copy_row_t, peer_copy_cols, NULL);

hv_err hv_store_peer_copy_get(hv_store_t *s, uint64_t job_id, hv_peer_copy_row_t *out) {
    store_bind_t b = store_start(s, ST_PEER_GET);
    bind_u64(&b, 1, job_id);
    hv_err rc = store_get(s, &b, &peer_copy_rows, out, "peer copy get");
    if (rc == HV_ENOTFOUND) {
        store_set_err(s, "peer copy get: job %llu has no copy kept by a peer",
                      (unsigned long long)job_id);
    }
    return rc;
}

hv_err hv_store_peer_copy_remove(hv_store_t *s, uint64_t job_id) {
    return copy_remove(s, ST_PEER_REMOVE, "peer copy remove", job_id);
}

hv_err hv_store_peer_copy_forget_node(hv_store_t *s, uint64_t node_id, size_t *n) {
    store_bind_t b = store_start(s, ST_PEER_FORGET_NODE);
    bind_u64(&b, 1, node_id);
    hv_err rc = store_write(s, &b, "peer copy forget node");
    if (n != NULL) {
        *n = rc == HV_OK ? (size_t)sqlite3_changes(s->db) : 0;
    }
    return rc;
}

/* ---- the fleet's throughput table (schema v21) ------------------------------------------------ */

hv_err hv_store_tput_put(hv_store_t *s, uint64_t job_id, const hv_tput_row_t *rows, size_t n) {
    if (job_id == 0 || (rows == NULL && n > 0)) {
        return HV_EINVAL;
    }
    int own = sqlite3_get_autocommit(s->db); /* else inside the caller's transaction */
    if (own) {
        HV_TRY(hv_store_begin(s));
    }
    store_bind_t b = store_start(s, ST_TPUT_CLEAR);
    bind_u64(&b, 1, job_id);
    hv_err rc = store_write(s, &b, "throughput put");
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        b = store_start(s, ST_TPUT_PUT);
        bind_u64(&b, 1, job_id);
        bind_u64(&b, 2, rows[i].size);
        bind_f64(&b, 3, rows[i].work);
        bind_f64(&b, 4, rows[i].seconds);
        rc = store_write(s, &b, "throughput put");
    }
    if (own) {
        if (rc == HV_OK) {
            rc = hv_store_commit(s);
        }
        if (rc != HV_OK) {
            (void)hv_store_rollback(s);
        }
    }
    return rc;
}

/* The work and seconds columns (doubles, which the column table does not read). */
static hv_err tput_more(sqlite3_stmt *st, void *vrow) {
    hv_tput_row_t *r = vrow;
    r->work = sqlite3_column_double(st, 2);
    r->seconds = sqlite3_column_double(st, 3);
    return HV_OK;
}

static const store_col_t tput_cols[] = {SCOL(hv_tput_row_t, job_id, 0),
                                        SCOL(hv_tput_row_t, size, 1)};

static const store_rows_t tput_rows = STORE_ROWS(hv_tput_row_t, tput_cols, tput_more);

hv_err hv_store_tput_get(hv_store_t *s, uint64_t job_id, hv_tput_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_TPUT_GET);
    bind_u64(&b, 1, job_id);
    return store_list(s, &b, &tput_rows, "throughput get", out, n);
}

/* ---- revoked node credentials (schema v8) ----------------------------------------------------- */

hv_err hv_store_revoked_put(hv_store_t *s, const hv_revoked_row_t *r) {
    store_bind_t b = store_start(s, ST_REVOKED_PUT);
    bind_u64(&b, 1, r->node_id);
    bind_u64(&b, 2, r->incarnation);
    bind_u64(&b, 3, r->revoked_ms);
    return store_write(s, &b, "revoked node put");
}

static const store_col_t revoked_cols[] = {SCOL(hv_revoked_row_t, node_id, 0),
                                           SCOL(hv_revoked_row_t, incarnation, 1),
                                           SCOL(hv_revoked_row_t, revoked_ms, 2)};

static const store_rows_t revoked_rows = STORE_ROWS(hv_revoked_row_t, revoked_cols, NULL);

hv_err hv_store_revoked_list(hv_store_t *s, hv_revoked_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_REVOKED_LIST);
    return store_list(s, &b, &revoked_rows, "revoked node list", out, n);
}

hv_err hv_store_revoked_import(hv_store_t *s, const char *path, size_t *imported, char *err,
                               size_t errlen) {
    *imported = 0;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        if (errno == ENOENT) {
            return HV_OK;
        }
        hv_err rc = hv_err_from_errno(errno);
        hv_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return rc;
    }
    hv_err rc = hv_store_begin(s);
    if (rc != HV_OK) {
        hv_errf(err, errlen, "%s: cannot store its revocations: %s", path, s->err);
    }
    char line[256];
    size_t lineno = 0, n = 0;
    while (rc == HV_OK && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        hv_revoked_row_t r = {0};
        char extra;
        if (line[strspn(line, " \t\r\n")] == '\0') {
            continue; /* a blank line */
        }
        if (sscanf(line, "%" SCNu64 " %" SCNx64 " %c", &r.node_id, &r.incarnation, &extra) != 2) {
            hv_errf(err, errlen,
                    "%s:%zu: not a revoked node credential (\"<node id> <incarnation in hex>\"); "
                    "fix or remove the line, nothing was imported",
                    path, lineno);
            rc = HV_ECORRUPT;
            break;
        }
        if ((rc = hv_store_revoked_put(s, &r)) != HV_OK) {
            hv_errf(err, errlen, "%s: cannot store its revocations: %s", path, s->err);
            break;
        }
        n++;
    }
    if (rc == HV_OK && ferror(f)) {
        hv_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        rc = HV_EIO;
    }
    fclose(f);
    if (rc == HV_OK && (rc = hv_store_commit(s)) != HV_OK) {
        hv_errf(err, errlen, "%s: cannot store its revocations: %s", path, s->err);
    }
    if (rc != HV_OK) {
        if (!sqlite3_get_autocommit(s->db)) {
            hv_store_rollback(s);
        }
        return rc;
    }
    /* Stored: the file is kept under another name (a later start does not read it again; an
     * import done twice would store nothing new). */
    char done[4200];
    snprintf(done, sizeof(done), "%s.imported", path);
    if (rename(path, done) != 0) {
        HV_LOG(HV_LOG_WARN, "store", "HV-STORE-REVOKED-IMPORT",
               "%s: imported, but cannot rename it to %s: %s (it is imported again at the next "
               "start, which changes nothing)",
               path, done, strerror(errno));
    }
    HV_LOG(HV_LOG_NOTICE, "store", "HV-STORE-REVOKED-IMPORT",
           "%s: %zu revoked node credentials imported into %s; the file is now %s", path, n,
           s->path, done);
    *imported = n;
    return HV_OK;
}

/* ---- actors (schema v10) ----------------------------------------------------------------------- */

hv_err hv_store_actor_put(hv_store_t *s, const hv_actor_row_t *r) {
    store_bind_t b = store_start(s, ST_ACTOR_PUT);
    bind_u64(&b, 1, r->id);
    bind_text(&b, 2, r->name);
    bind_text(&b, 3, r->ns);
    bind_text(&b, 4, r->class_name);
    bind_blob(&b, 5, r->spec, r->spec_len);
    bind_text(&b, 6, r->state);
    bind_text(&b, 7, r->cause);
    bind_text(&b, 8, r->reason);
    bind_u64(&b, 9, r->max_restarts);
    bind_u64(&b, 10, r->max_call_retries);
    bind_u64(&b, 11, r->restarts);
    bind_u64(&b, 12, r->moves);
    bind_u64(&b, 13, r->incarnation);
    bind_u64(&b, 14, r->slots);
    bind_u64(&b, 15, r->gpus);
    bind_u64(&b, 16, r->gpu_mask);
    bind_u64(&b, 17, r->node_id);
    bind_u64(&b, 18, r->owner_job);
    bind_int(&b, 19, r->proc_live);
    bind_int(&b, 20, r->kill_sent);
    bind_int(&b, 21, r->last_status);
    bind_int(&b, 22, r->last_signal);
    bind_text(&b, 23, r->address);
    bind_u64(&b, 24, r->created_ms);
    bind_u64(&b, 25, r->started_ms);
    bind_u64(&b, 26, r->ended_ms);
    bind_u64(&b, 27, r->next_node);
    bind_u64(&b, 28, r->next_gpu_mask);
    bind_int(&b, 29, r->has_state);
    bind_text(&b, 30, r->state_digest);
    bind_u64(&b, 31, r->state_size);
    bind_text(&b, 32, r->labels != NULL ? r->labels : "");
    bind_u64(&b, 33, r->memory_mb);
    return store_write(s, &b, "actor put");
}

static const store_col_t actor_cols[] = {SCOL(hv_actor_row_t, id, 0),
                                         SCOL(hv_actor_row_t, name, 1),
                                         SCOL(hv_actor_row_t, ns, 2),
                                         SCOL(hv_actor_row_t, class_name, 3),
                                         SCOL_BLOB(hv_actor_row_t, spec, spec_len, 4),
                                         SCOL_CHARS(hv_actor_row_t, state, 5),
                                         SCOL_CHARS(hv_actor_row_t, cause, 6),
                                         SCOL(hv_actor_row_t, reason, 7),
                                         SCOL(hv_actor_row_t, max_restarts, 8),
                                         SCOL(hv_actor_row_t, max_call_retries, 9),
                                         SCOL(hv_actor_row_t, restarts, 10),
                                         SCOL(hv_actor_row_t, moves, 11),
                                         SCOL(hv_actor_row_t, incarnation, 12),
                                         SCOL(hv_actor_row_t, slots, 13),
                                         SCOL(hv_actor_row_t, gpus, 14),
                                         SCOL(hv_actor_row_t, gpu_mask, 15),
                                         SCOL(hv_actor_row_t, node_id, 16),
                                         SCOL(hv_actor_row_t, owner_job, 17),
                                         SCOL(hv_actor_row_t, proc_live, 18),
                                         SCOL(hv_actor_row_t, kill_sent, 19),
                                         SCOL(hv_actor_row_t, last_status, 20),
                                         SCOL(hv_actor_row_t, last_signal, 21),
                                         SCOL(hv_actor_row_t, address, 22),
                                         SCOL(hv_actor_row_t, created_ms, 23),
                                         SCOL(hv_actor_row_t, started_ms, 24),
                                         SCOL(hv_actor_row_t, ended_ms, 25),
                                         SCOL(hv_actor_row_t, next_node, 26),
                                         SCOL(hv_actor_row_t, next_gpu_mask, 27),
                                         SCOL(hv_actor_row_t, has_state, 28),
                                         SCOL_CHARS(hv_actor_row_t, state_digest, 29),
                                         SCOL(hv_actor_row_t, state_size, 30),
                                         SCOL(hv_actor_row_t, labels, 31),
                                         SCOL(hv_actor_row_t, memory_mb, 32)};

static const store_rows_t actor_rows = STORE_ROWS(hv_actor_row_t, actor_cols, NULL);

void hv_actor_row_fini(hv_actor_row_t *r) { store_row_fini(&actor_rows, r); }

hv_err hv_store_actor_list(hv_store_t *s, hv_actor_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_ACTOR_LIST);
    return store_list(s, &b, &actor_rows, "actor list", out, n);
}

/* ---- actors' call figures (schema v16) ------------------------------------------------------- */

hv_err hv_store_actor_fig_put(hv_store_t *s, const hv_actor_fig_row_t *r) {
    char base[HV_CALLFIG_LINE_MAX], cur[HV_CALLFIG_LINE_MAX];
    if (hv_callfig_format(&r->base, base, sizeof(base)) != HV_OK ||
        hv_callfig_format(&r->cur, cur, sizeof(cur)) != HV_OK) {
        return HV_EINTERNAL; // HV_CALLFIG_LINE_MAX always fits
    }
    store_bind_t b = store_start(s, ST_ACTOR_FIG_PUT);
    bind_u64(&b, 1, r->actor_id);
    bind_u64(&b, 2, r->proc);
    bind_int(&b, 3, r->ended);
    bind_text(&b, 4, base);
    bind_text(&b, 5, cur);
    bind_u64(&b, 6, r->report_ms);
    return store_write(s, &b, "actor figures put");
}

static const store_col_t actor_fig_cols[] = {
    SCOL(hv_actor_fig_row_t, actor_id, 0), SCOL(hv_actor_fig_row_t, proc, 1),
    SCOL(hv_actor_fig_row_t, ended, 2), SCOL(hv_actor_fig_row_t, report_ms, 5)};

/* The figures, kept as text lines (hv_callfig_format): HV_ECORRUPT when one is not. */
static hv_err actor_fig_more(sqlite3_stmt *st, void *vrow) {
    hv_actor_fig_row_t *r = vrow;
    const unsigned char *base = sqlite3_column_text(st, 3);
    const unsigned char *cur = sqlite3_column_text(st, 4);
    if (base == NULL || cur == NULL || hv_callfig_parse((const char *)base, &r->base) != HV_OK ||
        hv_callfig_parse((const char *)cur, &r->cur) != HV_OK) {
        return HV_ECORRUPT;
    }
    return HV_OK;
}

static const store_rows_t actor_fig_rows =
    STORE_ROWS(hv_actor_fig_row_t, actor_fig_cols, actor_fig_more);

hv_err hv_store_actor_fig_list(hv_store_t *s, hv_actor_fig_row_t **out, size_t *n) {
    store_bind_t b = store_start(s, ST_ACTOR_FIG_LIST);
    return store_list(s, &b, &actor_fig_rows, "actor figures list", out, n);
}
