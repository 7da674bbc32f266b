/* backup: see backup.h. */
#include "backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "store.h"

#define BACKUP_PATH 4096

/* dir + "/" + rel into out (no '/' when either is ""); 0 when it does not fit. */
static int backup_join(char *out, size_t cap, const char *dir, const char *rel) {
    int n = snprintf(out, cap, "%s%s%s", dir, dir[0] && rel[0] ? "/" : "", rel);
    return n >= 0 && (size_t)n < cap;
}

int hv_backup_skip(const char *rel) {
    static const char *const skip[] = {"state.db",         "state.db-wal", "state.db-shm",
                                       "state.db-journal", "hvhead.lock",  "uploads"};
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
        if (strcmp(rel, skip[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Copies one regular file, keeping its mode; adds its size to *bytes. */
static hv_err backup_file(const char *from, const char *to, mode_t mode, uint64_t *bytes, char *err,
                          size_t errlen) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        hv_errf(err, errlen, "cannot read %s: %s", from, strerror(errno));
        return HV_EIO;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    if (out < 0) {
        hv_errf(err, errlen, "cannot create %s: %s", to, strerror(errno));
        close(in);
        return HV_EIO;
    }
    hv_err rc = HV_OK;
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            hv_errf(err, errlen, "cannot read %s: %s", from, strerror(errno));
            rc = HV_EIO;
            break;
        }
        if (n == 0) {
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w < 0) {
                hv_errf(err, errlen, "cannot write %s: %s", to, strerror(errno));
                rc = HV_EIO;
                break;
            }
            off += w;
        }
        if (rc != HV_OK) {
            break;
        }
        *bytes += (uint64_t)n;
    }
    /* The backup is worth something only once it is on disk. */
    if (rc == HV_OK && (fsync(out) != 0 || fchmod(out, mode & 07777) != 0)) {
        hv_errf(err, errlen, "cannot write %s: %s", to, strerror(errno));
        rc = HV_EIO;
    }
    if (close(out) != 0 && rc == HV_OK) {
        hv_errf(err, errlen, "cannot write %s: %s", to, strerror(errno));
        rc = HV_EIO;
    }
    close(in);
    return rc;
}

/* Copies the directory from/rel into to/rel (rel "" = the top), recursively. */
static hv_err backup_dir(const char *from, const char *to, const char *rel, hv_backup_stats_t *st,
                         char *err, size_t errlen) {
    char src[BACKUP_PATH], dst[BACKUP_PATH];
    if (!backup_join(src, sizeof(src), from, rel)) {
        hv_errf(err, errlen, "a path under %s is too long", from);
        return HV_EIO;
    }
    DIR *d = opendir(src);
    if (d == NULL) {
        hv_errf(err, errlen, "cannot read the directory %s: %s", src, strerror(errno));
        return HV_EIO;
    }
    hv_err rc = HV_OK;
    struct dirent *e;
    while (rc == HV_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char r[BACKUP_PATH];
        if (!backup_join(r, sizeof(r), rel, e->d_name) || !backup_join(src, sizeof(src), from, r) ||
            !backup_join(dst, sizeof(dst), to, r)) {
            hv_errf(err, errlen, "a path under %s is too long", from);
            rc = HV_EIO;
            break;
        }
        if (hv_backup_skip(r)) {
            continue;
        }
        struct stat sb;
        if (lstat(src, &sb) != 0) {
            if (errno == ENOENT) {
                continue; /* deleted since it was listed (a swept artifact) */
            }
            hv_errf(err, errlen, "cannot read %s: %s", src, strerror(errno));
            rc = HV_EIO;
        } else if (S_ISDIR(sb.st_mode)) {
            if (mkdir(dst, sb.st_mode & 07777) != 0) {
                hv_errf(err, errlen, "cannot create %s: %s", dst, strerror(errno));
                rc = HV_EIO;
            } else {
                rc = backup_dir(from, to, r, st, err, errlen);
            }
        } else if (S_ISREG(sb.st_mode)) {
            rc = backup_file(src, dst, sb.st_mode, &st->bytes, err, errlen);
            st->files += rc == HV_OK;
        } else {
            st->skipped++;
        }
    }
    closedir(d);
    return rc;
}

hv_err hv_backup_data_dir(const char *data_dir, const char *to, hv_backup_stats_t *out, char *err,
                          size_t errlen) {
    hv_backup_stats_t st = {0};
    char db[BACKUP_PATH], dst[BACKUP_PATH];
    struct stat sb;
    if (!backup_join(db, sizeof(db), data_dir, "state.db") ||
        !backup_join(dst, sizeof(dst), to, "state.db")) {
        hv_errf(err, errlen, "the path %s is too long", data_dir);
        return HV_EINVAL;
    }
    if (stat(data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        hv_errf(err, errlen, "no data directory %s", data_dir);
        return HV_ENOTFOUND;
    }
    if (stat(db, &sb) != 0) {
        hv_errf(err, errlen, "%s holds no state.db: not a head's data directory", data_dir);
        return HV_ENOTFOUND;
    }
    if (mkdir(to, 0700) != 0) {
        hv_errf(err, errlen, "cannot create %s: %s", to,
                errno == EEXIST ? "it exists already (a backup goes to a new directory)"
                                : strerror(errno));
        return errno == EEXIST ? HV_EEXIST : HV_EIO;
    }
    char why[700] = "";
    hv_err rc = hv_store_backup(db, dst, &st.db_pages, why, sizeof(why));
    if (rc != HV_OK) {
        hv_errf(err, errlen, "%s (the partial backup is in %s)", why, to);
        return rc;
    }
    rc = backup_dir(data_dir, to, "", &st, why, sizeof(why));
    if (rc != HV_OK) {
        hv_errf(err, errlen, "%s (the partial backup is in %s)", why, to);
        return rc;
    }
    *out = st;
    return HV_OK;
}
