/*
 * actor.h: libhv's actors. An actor is one long-lived process that holds an object (an instance
 * of a class registered by name) and serves method calls on it from any number of callers. This
 * header is the authoritative description of the API, in both roles:
 *
 *  - the actor process registers its classes (hv_actor_register) and serves one instance
 *    (hv_actor_serve, or hv_actor_server_start/stop around its own main loop);
 *  - a caller connects to an actor (hv_actor_connect), calls methods (hv_actor_call_async returns
 *    a future; hv_actor_call blocks) and closes the connection (hv_actor_close).
 *
 * Arguments and results are bytes: the caller serializes. Calls travel directly between caller
 * and actor over TCP (the head is not on the call path), in length-prefixed frames; a connection
 * starts with a handshake in which each side proves that it knows the actor's secret
 * (HMAC-SHA256 challenge-response; the secret itself never crosses the wire). docs/actors.md
 * describes the wire, the limits and what is not built yet (placement, names and restarts by the
 * head; today the caller gives the actor's address and secret).
 *
 * Semantics of a call:
 *  - Calls sent on one connection run in the order sent, one at a time: the actor runs every
 *    method of its instance on one dispatcher thread (so a method needs no locking, and a slow
 *    method delays every caller of the actor).
 *  - At most once: a call is never sent twice. Its outcome is one of
 *      HV_OK        the method ran and returned HV_OK; the result is its bytes;
 *      HV_EREMOTE   the method ran and returned an error: hv_future_error gives its code and
 *                   message;
 *      HV_EINDOUBT  the call was sent, then the actor failed (its process died, e.g. inside the
 *                   method, or the connection broke) before answering: it may or may not have
 *                   run. Every call in flight on that connection ends this way, at once, not at
 *                   a timeout;
 *      not delivered: the call was never sent and did not run: HV_EUNAVAIL (no connection to
 *                   the actor, or it was lost before this call), HV_EAUTH, HV_ETOOBIG,
 *                   HV_EINVAL, HV_ENOMEM;
 *      HV_ECANCELED the caller closed its handle with the call in flight (it may have run).
 *  - A wait that runs out (HV_ETIMEDOUT) ends nothing: the call stays in flight.
 *
 * Errors are hv_err values (<hv/hv.h>). Link as for <hv/hv.h>.
 */
#ifndef HV_ACTOR_H
#define HV_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include <hv/hv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits. A frame is one call or one reply: its method name, argument or result, and a 16-byte
 * header. */
#define HV_ACTOR_NAME_MAX 64                  /* longest class name, bytes */
#define HV_ACTOR_METHOD_MAX 255               /* longest method name, bytes */
#define HV_ACTOR_SECRET_MIN 16                /* shortest secret, bytes */
#define HV_ACTOR_SECRET_MAX 256               /* longest secret, bytes */
#define HV_ACTOR_FRAME_DEFAULT (4u << 20)     /* default frame limit (argument or result) */
#define HV_ACTOR_FRAME_MAX (256u << 20)       /* largest frame limit that can be configured */
#define HV_ACTOR_PENDING_DEFAULT 1024         /* default calls in flight per connection */
#define HV_ACTOR_CONNECT_TIMEOUT_DEFAULT 5000 /* ms: TCP connect plus handshake */

/* ================================ the actor process ========================================= */

/* Where a method (or save) writes its result: an opaque buffer owned by the runtime, valid only
 * during the callback it was passed to. */
typedef struct hv_actor_out_s hv_actor_out_t;

/* Appends len bytes of data (borrowed) to the result. Errors: HV_ETOOBIG (the result would pass
 * the actor's frame limit; the call then fails with that code), HV_ENOMEM. */
HV_API hv_err hv_actor_out_append(hv_actor_out_t *out, const void *data, size_t len);

/* Sets the error message the caller reads with hv_future_error when the method returns an error
 * (truncated to 1024 bytes). Without it the caller sees hv_strerror of the code. */
