/* Making a folder and the folders above it, as mkdir -p does. */
#ifndef GDUNLOCK_UTIL_MKDIRS_H
#define GDUNLOCK_UTIL_MKDIRS_H

/* Makes path and its missing parents (mode 0755); existing ones are fine.
 * Returns 0 or -errno (-ENAMETOOLONG past PATH_MAX). */
int gdu_mkdirs(const char *path);

#endif
