/*
 * interp: see interp.h.
 */
#include "interp.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INTERP_MAX_NAMES 32
#define INTERP_NAME_MAX 32

/* python, python3, python3.N (N: digits): the names hvsubmit treats as an interpreter to run from
 * the nodes. python3.11-config, python3-dbg and the like are not interpreters. */
static int interp_is_python(const char *name) {
    if (strcmp(name, "python") == 0 || strcmp(name, "python3") == 0) {
        return 1;
    }
    if (strncmp(name, "python3.", 8) != 0 || name[8] == '\0') {
        return 0;
    }
    return strspn(name + 8, "0123456789") == strlen(name + 8);
}

static int interp_cmp(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

void hv_interp_python_names(const char *path, char *out, size_t len) {
    char names[INTERP_MAX_NAMES][INTERP_NAME_MAX];
    size_t n = 0;
    while (path != NULL && *path != '\0') {
        size_t dl = strcspn(path, ":");
        char dir[PATH_MAX];
        if (dl > 0 && dl < sizeof(dir)) {
            memcpy(dir, path, dl);
            dir[dl] = '\0';
            DIR *d = opendir(dir);
            struct dirent *e;
            while (d != NULL && (e = readdir(d)) != NULL && n < INTERP_MAX_NAMES) {
                size_t nl = strlen(e->d_name);
                if (nl >= INTERP_NAME_MAX || !interp_is_python(e->d_name)) {
                    continue;
                }
                char full[PATH_MAX + INTERP_NAME_MAX + 1];
                struct stat st;
                memcpy(full, dir, dl);
                full[dl] = '/';
                memcpy(full + dl + 1, e->d_name, nl + 1);
                if (stat(full, &st) != 0 || !S_ISREG(st.st_mode) || access(full, X_OK) != 0) {
                    continue;
                }
                size_t i = 0;
                while (i < n && strcmp(names[i], e->d_name) != 0) {
                    i++;
                }
                if (i == n) {
                    memcpy(names[n++], e->d_name, nl + 1);
                }
            }
            if (d != NULL) {
                closedir(d);
            }
        }
        path += dl;
        path += *path == ':';
    }
    qsort(names, n, sizeof(names[0]), interp_cmp);
    size_t used = 0;
    if (len == 0) {
        return;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t need = strlen(names[i]) + (used > 0);
        if (used + need + 1 > len) {
            break;
        }
        used += (size_t)snprintf(out + used, len - used, "%s%s", used > 0 ? " " : "", names[i]);
    }
    if (used == 0) {
        snprintf(out, len, "%s", "none");
    }
}
