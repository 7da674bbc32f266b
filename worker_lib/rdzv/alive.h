/*
 * alive: fast death detection between ranks of one machine. A rank holds a robust,
 * process-shared mutex in a file of /dev/shm (its "mark"); a ring neighbour on the same machine
 * waits on that mutex from a thread of its own. When the holder's process dies the kernel hands
 * the mutex on with EOWNERDEAD at once (under a millisecond), while its sockets close only after
 * its address space is torn down (tens of ms for a large process: measured 87 ms for a Python
 * worker with torch loaded). world.c uses it to abort the ring as on a socket EOF.
 *
 * A mark is named by the user id, the world id, the generation, the rank and the data-plane
 * port (unique among live processes of the machine); mode 0600. It is removed when its holder
 * releases it, by the watcher that saw its holder die, or by the next hv__alive_hold of the
 * same user that finds it orphaned (its holder died unwatched). A peer whose mark is not on this
 * machine is not watched (hv__alive_watch says HV_ENOTFOUND): the socket and the liveness
 * monitor cover it.
 *
 * Threading: one thread creates, watches and releases; a watcher's callback runs on the
 * watcher's thread, at most once, never after hv__alive_release returned, and must not block.
 * Every wait is bounded: watchers wake every ALIVE_SLICE_MS to see whether they were released
 * and end by themselves (they are detached); release joins only the holder's thread.
 */
#ifndef HV_WORKER_LIB_ALIVE_H
#define HV_WORKER_LIB_ALIVE_H

#include <stdint.h>

#include "err.h"

typedef struct hv__alive_s hv__alive_t;

/* Or'ed into the callback's tag when the holder died through exit() (atexit ran: its exit status
 * is the agent's to report) rather than by a signal (a kill, a crash: nothing more will say). */
#define HV__ALIVE_EXITED (1ull << 63)

/* The holder of a watched mark died. tag: the caller's, from hv__alive_watch (| HV__ALIVE_EXITED
 * when it exited). */
typedef void (*hv__alive_cb)(void *ud, uint64_t tag);

/* Creates this rank's mark for (world_id, generation, rank, addr: its data-plane address
 * "ip:port") and holds it on a thread of its own. Errors: HV_EIO (no file, mapping or thread),
 * HV_ENOMEM, HV_EINVAL (no port in addr). */
hv_err hv__alive_hold(uint64_t world_id, uint32_t generation, int rank, const char *addr,
                      hv__alive_t **out);

/* Watches the mark of peer (rank, addr) of the same world and generation when it is on this
 * machine: cb(ud, tag) when its holder dies. Call after the peer is known to hold its mark (the
 * ring's handshake with it is done). HV_ENOTFOUND: no such mark here (another machine). */
hv_err hv__alive_watch(hv__alive_t *a, int peer_rank, const char *peer_addr, uint64_t tag,
                       hv__alive_cb cb, void *ud);

/* Releases the mark (its watchers see a clean release), removes its file and disarms this
 * side's watchers (their threads end within a slice). NULL is a no-op. */
void hv__alive_release(hv__alive_t *a);

/* How many watcher threads of this process are running (for leak tests). */
int hv__alive_threads(void);

#endif
