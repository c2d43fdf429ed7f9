/* The one envelope of every --json document and how documents are printed:
 * what a document says about the command's failure is cli_error.c's. */
#include "cli/cli_json.h"
#include "util/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int saved_argc;
static char *const *saved_argv;

void gdu_cli_set_args(int argc, char **argv)
{
    /* A copy of the array: getopt_long reorders argv as it reads it. */
    static char **copy;
    free(copy);
    copy = malloc(((size_t)argc + 1) * sizeof *copy);
    if (copy != NULL)
        memcpy(copy, argv, ((size_t)argc + 1) * sizeof *copy);
    saved_argc = copy != NULL ? argc : 0;
    saved_argv = copy;
}

/* Whether a shell reads word as it is, unquoted. */
static int plain_word(const char *word)
{
    if (word[0] == '\0')
        return 0;
    for (const char *c = word; *c; c++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                   *c) == NULL)
            return 0;
    return 1;
}

char *gdu_cli_command_line(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m == NULL)
        return NULL;
    fputs("gdunlock", m);
    for (int i = 1; i < saved_argc; i++) {
        const char *w = saved_argv[i];
        fputc(' ', m);
        if (plain_word(w)) {
            fputs(w, m);
            continue;
        }
        /* '...' with each ' written as '\'' */
        fputc('\'', m);
        for (; *w; w++)
            fputs(*w == '\'' ? "'\\''" : (char[]){*w, '\0'}, m);
        fputc('\'', m);
    }
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

json_t *gdu_cli_envelope(const char *command, json_t *doc, const char *schema, int exit_code)
{
    json_t *env = json_object();
    char *line = gdu_cli_command_line();
    if (schema == NULL)
        schema = json_string_value(json_object_get(doc, "schema"));
    int bad = env == NULL || line == NULL || doc == NULL || schema == NULL ||
              json_object_set_new(env, "schema", json_string(schema)) != 0 ||
              json_object_set_new(env, "command", gdu_json_text(command)) != 0 ||
              gdu_json_set_text(env, "command_line", line) != 0 ||
              json_object_set_new(env, "exit_code", json_integer(exit_code)) != 0 ||
              json_object_update_missing(env, doc) != 0;
    free(line);
    json_decref(doc);
    if (!bad)
        return env;
    json_decref(env);
    return NULL;
}

void gdu_cli_print(json_t *doc, size_t flags)
{
    if (doc != NULL && json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | flags) == 0)
        fputc('\n', stdout);
    json_decref(doc);
}

/* Writes text with indent spaces before each of its lines. */
static void put_indented(const char *text, int indent)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        fprintf(stdout, "%*s%.*s", indent, "", (int)len, line);
        line += len;
    }
}

gdu_cli_printed gdu_cli_print_streamed(const char *command, json_t *env, size_t flags,
                                       const gdu_cli_stream *tail)
{
    /* An empty array in the tail's place, cut at its "[]": what jansson
     * writes for the whole document up to there, then the items as jansson
     * indents them two levels down. */
    char *head = NULL;
    if (env != NULL && json_object_set_new(env, tail->key, json_array()) == 0)
        head = json_dumps(env, JSON_INDENT(2) | JSON_PRESERVE_ORDER | flags);
    json_decref(env);
    size_t len = head != NULL ? strlen(head) : 0;
    if (len < 4 || strcmp(head + len - 4, "[]\n}") != 0) {
        free(head);
        return GDU_CLI_NOT_BUILT;
    }
    fwrite(head, 1, len - 4, stdout);
    free(head);
    if (tail->n == 0) {
        fputs("[]\n}\n", stdout);
        return GDU_CLI_PRINTED;
    }
    fputs("[\n", stdout);
    for (size_t i = 0; i < tail->n; i++) {
        json_t *item = tail->item(tail->ctx, i);
        char *text =
            item != NULL ? json_dumps(item, JSON_INDENT(2) | JSON_PRESERVE_ORDER | flags) : NULL;
        json_decref(item);
        if (text == NULL) { /* half a document on stdout: no error document after it */
            fputc('\n', stdout);
            fprintf(stderr, "gdunlock %s: out of memory while writing the JSON document\n",
                    command);
            return GDU_CLI_CUT_SHORT;
        }
        put_indented(text, 4);
        free(text);
        fputs(i + 1 < tail->n ? ",\n" : "\n", stdout);
    }
    fputs("  ]\n}\n", stdout);
    return GDU_CLI_PRINTED;
}
