/*
 * driver_artifacts.c: the artifact store (head/store/artifacts.c) as the services reach it. Its
 * reads are views (views.h: present, size, the bytes of a whole one); its writes are driver
 * commands (driver.h): an upload's chunk, and the record of a use, stored before the artifact is
 * served, whose failure is the store's trouble like any other write's. A leaf of the driver: it
 * calls the store layer and driver_rows.c's store health, never the driver's other files.
 */
#include "driver_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "views.h"

void hv_driver_set_artifacts(hv_driver_t *d, hv_artifacts_t *a) { d->arts = a; }

hv_err hv_driver_artifact_touch(hv_driver_t *d, const char *digest, char *err, size_t errlen) {
    if (d->arts == NULL) {
        snprintf(err, errlen, "the head keeps no artifacts");
        return HV_EUNAVAIL;
    }
    hv_err rc = hv_artifacts_touch(d->arts, digest, err, errlen);
    hv__driver_store_result(d, rc, "record an artifact's use");
    const char *why = hv_driver_store_trouble(d); /* the store's words for clients */
    if (rc != HV_OK && why != NULL) {
        snprintf(err, errlen, "%s", why);
    }
    return rc;
}

hv_err hv_driver_artifact_write(hv_driver_t *d, const char *digest, uint64_t total, uint64_t offset,
                                const uint8_t *data, size_t len, int last, uint64_t *received,
                                int *complete, char *err, size_t errlen) {
    *received = 0;
    *complete = 0;
    if (d->arts == NULL) {
        snprintf(err, errlen, "the head keeps no artifacts");
        return HV_EUNAVAIL;
    }
    return hv_artifacts_write(d->arts, digest, total, offset, data, len, last, received, complete,
                              err, errlen);
}

/* ---- views ------------------------------------------------------------------------------------ */

int hv_view_artifacts_kept(hv_driver_t *d) { return d->arts != NULL; }

uint64_t hv_view_artifact_max(hv_driver_t *d) {
    return d->arts != NULL ? hv_artifacts_max(d->arts) : 0;
}

int hv_view_artifact_present(hv_driver_t *d, const char *digest) {
    return d->arts != NULL && hv_artifacts_present(d->arts, digest);
}

uint64_t hv_view_artifact_partial(hv_driver_t *d, const char *digest) {
    return d->arts != NULL ? hv_artifacts_partial(d->arts, digest) : 0;
}

hv_err hv_view_artifact_size(hv_driver_t *d, const char *digest, uint64_t *size) {
    char path[4096];
    struct stat sb;
    if (!hv_view_artifact_present(d, digest) ||
        hv_artifacts_path(d->arts, digest, path, sizeof(path)) != HV_OK || stat(path, &sb) != 0) {
        return HV_ENOTFOUND;
    }
    *size = (uint64_t)sb.st_size;
    return HV_OK;
}

hv_err hv_view_artifact_open(hv_driver_t *d, const char *digest, int *fd, uint64_t *size, char *err,
                             size_t errlen) {
    char path[4096];
    *fd = -1;
    if (!hv_view_artifact_present(d, digest) ||
        hv_artifacts_path(d->arts, digest, path, sizeof(path)) != HV_OK) {
        snprintf(err, errlen, "no artifact %s", digest);
        return HV_ENOTFOUND;
    }
    struct stat sb;
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0 || fstat(*fd, &sb) != 0) {
        snprintf(err, errlen, "cannot open artifact %s: %s", digest, strerror(errno));
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
        return HV_EIO;
    }
    *size = (uint64_t)sb.st_size;
    return HV_OK;
}
