#include "report/report_scrub.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void gdu_scrub_init(gdu_scrub *s) { memset(s, 0, sizeof *s); }

static void add_word(gdu_scrub *s, const char *name, const char *stand_in)
{
    size_t n = name ? strcspn(name, "\n") : 0;
    if (n < 3 || n >= sizeof s->words[0] || strncmp(name, "root", n) == 0 ||
        s->n_words >= GDU_SCRUB_MAX_WORDS)
        return;
    for (size_t i = 0; i < s->n_words; i++)
        if (strlen(s->words[i]) == n && strncmp(s->words[i], name, n) == 0)
            return;
    memcpy(s->words[s->n_words], name, n);
    s->words[s->n_words][n] = '\0';
    s->stand_in[s->n_words++] = stand_in;
}

void gdu_scrub_add_host(gdu_scrub *s, const char *name) { add_word(s, name, "host"); }
void gdu_scrub_add_user(gdu_scrub *s, const char *name) { add_word(s, name, "user"); }

/* A growing output buffer. */
typedef struct {
    char *p;
    size_t n, cap;
    bool failed;
} out_buf;

static void put(out_buf *o, const char *text, size_t n)
{
    if (o->failed)
        return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = (o->cap + n + 1) * 2;
        char *grown = realloc(o->p, cap);
        if (grown == NULL) {
            o->failed = true;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->n, text, n);
    o->n += n;
    o->p[o->n] = '\0';
}

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

static size_t uuid_at(const char *p)
{
    static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    for (size_t i = 0; i < sizeof shape - 1; i++)
        if (shape[i] == 'x' ? !isxdigit((unsigned char)p[i]) : p[i] != '-')
            return 0;
    return sizeof shape - 1;
}

static size_t uuid_index(gdu_scrub *s, const char *p)
{
    char lower[37];
    for (int i = 0; i < 36; i++)
        lower[i] = (char)tolower((unsigned char)p[i]);
    lower[36] = '\0';
    for (size_t i = 0; i < s->n_uuids; i++)
        if (strcmp(s->uuids[i], lower) == 0)
            return i;
    if (s->n_uuids < GDU_SCRUB_MAX_UUIDS)
        memcpy(s->uuids[s->n_uuids++], lower, sizeof lower);
    return s->n_uuids - 1;
}

/* At p, a word: "KEY=" or "KEY:" whose KEY names a serial number, a WWN, a
 * UUID or disk links (udev's E:ID_SERIAL=, E:DEVLINKS=, root=UUID=): the
 * length up to the separator; or a disk link's folder in a path
 * (/dev/disk/by-id/NAME, udev's S:disk/by-id/NAME): the length up to NAME.
 * 0 otherwise. */
static size_t secret_at(const char *p)
{
    static const char *const keys[] = {"SERIAL", "WWN", "UUID", "DEVLINKS"};
    static const char *const folders[] = {"by-id/", "by-uuid/", "by-path/", "by-partuuid/"};
    size_t n = 0;
    while (name_char(p[n]) && n < 64)
        n++;
    if (n > 0 && (p[n] == '=' || p[n] == ':'))
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            for (size_t j = 0, k = strlen(keys[i]); j + k <= n; j++)
                if (strncasecmp(p + j, keys[i], k) == 0)
                    return n + 1;
    size_t token = strcspn(p, " \t\n,;\"");
    for (size_t i = 0; i < sizeof folders / sizeof folders[0]; i++) {
        const char *f = strstr(p, folders[i]);
        if (f != NULL && (size_t)(f - p) < token)
            return (size_t)(f - p) + strlen(folders[i]);
    }
    return 0;
}

char *gdu_scrub_text(gdu_scrub *s, const char *text)
{
    out_buf o = {0};
    put(&o, "", 0);
    const char *p = text;
    while (*p && !o.failed) {
        bool word_start = p == text || !name_char(p[-1]);
        size_t n;
        if (word_start && (n = secret_at(p)) > 0) {
            put(&o, p, n);
            p += n;
            /* A UUID keeps its one stand-in, so that its uses still match. */
            size_t skip = strncmp(p, "GPU-", 4) == 0 ? 4 : 0;
            if (uuid_at(p + skip) > 0)
                continue;
            size_t v = strcspn(p, " \t\n,;\"");
            if (v > 0) {
                put(&o, "scrubbed", 8);
                s->replaced++;
            }
            p += v;
            continue;
        }
        if ((p == text || !isalnum((unsigned char)p[-1])) && (n = uuid_at(p)) > 0) {
            char stand_in[40];
            snprintf(stand_in, sizeof stand_in, "00000000-0000-0000-0000-%012zx", uuid_index(s, p));
            put(&o, stand_in, 36);
            s->replaced++;
            p += n;
            continue;
        }
        if (strncmp(p, "/home/", 6) == 0 && name_char(p[6])) {
            put(&o, "/home/user", 10);
            s->replaced++;
            p += 6;
            while (*p && *p != '/' && !isspace((unsigned char)*p) && *p != '"')
                p++;
            continue;
        }
        bool hit = false;
        for (size_t i = 0; word_start && i < s->n_words; i++) {
            size_t k = strlen(s->words[i]);
            if (strncmp(p, s->words[i], k) == 0 && !name_char(p[k])) {
                put(&o, s->stand_in[i], strlen(s->stand_in[i]));
                s->replaced++;
                p += k;
                hit = true;
                break;
            }
        }
        if (!hit)
            put(&o, p++, 1);
    }
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    return o.p;
}

/* The user names of /home/NAME paths in text, to scrub wherever else they
 * stand (a subvolume, a project folder named after its owner). */
static void learn_users(gdu_scrub *s, const char *text)
{
    for (const char *p = text; (p = strstr(p, "/home/")) != NULL;) {
        p += 6;
        char name[64];
        size_t n = 0;
        while (name_char(p[n]) && n + 1 < sizeof name) {
            name[n] = p[n];
            n++;
        }
        name[n] = '\0';
        gdu_scrub_add_user(s, name);
        p += n;
    }
}

/* learn: only gather user names; else scrub the file. */
static int scrub_file(gdu_scrub *s, const char *path, bool learn)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -errno;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size > (16 << 20)) {
        fclose(f);
        return 0;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (text == NULL)
        return -ENOMEM;
    text[n] = '\0';
    int changed = 0;
    if (learn && memchr(text, '\0', n) == NULL)
        learn_users(s, text);
    else if (memchr(text, '\0', n) == NULL) {
        size_t before = s->replaced;
        char *clean = gdu_scrub_text(s, text);
        if (clean == NULL) {
            free(text);
            return -ENOMEM;
        }
        if (s->replaced != before) {
            f = fopen(path, "we");
            changed = f != NULL && fputs(clean, f) >= 0 ? 1 : -EIO;
            if (f != NULL && fclose(f) != 0)
                changed = -EIO;
        }
        free(clean);
    }
    free(text);
    return changed;
}

static long walk(gdu_scrub *s, const char *dir, bool learn)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -errno;
    long changed = 0;
    const struct dirent *e;
    while (changed >= 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0)
            continue;
        long rc = S_ISDIR(st.st_mode)   ? walk(s, path, learn)
                  : S_ISREG(st.st_mode) ? scrub_file(s, path, learn)
                                        : 0;
        changed = rc < 0 ? rc : changed + rc;
    }
    closedir(d);
    return changed;
}

long gdu_scrub_tree(gdu_scrub *s, const char *dir)
{
    long rc = walk(s, dir, true);
    return rc < 0 ? rc : walk(s, dir, false);
}
