/*
 * ringev: the survivors' own evidence of a lost node. When a worker's collectives fail it
 * re-joins the rendezvous and names the ring neighbours whose link broke (libhv: a send or
 * receive that failed, or no progress for the peer timeout; RdzvJoinRequest.broken_peers). This
 * module keeps those reports for a job's last round and decides which nodes they condemn: a
 * node is suspected, like one whose agent's session closed (nodes.c hv_lease_suspect, jobm.c
 * hv_jm_suspect), when
 *   - a worker of it that is still believed to run (no exit reported: a crash is explained by
 *     its exit report, which also shows the node alive) is named by a ring neighbour on another
 *     node,
 *   - every neighbour on another node of its workers in the flat ring (rank - 1, rank + 1) has
 *     spoken (re-joined, so its reports are in) or cannot speak (gone, or its node suspected),
 *   - and none of its own workers has re-joined (a worker that re-joins is evidently alive).
 * Why "spoken" rather than "every neighbour named it": a ring stalls around its broken link, and
 * only the neighbour downstream of a frozen worker sees it first-hand; the one upstream usually
 * fails first on its other side, when the downstream one aborts its links, and names that one
 * instead (who then re-joins and is cleared). Waiting for every neighbour to have spoken keeps
 * that cascade from condemning a live node that simply re-joins later than its accuser.
 * Evidence only speeds things up: reports that do not meet the rule change nothing, and the
 * lease stays the bound (a silent partition).
 *
 * Silence (issue 28): libhv's liveness monitor (worker_lib/coll/liveness.h) watches each ring link
 * to a neighbour on another host and reports, without re-joining and while the ring may still
 * hang, a neighbour that fell silent: HEAR from its left neighbour (no heartbeat from it for the
 * threshold: its process or its host is silent) and ACK from its right neighbour (its host does
 * not acknowledge: the host or the link is gone; a frozen process alone does not show). A node is
 * suspected on silence, with evidence "silent", when
 *   - a silence report names a worker of it,
 *   - every member of it that can be watched is reported silent by each of its flat-ring
 *     neighbours on another node in that neighbour's own way (the left one HEAR, the right one
 *     ACK), unless that neighbour cannot speak (mute) or re-joined naming it broken,
 *   - and none of its workers spoke (re-joined, or sent a report of its own: it reaches the head).
 * Both ways are needed because one alone has an innocent cause: a process starved of CPU for the
 * threshold stops beating (HEAR) while its kernel still acknowledges, and the kernel's
 * acknowledgements do not show a frozen process. Requiring both makes a loaded machine no cause
 * of suspicion (its kernel acknowledges in softirq whatever user space does) while a host or link
 * that is gone fails both within the threshold. The verdict carries how long the node has been
 * silent (the shortest report), so the suspicion counts from then (nodes.h hv_node_suspect).
 * No I/O, no clock. The caller (head/driver/driver.c) feeds the reports of every JoinRound
 * (hv_ringev_note), asks hv_ringev_judge after each and suspects the nodes it names. Not
 * thread-safe (the driver's loop owns it).
 */
#ifndef HV_HEAD_RINGEV_H
#define HV_HEAD_RINGEV_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "jobm.h"

/* How a report came. */
#define HV_RINGEV_BROKEN 0u /* at a re-join: the link to subject broke (ring.c) */
#define HV_RINGEV_HEAR 1u   /* liveness: no heartbeat from subject (reporter: its left neighbour) */
#define HV_RINGEV_ACK 2u    /* liveness: subject's host does not acknowledge (its right one) */

/* One report: reporter found its link to subject broken or silent (worker ids). */
typedef struct hv_ringev_report_s {
    uint64_t reporter;
    uint64_t subject;
    unsigned how;       /* HV_RINGEV_* */
    uint32_t silent_ms; /* HEAR, ACK: how long subject had been silent when reported */
} hv_ringev_report_t;

/* A job's reports about one round. Zero-initialised is empty; hv_ringev_fini frees it. */
typedef struct hv_ringev_s {
    uint32_t generation;   /* the round the reports are about (0: none yet) */
    hv_ringev_report_t *r; /* owned, n entries */
    size_t n, cap;
} hv_ringev_t;

