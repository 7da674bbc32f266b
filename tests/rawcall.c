/*
 * rawcall: one gRPC call to the head, built by hand, with whatever credential the test chooses
 * (none, a wrong one, another job's secret): what an attacker on the network can send, without
 * hvsubmit's or libhv's checks in the way. For the integration tests of authentication.
 *
 *   rawcall HOST:PORT METHOD [--token T | --token-file F] [FIELD=VALUE...]
 *
 * METHOD is "Service/Method" ("Jobs/Cancel", "Rendezvous/KvPut", "Actors/Create"). FIELD=VALUE
 * sets a scalar field of the request by its proto name (integers, bools, strings; bytes as
 * text); a dotted name reaches into a message field ("spec.class_name=x", "ref.name=ctr"), and
 * FIELD+=VALUE appends to a repeated string field ("spec.args+=-c") or, as "k=v", to a repeated
 * key-value field ("spec.labels+=zone=b"). Values are passed as given, bytes that are not UTF-8
 * included. A server-streaming method is opened and its first message (or final status)
 * waited for.
 * Prints one line: "code=<grpc status> <message>" and, on success, the reply's top-level
 * scalar fields as "name=value" and its repeated ones as "name=[count]". Exit status: 0 OK, else the gRPC status code (16
 * UNAUTHENTICATED, 7 PERMISSION_DENIED, 5 NOT_FOUND, ...), 100 for a usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hv.pb-c.h"
#include "rpc.h"

static int usage(const char *why) {
    fprintf(stderr,
            "rawcall: %s\nusage: rawcall HOST:PORT Service/Method [--token T | "
            "--token-file F] [FIELD=VALUE...]\n",
            why);
    return 100;
}

static const ProtobufCMethodDescriptor *find_method(const char *sm, const char **service) {
    static const ProtobufCServiceDescriptor *svcs[] = {
        &hvpb__v1__cluster__descriptor, &hvpb__v1__jobs__descriptor,
        &hvpb__v1__rendezvous__descriptor, &hvpb__v1__actors__descriptor};
    const char *slash = strchr(sm, '/');
    if (slash == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(svcs) / sizeof(svcs[0]); i++) {
        if (strlen(svcs[i]->short_name) != (size_t)(slash - sm) ||
            strncmp(svcs[i]->short_name, sm, (size_t)(slash - sm)) != 0) {
            continue;
        }
        for (unsigned j = 0; j < svcs[i]->n_methods; j++) {
            if (strcmp(svcs[i]->methods[j].name, slash + 1) == 0) {
                *service = svcs[i]->name;
                return &svcs[i]->methods[j];
            }
        }
    }
    return NULL;
}

/* What the request's nested messages and repeated fields took (freed at the end). */
static void *allocs[512];
static size_t nallocs;

static void *take(size_t n) {
    void *p = nallocs < sizeof(allocs) / sizeof(allocs[0]) ? calloc(1, n) : NULL;
    if (p != NULL) {
        allocs[nallocs++] = p;
    }
    return p;
}

static int set_field(ProtobufCMessage *m, char *name, const char *val);

/* name is "FIELD.rest": the message field FIELD (made when absent), then rest inside it. */
static int set_nested(ProtobufCMessage *m, char *name, const char *val) {
    char *dot = strchr(name, '.');
    *dot = '\0';
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED) {
        return -1;
    }
    ProtobufCMessage **sub = (ProtobufCMessage **)((char *)m + f->offset);
    const ProtobufCMessageDescriptor *sd = f->descriptor;
    if (*sub == NULL) {
        if ((*sub = take(sd->sizeof_message)) == NULL) {
            return -1;
        }
        sd->message_init(*sub);
    }
    return set_field(*sub, dot + 1, val);
}

/* name is "FIELD+": appends val to the repeated field FIELD (a string, or a key-value message
 * from "k=v"). */
static int append_field(ProtobufCMessage *m, char *name, const char *val) {
    name[strlen(name) - 1] = '\0';
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (f == NULL || f->label != PROTOBUF_C_LABEL_REPEATED) {
        return -1;
    }
    size_t *n = (size_t *)((char *)m + f->quantifier_offset);
    void ***arr = (void ***)((char *)m + f->offset);
    void **grown = take((*n + 1) * sizeof(void *));
    if (grown == NULL) {
        return -1;
    }
    if (*n > 0) {
        memcpy(grown, *arr, *n * sizeof(void *));
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        grown[*n] = (void *)val;
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
               f->descriptor == &hvpb__v1__key_value__descriptor && strchr(val, '=') != NULL) {
        Hvpb__V1__KeyValue *kv = take(sizeof(*kv));
        char *key = take(strlen(val) + 1);
        if (kv == NULL || key == NULL) {
            return -1;
        }
        hvpb__v1__key_value__init(kv);
        memcpy(key, val, strlen(val) + 1);
        *strchr(key, '=') = '\0';
        kv->key = key;
        kv->value = key + strlen(key) + 1;
        grown[*n] = kv;
    } else {
        return -1;
    }
    *arr = grown;
    (*n)++;
    return 0;
}

