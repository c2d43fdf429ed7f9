/* What gdunlock report takes out of the evidence before a user sends it:
 * host names and user names (whole words), user paths (/home/NAME), UUIDs
 * (each one replaced by the same stand-in wherever it appears, so that a
 * GPU's UUID still ties its files together) and serial numbers (the values
 * of keys that name a serial, WWN, UUID or disk link: udev's
 * E:ID_SERIAL=..., S:disk/by-id/..., root=UUID=...). What is left keeps its
 * format, so a scrubbed capture still replays with doctor --sysroot. */
#ifndef GDUNLOCK_REPORT_REPORT_SCRUB_H
#define GDUNLOCK_REPORT_REPORT_SCRUB_H

#include <stddef.h>

enum { GDU_SCRUB_MAX_WORDS = 16, GDU_SCRUB_MAX_UUIDS = 256 };

typedef struct gdu_scrub {
    char words[GDU_SCRUB_MAX_WORDS][64]; /* host and user names */
    const char *stand_in[GDU_SCRUB_MAX_WORDS];
    size_t n_words;
    char uuids[GDU_SCRUB_MAX_UUIDS][37]; /* the ones seen, lower case: stand-in N is index N */
    size_t n_uuids;
    size_t replaced; /* replacements made so far */
} gdu_scrub;

void gdu_scrub_init(gdu_scrub *s);

/* A word to replace wherever it stands whole (not inside a longer name):
 * a host name by "host", a user name by "user". Empty, too short (under 3
 * characters) or "root" words are not taken (they would hit everything). */
void gdu_scrub_add_host(gdu_scrub *s, const char *name);
void gdu_scrub_add_user(gdu_scrub *s, const char *name);

/* The scrubbed copy of text (NUL-terminated, malloc'd; NULL on out of memory). */
char *gdu_scrub_text(gdu_scrub *s, const char *text);

/* Scrubs every regular file under dir in place, text files only (a file
 * with a NUL byte is left as it is: PCI config space holds none of these);
 * links are not followed. A first pass takes the NAME of every /home/NAME
 * as a user name. Returns the number of files changed, or -errno. */
long gdu_scrub_tree(gdu_scrub *s, const char *dir);

#endif
