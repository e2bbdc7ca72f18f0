#include "rootfs.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int rootfs_add(struct rootfs *fs, const char *dir, char *err, size_t errlen)
{
    struct rootfs_root *root;
    char *canon;

    if (fs->count == ROOTFS_MAX) {
        snprintf(err, errlen, "--root %s: at most %d roots", dir, ROOTFS_MAX);
        return -1;
    }
    canon = realpath(dir, NULL);
    if (!canon) {
        snprintf(err, errlen, "--root %s: %s", dir, strerror(errno));
        return -1;
    }
    root = &fs->roots[fs->count];
    root->fd = open(canon, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root->fd < 0) {
        snprintf(err, errlen, "--root %s: %s", dir, strerror(errno));
        free(canon);
        return -1;
    }
    snprintf(root->path, sizeof root->path, "%s", canon);
    root->len = strlen(root->path);
    free(canon);
    fs->count++;
    return 0;
}

void rootfs_close(struct rootfs *fs)
{
    for (unsigned i = 0; i < fs->count; i++)
        close(fs->roots[i].fd);
    fs->count = 0;
}

/* Joins cwd and path and drops empty and "." components; ".." is refused
 * rather than folded, so a path never means something its text hides. */
static int normalise(const char *cwd, const char *path, char *out, size_t outlen)
{
    char joined[2 * PATH_MAX];
    size_t used = 0;
    char *save = NULL, *part;

    if (snprintf(joined, sizeof joined, "%s/%s", path[0] == '/' ? "" : cwd, path) >=
        (int)sizeof joined) {
        errno = EINVAL;
        return -1;
    }
    out[0] = '\0';
    for (part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        size_t len = strlen(part);
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0 || used + len + 2 > outlen) {
            errno = EINVAL;
            return -1;
        }
        out[used++] = '/';
        memcpy(out + used, part, len + 1);
        used += len;
    }
    if (used == 0)
        snprintf(out, outlen, "/");
    return 0;
}

int rootfs_resolve(const struct rootfs *fs, const char *cwd, const char *path,
                   struct rootfs_path *out)
{
    const struct rootfs_root *best = NULL;

    if (normalise(cwd, path, out->canon, sizeof out->canon) < 0)
        return -1;
    for (unsigned i = 0; i < fs->count; i++) {
        const struct rootfs_root *root = &fs->roots[i];
        int inside = root->len == 1 ||
                     (strncmp(out->canon, root->path, root->len) == 0 &&
                      (out->canon[root->len] == '\0' || out->canon[root->len] == '/'));
        if (inside && (!best || root->len > best->len))
            best = root;
    }
    if (!best) {
        errno = EACCES;
        return -1;
    }
    out->root = best;
    const char *rest = best->len == 1 ? out->canon + 1 : out->canon + best->len;
    while (*rest == '/')
        rest++;
    snprintf(out->rel, sizeof out->rel, "%s", *rest ? rest : ".");
    return 0;
}

/* ELOOP if name (in dirfd) is a symbolic link, else the errno given. */
static int symlink_or(int dirfd, const char *name, int err)
{
    struct stat st;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return ELOOP;
    return err;
}

static bool is_symlink(int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 && S_ISLNK(st.st_mode);
}

int rootfs_open_components(int root_fd, const char *rel, int flags, mode_t mode)
{
    char copy[PATH_MAX], *save = NULL, *part, *next;
    int dirfd = root_fd, fd = -1;

    if (snprintf(copy, sizeof copy, "%s", rel) >= (int)sizeof copy) {
        errno = ENAMETOOLONG;
        return -1;
    }
    part = strtok_r(copy, "/", &save);
    for (; part; part = next) {
        next = strtok_r(NULL, "/", &save);
        if (strcmp(part, "..") == 0) {
            fd = -1;
            errno = EINVAL;
            break;
        }
        if (next)
            fd = openat(dirfd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else
            fd = openat(dirfd, part, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
            errno = symlink_or(dirfd, part, errno);
        else if (!next && (flags & O_PATH) && is_symlink(fd)) {
            close(fd);   /* O_PATH | O_NOFOLLOW opens a symlink itself */
            fd = -1;
            errno = ELOOP;
        }
        if (dirfd != root_fd) {
            int saved = errno;
            close(dirfd);
            errno = saved;
        }
        if (fd < 0 || !next)
            break;
        dirfd = fd;
    }
    return fd;
}

int rootfs_open(const struct rootfs_path *path, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long fd;

    do
        fd = syscall(SYS_openat2, path->root->fd, path->rel, &how, sizeof how);
    while (fd < 0 && errno == EINTR);
    /* No openat2: a kernel before 5.6, or a seccomp filter (systemd's
     * RestrictSUIDSGID= answers ENOSYS). The walk below follows no
     * symbolic link at all, which is stricter, never looser. */
    if (fd < 0 && errno == ENOSYS)
        return rootfs_open_components(path->root->fd, path->rel, flags, mode);
    return (int)fd;
}

int rootfs_stat(const struct rootfs_path *path, struct stat *st)
{
    int fd = rootfs_open(path, O_PATH, 0), rc;

    if (fd < 0)
        return -1;
    rc = fstat(fd, st);
    close(fd);
    return rc;
}

int rootfs_mkdir(const struct rootfs_path *path, mode_t mode)
{
    struct rootfs_path parent = *path;
    char *slash = strrchr(parent.rel, '/');
    const char *name;
    int dirfd, rc;

    if (strcmp(path->rel, ".") == 0) {
        errno = EEXIST;
        return -1;
    }
    if (slash) {
        *slash = '\0';
        name = path->rel + (slash - parent.rel) + 1;
    } else {
        snprintf(parent.rel, sizeof parent.rel, ".");
        name = path->rel;
    }
    dirfd = rootfs_open(&parent, O_PATH | O_DIRECTORY, 0);
    if (dirfd < 0)
        return -1;
    rc = mkdirat(dirfd, name, mode);
    close(dirfd);
    return rc;
}
