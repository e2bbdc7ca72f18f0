/* The part of the filesystem a session may touch: one or more roots. Client
 * paths are the real absolute paths (so ftp://dtn/data/x means /data/x, as
 * with globus-gridftp-server -restrict-paths); a path must lie under a root,
 * may not contain "..", and is opened with openat2(RESOLVE_BENEATH) from the
 * root's descriptor so that no symlink leads out of it. */
#ifndef SDMZ_ROOTFS_H
#define SDMZ_ROOTFS_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define ROOTFS_MAX 16

struct rootfs_root {
    char path[PATH_MAX];   /* canonical, no trailing slash ("/" stays "/") */
    size_t len;
    int fd;                /* O_PATH | O_DIRECTORY */
};

struct rootfs {
    unsigned count;
    struct rootfs_root roots[ROOTFS_MAX];
};

/* A resolved client path: the root it lies in and the path below it. */
struct rootfs_path {
    const struct rootfs_root *root;
    char rel[PATH_MAX];     /* "." for the root itself */
    char canon[PATH_MAX];   /* the absolute path, as logs and replies show it */
};

int rootfs_add(struct rootfs *fs, const char *dir, char *err, size_t errlen);
void rootfs_close(struct rootfs *fs);

/* path is absolute, or relative to cwd (itself absolute). 0, or -1 with errno
 * EINVAL (".." or too long) or EACCES (outside every root). */
int rootfs_resolve(const struct rootfs *fs, const char *cwd, const char *path,
                   struct rootfs_path *out);
/* openat2 beneath the root; -1 with errno (EXDEV: a symlink leads out). */
int rootfs_open(const struct rootfs_path *path, int flags, mode_t mode);
/* The fallback where openat2 is missing: rel opened one component at a time
 * from root_fd with O_NOFOLLOW; -1 with errno ELOOP on any symbolic link. */
int rootfs_open_components(int root_fd, const char *rel, int flags, mode_t mode);
int rootfs_stat(const struct rootfs_path *path, struct stat *st);
int rootfs_mkdir(const struct rootfs_path *path, mode_t mode);

#endif