HV_API void hv_actor_out_errorf(hv_actor_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* hv_actor_out_errorf without the format: msg (NUL-terminated, borrowed, copied; truncated to
 * 1024 bytes) is taken as it is, for bindings that cannot call a variadic function. */
HV_API void hv_actor_out_error(hv_actor_out_t *out, const char *msg);

/* An actor class. All callbacks run on the actor's one dispatcher thread, never concurrently
 * with each other for the same instance. */
typedef struct hv_actor_class_s {
    size_t size;      /* sizeof(hv_actor_class_t): HV_ACTOR_CLASS_INIT sets it */
    const char *name; /* 1..HV_ACTOR_NAME_MAX bytes of [A-Za-z0-9_.-]; copied at registration */
    /* Constructor (required): builds the instance from the creation argument (arg, len bytes,
     * borrowed; len may be 0) into *self_out (owned by the runtime until destroy). An error
     * fails hv_actor_server_start with that code. */
    hv_err (*create)(void *ud, const void *arg, size_t len, void **self_out);
    /* Method dispatcher (required): runs method (a NUL-terminated name, borrowed) on self with
     * arg (len bytes, borrowed, valid during the call), appends its result to out. HV_OK sends
     * the result; any other code is sent to the caller as HV_EREMOTE with this code and the
     * message of hv_actor_out_errorf (an unknown method: return HV_ENOTFOUND). */
    hv_err (*call)(void *self, const char *method, const void *arg, size_t len,
                   hv_actor_out_t *out);
    /* Destructor (optional): frees self when the server stops. */
    void (*destroy)(void *self);
    /* Optional: writes the instance's state to out (hv_actor_server_save, and at stop when a
     * state file is configured). Runs between two calls. */
    hv_err (*save)(void *self, hv_actor_out_t *out);
    /* Optional: restores a state written by save (len bytes, borrowed) into self, right after
     * create, before any call. An error fails hv_actor_server_start. */
    hv_err (*load)(void *self, const void *state, size_t len);
    void *ud; /* passed to create; borrowed, must outlive the server */
} hv_actor_class_t;

#define HV_ACTOR_CLASS_INIT                                                                        \
    { sizeof(hv_actor_class_t), NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* Registers a class for this process (cls is copied; its name too). Call before starting a
 * server. Thread-safe. Errors: HV_EINVAL (bad size, name or a missing create/call), HV_EEXIST
 * (a class of that name is registered), HV_ETOOBIG (more than 4096 classes), HV_ENOMEM. */
HV_API hv_err hv_actor_register(const hv_actor_class_t *cls);

/* An actor server: one instance of one class, a listening socket, one dispatcher thread. */
typedef struct hv_actor_server_s hv_actor_server_t;

/* Settings of a server. A NULL or 0 field takes the environment variable named beside it, else
 * the default; the head (in a later version) starts actor processes with these variables set. */
typedef struct hv_actor_server_config_s {
    size_t size;            /* sizeof(hv_actor_server_config_t): HV_ACTOR_SERVER_CONFIG_INIT */
    const char *class_name; /* HV_ACTOR_CLASS; required one way or the other */
    const void *arg;        /* constructor argument; NULL: the bytes of HV_ACTOR_ARG, else none */
    size_t arg_len;         /* bytes at arg */
    const char *listen;     /* HV_ACTOR_LISTEN, default "127.0.0.1:0" (port 0: any free port) */
    const char *secret;     /* HV_ACTOR_SECRET; required, HV_ACTOR_SECRET_MIN..MAX bytes */
    const char *state_in;   /* HV_ACTOR_STATE_IN: a file written by save, loaded at start (the
                               class must have load; the file must exist) */
    const char *state_out;  /* HV_ACTOR_STATE_OUT: save writes it (atomically) at stop */
    const char *addr_file;  /* HV_ACTOR_ADDR_FILE: "host:port\n" written (atomically) once the
                               server listens, for the process that started the actor */
    uint32_t max_frame;     /* HV_ACTOR_MAX_FRAME, default HV_ACTOR_FRAME_DEFAULT: a longer
                               frame closes the connection with an error frame */
    uint32_t max_conns;     /* default 256: further connections are closed at once */
    uint32_t handshake_timeout_ms; /* default 5000: a connection not authenticated by then is
                                      closed */
} hv_actor_server_config_t;

#define HV_ACTOR_SERVER_CONFIG_INIT                                                                \
    { sizeof(hv_actor_server_config_t), NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, 0, 0, 0 }

/* Creates the instance (create, then load when a state file is given), binds the listening
 * socket and starts the dispatcher thread. cfg is borrowed (read during the call). *out receives
 * the server (owned; end it with hv_actor_server_stop). Blocking (bounded: reading the state
 * file). Thread-safe. Errors: HV_EINVAL (a setting is missing or malformed; the log says which),
 * HV_ENOTFOUND (no class of that name, or no state_in file), HV_ENOTSUP (state_in for a class
 * without load), HV_EUNAVAIL (the address cannot be bound), the constructor's or load's code,
 * HV_ENOMEM, HV_EIO. */
HV_API hv_err hv_actor_server_start(const hv_actor_server_config_t *cfg, hv_actor_server_t **out);

/* The bound TCP port. Thread-safe. */
HV_API int hv_actor_server_port(const hv_actor_server_t *s);

/* Saves the instance's state to path (borrowed; written atomically: a temporary file renamed)
 * between two calls. Blocking until written (bounded by the method running now). Thread-safe;
 * not from inside a callback. Errors: HV_ENOTSUP (the class has no save), save's own code,
 * HV_EIO, HV_ECLOSED (the server is stopping). */
HV_API hv_err hv_actor_server_save(hv_actor_server_t *s, const char *path);

/* Stops the server: stops accepting, answers every call already received, closes the
 * connections (callers with calls still in flight get HV_EINDOUBT), saves to state_out when one
 * is configured, destroys the instance and frees s. Blocking (bounded: up to 2 s to flush
 * replies, plus save). Call once, not concurrently with other calls on s; stop(NULL) is a no-op.
 * Returns the save's error, if any (the server is stopped and freed in every case). */
HV_API hv_err hv_actor_server_stop(hv_actor_server_t *s);

/* The actor process's main loop: hv_actor_server_start(cfg), then wait for SIGTERM or SIGINT
 * (a preemption notice or a stop: the agent sends SIGTERM), then hv_actor_server_stop (which
 * saves the state when state_out is set). Blocks those two signals in the calling thread (call
 * it before starting other threads, so they inherit the mask). Returns HV_OK after a clean stop,
 * or start's or stop's error. */
HV_API hv_err hv_actor_serve(const hv_actor_server_config_t *cfg);

/* ================================ callers =================================================== */

/* A caller's connection to one actor. Thread-safe: several threads may call on one handle; the
 * order among them is the order in which their calls took the handle's send lock. */
typedef struct hv_actor_s hv_actor_t;
/* One call in flight, or its outcome. Owned by the caller (hv_future_destroy); used by one
 * thread at a time. A future stays valid after hv_actor_close. */
typedef struct hv_future_s hv_future_t;

typedef struct hv_actor_connect_config_s {
    size_t size;                 /* sizeof(hv_actor_connect_config_t) */
    uint32_t connect_timeout_ms; /* TCP connect plus handshake; default
                                    HV_ACTOR_CONNECT_TIMEOUT_DEFAULT */
    uint32_t max_pending;        /* calls in flight on this handle; default
                                    HV_ACTOR_PENDING_DEFAULT */
    uint32_t send_timeout_ms;    /* a send that cannot progress this long (the actor stopped
                                    reading) breaks the connection; default 10000 */
    /* Handles from hv_actor_lookup only (they re-resolve the actor through the head after a
     * move or a restart; see hv_actor_lookup): */
    uint32_t resolve_timeout_ms; /* how long to look for the actor again; default
                                    HV_ACTOR_RESOLVE_TIMEOUT_DEFAULT */
    uint32_t max_call_retries;   /* resends of a call in doubt; 0 = the actor's own
                                    max_call_retries (Actors.Get) */
} hv_actor_connect_config_t;

#define HV_ACTOR_RESOLVE_TIMEOUT_DEFAULT 30000u

#define HV_ACTOR_CONNECT_CONFIG_INIT                                                               \
    { sizeof(hv_actor_connect_config_t), 0, 0, 0, 0, 0 }

/* Connects to the actor at addr ("host:port", borrowed) and proves knowledge of secret
 * (borrowed, NUL-terminated; it never leaves this process) while checking that the actor knows
 * it too. cfg may be NULL (defaults). *out receives the handle (owned: hv_actor_close). err
 * (optional, errlen bytes) receives a message in the user's terms on failure. Blocking, bounded
 * by connect_timeout_ms. Thread-safe. Errors: HV_EINVAL (malformed addr or secret),
 * HV_EUNAVAIL (nothing listens there, the address does not resolve, or the peer closed the
 * connection before its greeting: an actor's process that is ending), HV_ETIMEDOUT (no
 * connection or handshake in time), HV_EAUTH (the secrets differ: the actor refused us, or the
 * actor could not prove it knows ours), HV_EPROTO (not an hv actor), HV_ENOMEM. */
HV_API hv_err hv_actor_connect(const char *addr, const char *secret,
                               const hv_actor_connect_config_t *cfg, hv_actor_t **out, char *err,
                               size_t errlen);

/* Sends a call of method (NUL-terminated, 1..HV_ACTOR_METHOD_MAX bytes, borrowed) with len bytes
 * of arg (borrowed; copied into the socket before return) and gives its future in *out (owned).
 * Blocks only while the socket's send buffer is full (bounded by send_timeout_ms; a send that
 * fails or runs out of time midway breaks the connection, and this call's future, like every
 * other in flight, ends with HV_EINDOUBT). Thread-safe. Errors, each meaning the call was not
 * sent: HV_EINVAL, HV_ETOOBIG (the frame would pass the actor's limit, or max_pending calls are
 * in flight: wait for some), HV_EUNAVAIL (the connection to the actor was lost before; connect
 * again), HV_ENOMEM. */
HV_API hv_err hv_actor_call_async(hv_actor_t *a, const char *method, const void *arg, size_t len,
                                  hv_future_t **out);

/* Waits up to timeout_ms (0: only look) for the outcome of f. HV_OK: *data_out (optional) points
 * to the result, *len_out (optional) gets its length; the bytes are owned by f (valid until
 * hv_future_destroy). Otherwise the call's outcome (see the top of this header: HV_EREMOTE,
 * HV_EINDOUBT, HV_ECANCELED when the caller closed the handle with the call in flight), or
 * HV_ETIMEDOUT when the wait ran out (the call goes on; wait again or destroy). Waiting again
 * after an outcome returns the same outcome. One thread at a time per future. */
HV_API hv_err hv_future_wait(hv_future_t *f, uint32_t timeout_ms, const void **data_out,
                             size_t *len_out);

/* After an outcome other than HV_OK: a message in the user's terms (for HV_EREMOTE the method's
 * own message, or hv_strerror of its code), owned by f; *remote_code_out (optional) gets the
 * code the method returned (HV_OK unless HV_EREMOTE). "" while the call is in flight. */
HV_API const char *hv_future_error(const hv_future_t *f, hv_err *remote_code_out);

/* Frees f. A call still in flight goes on; its result is dropped when it comes. NULL: no-op. */
HV_API void hv_future_destroy(hv_future_t *f);

/* How many times the call was put on the wire so far: 1 for a call sent once; more when a
 * re-resolving handle (hv_actor_lookup) sent it again after a move or a restart (a call the
 * actor said it did not run, or, with max_call_retries, one whose outcome was unknown); 0 while
 * it waits for the handle to reconnect. Read it with the outcome to tell which delivery a result
 * or an error came from. Thread-safe. */
HV_API uint32_t hv_future_sends(const hv_future_t *f);

/* The blocking convenience: hv_actor_call_async, then hv_future_wait up to timeout_ms. On HV_OK
 * *data_out (optional) gets the result in a buffer owned by the caller (free with hv_actor_free;
 * NULL when the result is empty) and *len_out its length. err (optional) gets the message of a
 * failure. HV_ETIMEDOUT here means the call was sent and its outcome is unknown (it may still
 * run); the result is dropped. Other errors as hv_actor_call_async and hv_future_wait. */
HV_API hv_err hv_actor_call(hv_actor_t *a, const char *method, const void *arg, size_t len,
                            uint32_t timeout_ms, void **data_out, size_t *len_out, char *err,
                            size_t errlen);

/* Frees a result returned by hv_actor_call. NULL: no-op. */
HV_API void hv_actor_free(void *p);

/* The most recent failure on handle a, of any thread: returns its code and copies its message
 * in the user's terms into buf (optional, len bytes, always NUL-terminated); HV_OK and "" when
 * nothing failed yet. What it records:
 *  - the connection broke: HV_EUNAVAIL, and why ("the actor closed the connection: a frame of
 *    ... is over this actor's limit", a reset, a send that made no progress);
 *  - hv_actor_call_async or hv_actor_call refused to send: that code (HV_EUNAVAIL, HV_ETOOBIG,
 *    HV_ECLOSED) and the reason ("not sent: ...", with why the connection broke);
 *  - hv_actor_call failed: for HV_EREMOTE the code the method returned (the one hv_future_error
 *    gives), otherwise hv_actor_call's own code; the message is the one put in its err.
 * Thread-safe (with several threads on one handle, read it right after the failing call; another
 * thread's failure may come between). HV_EINVAL for a NULL handle. */
HV_API hv_err hv_actor_last_error(hv_actor_t *a, char *buf, size_t len);

/* Closes the connection: calls in flight end with HV_ECANCELED (sent: they may still run), the
 * handle is freed. Futures stay valid until destroyed. Blocking (joins the receiving thread;
 * bounded). Not concurrently with other calls on a. close(NULL) is a no-op. */
HV_API void hv_actor_close(hv_actor_t *a);

/* ---- finding an actor through the head ----------------------------------------------------- */

/* Looks up the actor named name in namespace ns (NULL or "": the caller's: a job's worker's is
 * its job's, hvsubmit --namespace, else "default") through the head
 * (Actors.Get, with the per-actor secret) and connects to it (hv_actor_connect with cfg, NULL =
 * defaults). head: "host:port", NULL = $HV_HEAD (set in every worker a head starts). The
 * credential: NULL = $HV_WORKER_SECRET inside a job's worker (its job's namespace only), else
 * the client token in the file $HV_TOKEN_FILE; or pass a credential string. The head over TLS:
 * $HV_CA_FILE. An actor that is pending, starting or restarting is waited for, polling the head
 * every 100 ms, up to timeout_ms (0 = 10 s) in all. Blocking. Errors: HV_ENOTFOUND (no such
 * actor, or it is dead: err says why), HV_ETIMEDOUT (not alive in time), HV_EAUTH / HV_EPERM
 * (the head refused the credential), HV_EUNAVAIL (the head or the actor cannot be reached), and
 * hv_actor_connect's. On HV_OK *out is an owned handle (hv_actor_close). The secret never leaves
 * this function but to hv_actor_connect. Thread-safe.
 *
 * The handle re-resolves: when its connection ends (the actor moved on a drain or a preemption
 * notice, was restarted, or the connection broke) its receiving thread asks the head again
 * (waiting while the actor is moving, restarting or starting; bounded by cfg's
 * resolve_timeout_ms, default 30 s), reconnects, and sends again, in order and before any later
 * call, every call the actor said it did not run (its GOAWAY at stop names the last call it ran)
 * and, with max_call_retries > 0 (the actor's, from the head, unless cfg sets one), every call
 * whose outcome is unknown, up to that many more times. Calls made meanwhile wait in order and
 * leave once it reconnected. A call in doubt with no retry left ends HV_EINDOUBT; when the actor
 * cannot be found again, the calls that never ran end HV_EUNAVAIL ("not delivered: ... finding the
 * actor again through the head failed: ..."), those in doubt HV_EINDOUBT. hv_future_sends tells
 * which delivery an outcome came from. The handle keeps the credential (in memory only, wiped
 * when it is freed) for this. */
HV_API hv_err hv_actor_lookup(const char *head, const char *credential, const char *ns,
                              const char *name, uint32_t timeout_ms,
                              const hv_actor_connect_config_t *cfg, hv_actor_t **out, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