void hv_ringev_fini(hv_ringev_t *ev);
/* Forgets every report (the round they were about is history). */
void hv_ringev_clear(hv_ringev_t *ev);
/* Records that reporter, a member of round generation, found its links to subjects (n worker
 * ids, borrowed) broken. Reports about an older round than the one held are dropped; a newer
 * round replaces them; a repeated report is kept once. HV_ENOMEM leaves ev as it was. */
hv_err hv_ringev_note(hv_ringev_t *ev, uint32_t generation, uint64_t reporter,
                      const uint64_t *subjects, size_t n);

/* Records that reporter, a member of round generation, found subject silent for silent_ms (how:
 * HV_RINGEV_HEAR or HV_RINGEV_ACK; anything else is dropped). Rounds as hv_ringev_note; a repeated
 * report keeps the first silence. HV_ENOMEM leaves ev as it was. */
hv_err hv_ringev_note_silent(hv_ringev_t *ev, uint32_t generation, uint64_t reporter,
                             uint64_t subject, unsigned how, uint32_t silent_ms);

/* A member of the round the reports are about, as the caller sees it now. */
typedef struct hv_ringev_member_s {
    uint64_t worker_id;
    uint64_t node_id;
    int spoke; /* re-joined the next round: alive, and its reports (if any) are in */
    int mute;  /* cannot speak: it ended, or its node is suspected or dead already */
} hv_ringev_member_t;

/* A node the evidence condemns. */
typedef struct hv_ringev_verdict_s {
    uint64_t node_id;
    uint64_t worker_id; /* its first worker (by rank) a neighbour named */
    uint64_t reporter;  /* a neighbour on another node that named it */
    int silent;         /* the silence rule condemned it (0: broken links at re-joins) */
    uint32_t silent_ms; /* silent: how long it has been silent (the shortest report) */
} hv_ringev_verdict_t;

/* Applies the rules above (broken links first, then silence) to the members of round
 * ev->generation, m[0..n) in rank order (borrowed). Writes at most cap verdicts, one per node, in
 * rank order of their first worker; returns how many. Reports whose reporter or subject is not a
 * member, or whose reporter is on the subject's node, count for nothing. */
size_t hv_ringev_decide(const hv_ringev_t *ev, const hv_ringev_member_t *m, size_t n,
                        hv_ringev_verdict_t *out, size_t cap);

/* hv_ringev_decide over job j's members of round ev->generation as the job machine sees them
 * now (borrowed): spoke = its JoinRound waits in the open round; mute = it ended or was removed,
 * or its node is suspected already (jobm's suspect_until). Once a later round has closed the
 * reports are history: they are forgotten and nothing is named. Returns the verdicts written
 * (at most cap); 0 also when a scratch allocation fails (evidence only: the lease decides). */
size_t hv_ringev_judge(hv_ringev_t *ev, const hv_jm_job_t *j, hv_ringev_verdict_t *out, size_t cap);

/* Death watch (issue 27; RdzvJoinRequest.dead_peers): reporter, re-joining from round last_gen,
 * saw the death-watch mark of ring neighbour subject (worker id) released by its dead owner (a
 * robust mutex on the same machine: EOWNERDEAD). That is a fact, not a suspicion: the process is
 * gone, and its agent's exit report would only come later (a killed Python process takes a few
 * hundred ms to be torn down). Returns subject's worker of j when the report is to be acted on
 * (the caller ends it at once, as if its exit had been reported), else NULL (its exit report or
 * the lease decide, as before). Acted on only when
 *   - reporter is a live worker of j that was a member of round last_gen, the last closed round,
 *   - subject is another live worker of j, a member of that round, that has not reported Done,
 *   - on the reporter's machine by the head's own record (the watch sees only its machine's
 *     peers): the reporter's node, or one of the nodes machine[0..n_machine) (borrowed) that
 *     the caller knows to share its machine (driver.c: agents whose sessions come from the head's
 *     own machine),
 *   - and its flat-ring neighbour in that round (rank - 1 or rank + 1: the watched ones).
 * No I/O. */
hv_jm_worker_t *hv_ringev_dead(const hv_jm_job_t *j, const hv_jm_worker_t *reporter,
                               uint32_t last_gen, uint64_t subject, const uint64_t *machine,
                               size_t n_machine);

#endif