static int set_field(ProtobufCMessage *m, char *name, const char *val) {
    if (strchr(name, '.') != NULL) {
        return set_nested(m, name, val);
    }
    if (name[0] != '\0' && name[strlen(name) - 1] == '+') {
        return append_field(m, name, val);
    }
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (f == NULL || f->label == PROTOBUF_C_LABEL_REPEATED) {
        return -1;
    }
    void *p = (char *)m + f->offset;
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT64:
        *(uint64_t *)p = strtoull(val, NULL, 10);
        return 0;
    case PROTOBUF_C_TYPE_INT64:
        *(int64_t *)p = strtoll(val, NULL, 10);
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
        *(uint32_t *)p = (uint32_t)strtoul(val, NULL, 10);
        return 0;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM:
        *(int32_t *)p = (int32_t)strtol(val, NULL, 10);
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        *(protobuf_c_boolean *)p = strcmp(val, "true") == 0 || strcmp(val, "1") == 0;
        return 0;
    case PROTOBUF_C_TYPE_STRING:
        *(const char **)p = val;
        return 0;
    case PROTOBUF_C_TYPE_BYTES:
        ((ProtobufCBinaryData *)p)->data = (uint8_t *)val;
        ((ProtobufCBinaryData *)p)->len = strlen(val);
        return 0;
    default:
        return -1;
    }
}

static void print_reply(const ProtobufCMessage *m) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            printf(" %s=[%zu]", f->name, *(const size_t *)((const char *)m + f->quantifier_offset));
            continue;
        }
        const void *p = (const char *)m + f->offset;
        switch (f->type) {
        case PROTOBUF_C_TYPE_UINT64:
            printf(" %s=%" PRIu64, f->name, *(const uint64_t *)p);
            break;
        case PROTOBUF_C_TYPE_UINT32:
            printf(" %s=%u", f->name, *(const uint32_t *)p);
            break;
        case PROTOBUF_C_TYPE_BOOL:
            printf(" %s=%s", f->name, *(const protobuf_c_boolean *)p ? "true" : "false");
            break;
        case PROTOBUF_C_TYPE_STRING:
            printf(" %s=%s", f->name, *(const char *const *)p ? *(const char *const *)p : "");
            break;
        case PROTOBUF_C_TYPE_BYTES:
            printf(" %s=%.*s", f->name, (int)((const ProtobufCBinaryData *)p)->len,
                   (const char *)((const ProtobufCBinaryData *)p)->data);
            break;
        default:
            break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        return usage("too few arguments");
    }
    const char *service = NULL;
    const ProtobufCMethodDescriptor *md = find_method(argv[2], &service);
    if (md == NULL) {
        return usage("unknown method");
    }
    ProtobufCMessage *req = calloc(1, md->input->sizeof_message);
    if (req == NULL) {
        return 100;
    }
    md->input->message_init(req);
    const char *token = NULL;
    char tokbuf[512];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
            token = argv[++i];
        } else if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc) {
            FILE *f = fopen(argv[++i], "r");
            if (f == NULL || fscanf(f, "%511s", tokbuf) != 1) {
                return usage("cannot read the token file");
            }
            fclose(f);
            token = tokbuf;
        } else {
            char *eq = strchr(argv[i], '=');
            if (eq == NULL) {
                return usage("expected FIELD=VALUE");
            }
            *eq = '\0';
            if (set_field(req, argv[i], eq + 1) != 0) {
                return usage("no such field (or not one rawcall can set)");
            }
        }
    }
    hv_rpc_channel_t *ch;
    if (hv_rpc_channel_create(argv[1], &ch) != HV_OK ||
        (token != NULL && hv_rpc_channel_set_token(ch, token) != HV_OK)) {
        return usage("bad address or token");
    }
    char path[256];
    snprintf(path, sizeof(path), "/%s/%s", service, md->name);
    hv_rpc_status_t st;
    ProtobufCMessage *resp = NULL;
    int streaming = strcmp(md->name, "Watch") == 0 || strcmp(md->name, "WatchMembers") == 0 ||
                    strcmp(md->name, "Fetch") == 0;
    if (streaming) {
        hv_rpc_bstream_t *s;
        memset(&st, 0, sizeof(st));
        if (hv_rpc_bstream_open(ch, path, req, md->output, 10000, &s) != HV_OK) {
            return usage("cannot open the stream");
        }
        hv_err rc = hv_rpc_bstream_next(s, 10000, &resp, &st);
        if (rc == HV_OK) {
            st.grpc_code = 0;
            st.msg[0] = '\0';
        } else if (rc == HV_ETIMEDOUT) {
            st.grpc_code = 4;
            snprintf(st.msg, sizeof(st.msg), "no message within 10 s");
        }
        hv_rpc_bstream_destroy(s);
    } else {
        hv_rpc_unary(ch, path, req, md->output, 10000, &resp, &st);
    }
    printf("code=%d %s", st.grpc_code, st.msg);
    if (resp != NULL) {
        print_reply(resp);
        hv_rpc_msg_free(resp);
    }
    printf("\n");
    hv_rpc_channel_destroy(ch);
    free(req);
    for (size_t i = 0; i < nallocs; i++) {
        free(allocs[i]);
    }
    return st.grpc_code;
}
