/* The runner: build, install, revert (status in unlock_status.c). */
#include "unlock/unlock_run.h"

#include "unlock/unlock_exec.h"
#include "util/mkdirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* root + path: where the machine's path lies for this target. */
static void at(const gdu_unlock_target *t, const char *path, char *out, size_t len)
{
    gdu_unlock_format(out, len, "%s%s", t->root, path);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- --build ---- */

int gdu_unlock_build_program(char *out, size_t len, gdu_unlock_error *err)
{
    const char *env = getenv("GDUNLOCK_P2P_BUILD");
    if (env != NULL && env[0] != '\0') {
        snprintf(out, len, "%s", env);
        if (access(out, X_OK) == 0)
            return 0;
        gdu_unlock_fail(err, GDU_EXIT_UNAVAILABLE, "no_build_program",
                        "unset GDUNLOCK_P2P_BUILD or name the program",
                        "GDUNLOCK_P2P_BUILD=%s is not an executable program", env);
        return -ENOENT;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(out, len, "%s/../libexec/gdunlock/p2p-build", exe);
        if (access(out, X_OK) == 0)
            return 0;
    }
    gdu_unlock_fail(
        err, GDU_EXIT_UNAVAILABLE, "no_build_program",
        "install gdunlock with its build program (cmake --install), or set GDUNLOCK_P2P_BUILD",
        "the build program is missing: looked for %s", n > 0 ? out : "libexec/gdunlock/p2p-build");
    return -ENOENT;
}

/* build.json of out, or NULL with why. */
static json_t *read_build_json(const char *out, char *why, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/build.json", out);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s is not a regular file", path);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (doc == NULL || !json_is_object(doc))
        gdu_unlock_format(why, len, "%s is not a JSON object: %s", path, doc ? "" : jerr.text);
    if (doc != NULL && !json_is_object(doc)) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

static const char *json_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

int gdu_unlock_build(const gdu_unlock_build_args *a, gdu_unlock_build_result *r,
                     gdu_unlock_error *err)
{
    memset(r, 0, sizeof *r);
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)a->program;
    argv[n++] = "--out";
    argv[n++] = (char *)a->out;
    if (a->source) {
        argv[n++] = "--source";
        argv[n++] = (char *)a->source;
    }
    if (a->version && a->version[0]) {
        argv[n++] = "--version";
        argv[n++] = (char *)a->version;
    }
    if (a->kernel_headers) {
        argv[n++] = "--kernel-headers";
        argv[n++] = (char *)a->kernel_headers;
    }
    if (a->no_kernel)
        argv[n++] = "--no-kernel";
    argv[n] = NULL;
    char said[8192], last[768], why[512];
    r->program_exit = gdu_unlock_exec(argv, true, said, sizeof said);
    gdu_unlock_last_line(said, last, sizeof last);
    json_t *doc = r->program_exit == 0 ? read_build_json(a->out, why, sizeof why) : NULL;
    if (doc != NULL) {
        snprintf(r->status, sizeof r->status, "%s", json_str(doc, "status"));
        snprintf(r->version, sizeof r->version, "%s", json_str(doc, "version"));
        r->kernel_built = json_is_true(json_object_get(json_object_get(doc, "kernel"), "built"));
        json_decref(doc);
        char patch[PATH_MAX];
        snprintf(patch, sizeof patch, "%s/gdunlock-p2p-%s.patch", a->out, r->version);
        if (exists(patch))
            snprintf(r->patch, sizeof r->patch, "%s", patch);
    }
    if (r->program_exit == 0 && strcmp(r->status, "ok") == 0)
        return 0;
    if (r->program_exit == 0)
        return gdu_unlock_fail(
            err, GDU_EXIT_FAILED, "build_not_ok", "see build.log in the out folder",
            "the build program exited 0 but %s", doc ? "build.json does not say \"ok\"" : why);
    /* The program's own error line names cause and fix: "p2p-build: error: CAUSE; FIX". */
    const char *cause = strstr(last, "error: ");
    cause = cause ? cause + 7 : last;
    const char *semi = strstr(cause, "; ");
    int p = r->program_exit;
    int exit_code = p == GDU_EXIT_USAGE || p == GDU_EXIT_DATAERR || p == GDU_EXIT_NOINPUT ||
                            p == GDU_EXIT_UNAVAILABLE || p == GDU_EXIT_SOFTWARE ||
                            p == GDU_EXIT_CANTCREAT || p == GDU_EXIT_IOERR
                        ? p
                        : GDU_EXIT_FAILED;
    gdu_unlock_fail(err, exit_code, "build_failed",
                    semi ? semi + 2 : "see build.log in the out folder",
                    "the build failed (p2p-build exit %d): %.*s", r->program_exit,
                    (int)(semi ? (size_t)(semi - cause) : strlen(cause)), cause);
    return -1;
}

/* ---- the state file ---- */

static json_t *read_state(const gdu_unlock_target *t)
{
    char path[PATH_MAX];
    at(t, GDU_UNLOCK_STATE_FILE, path, sizeof path);
    json_t *doc = json_load_file(path, 0, NULL);
    if (doc != NULL && !json_is_object(doc)) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

static int write_state(const gdu_unlock_target *t, json_t *state)
{
    char path[PATH_MAX];
    at(t, GDU_UNLOCK_STATE_FILE, path, sizeof path);
    char *text = json_dumps(state, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text == NULL)
        return -ENOMEM;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (line == NULL) {
        free(text);
        return -ENOMEM;
    }
    memcpy(line + n, "\n", 2);
    int rc = gdu_unlock_write_file(path, line);
    free(line);
    return rc;
}

/* ---- programs ---- */

/* dkms VERB ARGS... (NULL-ended), with the target's trees when it has a root. */
static int dkms(const gdu_unlock_target *t, char *said, size_t len, char *shown, size_t shown_len,
                ...)
{
    char *argv[24], trees[3][PATH_MAX + 32];
    int n = 0;
    argv[n++] = "dkms";
    va_list ap;
    va_start(ap, shown_len);
    for (const char *a; n < 16 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = (char *)a;
    va_end(ap);
    if (t->root[0]) {
        static const char *const opt[] = {"--dkmstree", "--sourcetree", "--installtree"};
        static const char *const dir[] = {"/var/lib/dkms", "/usr/src", "/lib/modules"};
        for (int i = 0; i < 3; i++) {
            at(t, dir[i], trees[i], sizeof trees[i]);
            argv[n++] = (char *)opt[i];
            argv[n++] = trees[i];
        }
    }
    argv[n] = NULL;
    gdu_unlock_argv_text(argv, shown, shown_len);
    return gdu_unlock_exec(argv, false, said, len);
}

/* ---- --install ---- */

typedef struct install {
    const gdu_unlock_target *t;
    const gdu_unlock_check *c;
    gdu_unlock_install_report *r;
    json_t *state;
    char version[32];
    char name_version[96]; /* gdunlock-nvidia-p2p/VER */
    char src_dir[PATH_MAX];
} install;

static void step(gdu_unlock_install_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void step(gdu_unlock_install_report *r, const char *fmt, ...)
{
    if (r->n_steps == GDU_UNLOCK_MAX_STEPS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->steps[r->n_steps++], sizeof r->steps[0], fmt, ap);
    va_end(ap);
}

/* Records that a step is about to run (so an interruption leaves a trail
 * --revert follows). */
static int mark(install *in, const char *done)
{
    json_t *steps = json_object_get(in->state, "steps");
    json_array_append_new(steps, json_string(done));
    return write_state(in->t, in->state);
}

/* The dkms.conf of the edited tree: the modules build.json lists, built by
 * the tree's own top-level Makefile (the RM core first, then kernel-open)
 * for the kernel DKMS names. */
static int write_dkms_conf(const char *dir, const char *version, const json_t *modules)
{
    char text[4096];
    size_t used = (size_t)snprintf(
        text, sizeof text,
        "# Written by gdunlock p2p unlock --install: NVIDIA's open kernel module %s with\n"
        "# gdunlock's BAR1 P2P edits (gdunlock-p2p-%s.patch). Remove with\n"
        "# 'gdunlock p2p unlock --revert'.\n"
        "PACKAGE_NAME=\"" GDU_UNLOCK_DKMS_NAME "\"\n"
        "PACKAGE_VERSION=\"%s\"\n"
        "MAKE[0]=\"make -j$(nproc) modules KERNEL_UNAME=${kernelver}\"\n"
        "AUTOINSTALL=\"yes\"\n",
        version, version, version);
    static const char *const stock[] = {"kernel-open/nvidia.ko", "kernel-open/nvidia-uvm.ko",
                                        "kernel-open/nvidia-modeset.ko",
                                        "kernel-open/nvidia-drm.ko"};
    size_t n = json_array_size(modules) ? json_array_size(modules) : 4;
    for (size_t i = 0; i < n && used < sizeof text; i++) {
        const char *m =
            json_array_size(modules) ? json_string_value(json_array_get(modules, i)) : stock[i];
        if (m == NULL)
            continue;
        const char *base = strrchr(m, '/') ? strrchr(m, '/') + 1 : m;
        const char *source = strncmp(m, "source/", 7) == 0 ? m + 7 : m;
        size_t name_len = strcspn(base, ".");
        used +=
            (size_t)snprintf(text + used, sizeof text - used,
                             "BUILT_MODULE_NAME[%zu]=\"%.*s\"\n"
                             "BUILT_MODULE_LOCATION[%zu]=\"%.*s\"\n"
                             "DEST_MODULE_LOCATION[%zu]=\"/kernel/drivers/video\"\n",
                             i, (int)name_len, base, i, (int)(base - m - (source - m)), source, i);
    }
    char path[PATH_MAX + 16];
    gdu_unlock_format(path, sizeof path, "%s/dkms.conf", dir);
    return gdu_unlock_write_file(path, text);
}

/* The srcversion modpost wrote into the module's .modinfo
 * ("srcversion=HEX\0"), read in pieces (the module is large). */
static void module_srcversion(const char *ko, char *out, size_t len)
{
    static const char key[] = "srcversion=";
    enum { KEY = sizeof key - 1, MAX_VALUE = 64 };
    out[0] = '\0';
    FILE *f = fopen(ko, "rb");
    if (f == NULL)
        return;
    char buf[1 << 16];
    size_t have = 0, n;
    while ((n = fread(buf + have, 1, sizeof buf - have, f)) > 0) {
        have += n;
        char *p = memmem(buf, have, key, KEY);
        const char *end = p ? memchr(p + KEY, '\0', have - (size_t)(p + KEY - buf)) : NULL;
        if (end != NULL) {
            snprintf(out, len, "%.*s", (int)(end - p - KEY < MAX_VALUE ? end - p - KEY : MAX_VALUE),
                     p + KEY);
            break;
        }
        /* keep what may hold the start of key and its value */
        size_t keep = p ? have - (size_t)(p - buf) : (have < KEY ? have : KEY);
        if (keep > KEY + MAX_VALUE)
            keep = 0; /* a value too long is no srcversion */
        memmove(buf, buf + have - keep, keep);
        have = keep;
    }
    fclose(f);
}

static void undo(install *in, gdu_unlock_install_report *undone);

/* Secure Boot on: DKMS signs with its key, which the firmware must trust. */
static int check_signing(install *in, gdu_unlock_error *err)
{
    const gdu_module_env *e = &in->c->env;
    if (e->secure_boot != GDU_TRI_YES)
        return 0;
    char cert[PATH_MAX], said[2048];
    at(in->t, GDU_DKMS_MOK_CERT, cert, sizeof cert);
    char *argv[] = {"mokutil", "--test-key", cert, NULL};
    int rc = gdu_unlock_exec(argv, false, said, sizeof said);
    if (rc == 127)
        return gdu_unlock_fail(
            err, GDU_EXIT_UNAVAILABLE, "no_mokutil",
            "install mokutil (apt-get install mokutil; dnf install mokutil), then run "
            "--install again",
            "Secure Boot is on and mokutil, which tells whether DKMS's key is enrolled, is "
            "missing");
    if (strstr(said, "already enrolled") != NULL)
        return 0;
    return gdu_unlock_fail(
        err, GDU_EXIT_FAILED, "key_not_enrolled",
        "enroll it: sudo mokutil --import " GDU_DKMS_MOK_CERT
        ", reboot, choose 'Enroll MOK' in the blue MOK manager screen and give the "
        "password you set; then run --install again",
        "Secure Boot is on and DKMS's key (" GDU_DKMS_MOK_CERT
        ") is not enrolled in the firmware: the kernel would refuse the signed module "
        "(mokutil: %.200s)",
        said[0] ? said : "no answer");
}

/* What the plan allows, before anything is written. */
static int refuse(const gdu_unlock_target *t, const gdu_unlock_check *c, const char *out,
                  gdu_unlock_error *err)
{
    if (!t->privileged)
        return gdu_unlock_fail(err, GDU_EXIT_NOPERM, "not_root",
                               "run it as root: sudo gdunlock p2p unlock ...",
                               "--install writes /etc/modprobe.d and DKMS's tree: it needs root");
    if (c->plan == GDU_UNLOCK_NOTHING)
        return gdu_unlock_fail(err, GDU_EXIT_FAILED, "nothing_to_do",
                               "none needed: 'gdunlock p2p' shows the pairs' P2P as it is",
                               "nothing to install: %s", c->why);
    if (c->plan == GDU_UNLOCK_IMPOSSIBLE || c->plan == GDU_UNLOCK_UNKNOWN) {
        const gdu_unlock_note *b = c->blockers.n ? &c->blockers.note[0] : NULL;
        return gdu_unlock_fail(
            err, GDU_EXIT_FAILED, "impossible", b ? b->fix : "run gdunlock p2p unlock --check",
            "the plan here is '%s': %s", gdu_unlock_plan_name(c->plan), b ? b->fact : c->why);
    }
    if (c->plan == GDU_UNLOCK_PATCHED && out == NULL)
        return gdu_unlock_fail(
            err, GDU_EXIT_USAGE, "no_out",
            "build first: gdunlock p2p unlock --build --out DIR, then --install --out DIR",
            "the plan here is 'patched module': name the build's folder with --out DIR");
    if (c->plan == GDU_UNLOCK_PATCHED && c->missing.n > 0)
        return gdu_unlock_fail(err, GDU_EXIT_UNAVAILABLE, "missing_prerequisite",
                               c->missing.note[0].fix, "%s", c->missing.note[0].fact);
    return 0;
}

/* build.json of out: "ok", the kernel part built, the installed version. */
static int accept_build(install *in, const char *out, json_t **modules, gdu_unlock_error *err)
{
    char why[PATH_MAX + 128];
    json_t *doc = read_build_json(out, why, sizeof why);
    if (doc == NULL)
        return gdu_unlock_fail(err, GDU_EXIT_NOINPUT, "no_build",
                               "build it: gdunlock p2p unlock --build --out DIR", "%s", why);
    int rc = 0;
    const char *status = json_str(doc, "status");
    const char *version = json_str(doc, "version");
    if (strcmp(status, "ok") != 0)
        rc = gdu_unlock_fail(
            err, GDU_EXIT_FAILED, "build_not_ok",
            "build again (gdunlock p2p unlock --build --out DIR) and install once it says ok",
            "%s/build.json says \"status\": \"%s\"%s%s: that build is not installable", out, status,
            json_str(doc, "error")[0] ? ": " : "", json_str(doc, "error"));
    else if (!json_is_true(json_object_get(json_object_get(doc, "kernel"), "built")))
        rc =
            gdu_unlock_fail(err, GDU_EXIT_FAILED, "no_kernel_modules",
                            "build again without --no-kernel, against the running kernel's headers",
                            "%s holds no kernel modules (built with --no-kernel)", out);
    else if (in->c->version[0] && strcmp(version, in->c->version) != 0)
        rc = gdu_unlock_fail(
            err, GDU_EXIT_FAILED, "version_mismatch",
            "build the installed version: gdunlock p2p unlock --build --out DIR",
            "%s was built from %s but the loaded driver is %s: user space and kernel "
            "module must be one release",
            out, version, in->c->version);
    if (rc == 0) {
        snprintf(in->version, sizeof in->version, "%s", version);
        *modules = json_incref(json_object_get(json_object_get(doc, "kernel"), "modules"));
    }
    json_decref(doc);
    return rc;
}

static int step_failed(install *in, gdu_unlock_error *err, const char *what, const char *said)
{
    char last[512];
    gdu_unlock_last_line(said, last, sizeof last);
    gdu_unlock_install_report undone = {0};
    undo(in, &undone);
    char fix[768];
    snprintf(fix, sizeof fix,
             "fix the cause and run --install again; what ran before it was undone (%zu steps)",
             undone.n_steps);
    return gdu_unlock_fail(err, GDU_EXIT_FAILED, "step_failed", fix, "%s failed: %.400s", what,
                           last[0] ? last : "no output");
}

static int install_module(install *in, const char *out, const json_t *modules,
                          gdu_unlock_error *err)
{
    const gdu_unlock_target *t = in->t;
    char said[8192], shown[1024], tmp[PATH_MAX + 16], from[PATH_MAX];
    /* 1. the edited tree into DKMS's source tree, whole or not at all */
    snprintf(tmp, sizeof tmp, "%s.partial", in->src_dir);
    snprintf(from, sizeof from, "%s/source", out);
    mark(in, "source");
    gdu_unlock_remove_tree(tmp);
    char parent[PATH_MAX];
    at(t, "/usr/src", parent, sizeof parent);
    gdu_mkdirs(parent);
    char *cp[] = {"cp", "-a", "--", from, tmp, NULL};
    int rc = gdu_unlock_exec(cp, false, said, sizeof said);
    if (rc == 0)
        rc = write_dkms_conf(tmp, in->version, modules);
    if (rc == 0 && rename(tmp, in->src_dir) != 0)
        rc = -errno;
    if (rc != 0) {
        gdu_unlock_remove_tree(tmp);
        if (rc < 0)
            snprintf(said, sizeof said, "%s", strerror(-rc));
        return step_failed(in, err, "copying the edited source", said);
    }
    step(in->r, "copied %s to %s with its dkms.conf", from, in->src_dir);
    /* 2. the stock DKMS module of the same version steps aside (its package stays) */
    char stock[PATH_MAX], stock_nv[64];
    snprintf(stock_nv, sizeof stock_nv, "nvidia/%s", in->version);
    gdu_unlock_format(stock, sizeof stock, "%s/var/lib/dkms/nvidia/%s", t->root, in->version);
    if (exists(stock)) {
        json_object_set_new(in->state, "stock_dkms", json_string(stock_nv));
        mark(in, "stock-removed");
        if (dkms(t, said, sizeof said, shown, sizeof shown, "remove", stock_nv, "--all", NULL) != 0)
            return step_failed(in, err, shown, said);
        step(in->r, "%s (the package stays installed; --revert builds it again)", shown);
    }
    /* 3. DKMS adds, builds (and signs, under Secure Boot) and installs ours */
    mark(in, "dkms");
    if (dkms(t, said, sizeof said, shown, sizeof shown, "add", in->name_version, NULL) != 0)
        return step_failed(in, err, shown, said);
    step(in->r, "%s", shown);
    if (dkms(t, said, sizeof said, shown, sizeof shown, "install", in->name_version, "-k",
             in->c->kernel, NULL) != 0)
        return step_failed(in, err, shown, said);
    step(in->r, "%s", shown);
    char ko[PATH_MAX + 32], srcversion[64];
    snprintf(ko, sizeof ko, "%s/source/kernel-open/nvidia.ko", out);
    module_srcversion(ko, srcversion, sizeof srcversion);
    json_object_set_new(in->state, "srcversion", json_string(srcversion));
    return 0;
}

/* modprobe must now find DKMS's module for the kernel, not the stock one. */
static int verify_modprobe(install *in, gdu_unlock_error *err)
{
    char said[4096], shown[1024];
    char *argv[12];
    int n = 0;
    argv[n++] = "modprobe";
    if (in->t->root[0]) {
        argv[n++] = "--dirname";
        argv[n++] = (char *)in->t->root;
    }
    argv[n++] = "--set-version";
    argv[n++] = (char *)in->c->kernel;
    argv[n++] = "--show-depends";
    argv[n++] = "nvidia";
    argv[n] = NULL;
    gdu_unlock_argv_text(argv, shown, sizeof shown);
    int rc = gdu_unlock_exec(argv, false, said, sizeof said);
    const char *line = strstr(said, "insmod ");
    const char *last = line;
    while (line != NULL && (line = strstr(line + 1, "insmod ")) != NULL)
        last = line; /* nvidia itself comes after what it depends on */
    if (rc != 0 || last == NULL)
        return step_failed(in, err, shown, said);
    /* "insmod PATH [OPTIONS]": PATH ends with the .ko (.ko.zst, .ko.xz) name. */
    char path[PATH_MAX];
    const char *start = last + 7, *ko = strstr(start, ".ko");
    size_t len = ko ? (size_t)(ko - start) + 3 + strcspn(ko + 3, " \n") : strcspn(start, " \n");
    snprintf(path, sizeof path, "%.*s", (int)(len < sizeof path ? len : sizeof path - 1), start);
    if (strstr(path, "/updates/") == NULL && strstr(path, "/extra/") == NULL) {
        char why[PATH_MAX + 128];
        gdu_unlock_format(
            why, sizeof why,
            "modprobe would load %s, not the module DKMS installed (check /etc/depmod.d "
            "for an override of nvidia)",
            path);
        return step_failed(in, err, shown, why);
    }
    step(in->r, "%s: nvidia loads from %s", shown, path);
    return 0;
}

static int write_options(install *in, gdu_unlock_error *err)
{
    char path[PATH_MAX], text[512];
    at(in->t, GDU_UNLOCK_MODPROBE_CONF, path, sizeof path);
    /* ReBAR: the driver resizes BAR1 to cover video memory where the
     * BIOS left room (nv-pci.c, nv_resize_pcie_bars). */
    snprintf(text, sizeof text,
             "# Written by gdunlock p2p unlock --install (plan: %s); --revert removes it.\n"
             "options nvidia NVreg_EnableResizableBar=1%s%s%s\n",
             gdu_unlock_plan_id(in->c->plan),
             in->c->registry_dwords[0] ? " NVreg_RegistryDwords=\"" : "", in->c->registry_dwords,
             in->c->registry_dwords[0] ? "\"" : "");
    mark(in, "options");
    int rc = gdu_unlock_write_file(path, text);
    if (rc != 0) {
        char why[256];
        gdu_unlock_format(why, sizeof why, "%s: %s", path, strerror(-rc));
        return step_failed(in, err, "writing the module options", why);
    }
    json_object_set_new(in->state, "options", json_string(strchr(text, '\n') + 1));
    step(in->r, "wrote %s: %.*s", path, (int)strcspn(strchr(text, '\n') + 1, "\n"),
         strchr(text, '\n') + 1);
    return 0;
}

static void next_steps(gdu_unlock_install_report *r, const gdu_unlock_check *c)
{
    snprintf(r->next, sizeof r->next,
             "load it: reboot (or stop the display manager, e.g. sudo systemctl isolate "
             "multi-user.target, then sudo modprobe -r nvidia_drm nvidia_modeset nvidia_uvm "
             "nvidia && sudo modprobe nvidia); if the initramfs holds nvidia (lsinitramfs "
             "/boot/initrd.img-%s | grep nvidia), run sudo update-initramfs -u first; then "
             "'gdunlock p2p unlock --status' says which module runs and 'gdunlock p2p' whether "
             "the pairs have P2P",
             c->kernel[0] ? c->kernel : "$(uname -r)");
}

int gdu_unlock_install(const gdu_unlock_target *t, const gdu_unlock_check *c, const char *out,
                       gdu_unlock_install_report *r, gdu_unlock_error *err)
{
    memset(r, 0, sizeof *r);
    r->plan = c->plan;
    snprintf(r->kernel, sizeof r->kernel, "%s", c->kernel);
    if (refuse(t, c, out, err) != 0)
        return -1;
    json_t *previous = read_state(t);
    if (previous != NULL) {
        bool interrupted = strcmp(json_str(previous, "status"), "installed") != 0;
        json_decref(previous);
        return gdu_unlock_fail(
            err, GDU_EXIT_FAILED, interrupted ? "interrupted_install" : "already_installed",
            "run gdunlock p2p unlock --revert, then --install again",
            interrupted ? "an earlier --install was interrupted (" GDU_UNLOCK_STATE_FILE " says so)"
                        : "gdunlock's unlock is installed already");
    }
    install in = {.t = t, .c = c, .r = r};
    json_t *modules = NULL;
    snprintf(in.version, sizeof in.version, "%s", c->version);
    if (c->plan == GDU_UNLOCK_PATCHED &&
        (accept_build(&in, out, &modules, err) != 0 || check_signing(&in, err) != 0)) {
        json_decref(modules);
        return -1;
    }
    snprintf(r->version, sizeof r->version, "%s", in.version);
    snprintf(in.name_version, sizeof in.name_version, GDU_UNLOCK_DKMS_NAME "/%s", in.version);
    gdu_unlock_format(in.src_dir, sizeof in.src_dir, "%s/usr/src/" GDU_UNLOCK_DKMS_NAME "-%s",
                      t->root, in.version);
    if (c->plan == GDU_UNLOCK_PATCHED && exists(in.src_dir)) {
        json_decref(modules);
        return gdu_unlock_fail(err, GDU_EXIT_FAILED, "already_installed",
                               "run gdunlock p2p unlock --revert first",
                               "%s exists: gdunlock's module is installed already", in.src_dir);
    }
    in.state = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[]}", "status", "installing", "plan",
                         gdu_unlock_plan_id(c->plan), "version", in.version, "kernel", c->kernel,
                         "dkms", c->plan == GDU_UNLOCK_PATCHED ? in.name_version : "", "steps");
    int rc = -1;
    if (in.state == NULL || write_state(t, in.state) != 0) {
        char path[PATH_MAX];
        at(t, GDU_UNLOCK_STATE_FILE, path, sizeof path);
        gdu_unlock_fail(err, 74, "cannot_write", "check the disk (df) and the folder's permissions",
                        "cannot write %s", path);
    } else if ((c->plan != GDU_UNLOCK_PATCHED || install_module(&in, out, modules, err) == 0) &&
               write_options(&in, err) == 0 &&
               (c->plan != GDU_UNLOCK_PATCHED || verify_modprobe(&in, err) == 0)) {
        json_object_set_new(in.state, "status", json_string("installed"));
        rc = write_state(t, in.state) == 0 ? 0 : -1;
        if (rc != 0)
            step_failed(&in, err, "recording the install", "cannot write the state file");
    }
    if (rc == 0)
        next_steps(r, c);
    json_decref(modules);
    json_decref(in.state);
    return rc;
}

/* ---- --revert ---- */

/* gdunlock's DKMS module, every version DKMS holds. Returns 0, or -1 with
 * err when a removal failed (the others still run). */
static int remove_dkms_modules(const gdu_unlock_target *t, gdu_unlock_install_report *r,
                               gdu_unlock_error *err)
{
    int failed = 0;
    char said[4096], shown[1024];
    char tree[PATH_MAX];
    at(t, "/var/lib/dkms/" GDU_UNLOCK_DKMS_NAME, tree, sizeof tree);
    DIR *d = opendir(tree);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "source") == 0)
            continue;
        char nv[320];
        snprintf(nv, sizeof nv, GDU_UNLOCK_DKMS_NAME "/%s", e->d_name);
        if (dkms(t, said, sizeof said, shown, sizeof shown, "remove", nv, "--all", NULL) == 0)
            step(r, "%s", shown);
        else
            failed = gdu_unlock_fail(err, GDU_EXIT_FAILED, "revert_failed",
                                     "run it by hand, then --revert again", "%s failed: %.300s",
                                     shown, said);
    }
    if (d != NULL)
        closedir(d);
    return failed;
}

/* The source trees of gdunlock's module under /usr/src. Returns 0, or -1
 * with err when one could not be removed (the others still are). */
static int remove_sources(const gdu_unlock_target *t, gdu_unlock_install_report *r,
                          gdu_unlock_error *err)
{
    int failed = 0;
    DIR *d;
    char src[PATH_MAX];
    at(t, "/usr/src", src, sizeof src);
    d = opendir(src);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, GDU_UNLOCK_DKMS_NAME "-", sizeof GDU_UNLOCK_DKMS_NAME) != 0)
            continue;
        char dir[PATH_MAX + 256];
        snprintf(dir, sizeof dir, "%s/%s", src, e->d_name);
        if (gdu_unlock_remove_tree(dir) == 0)
            step(r, "removed %s", dir);
        else
            failed = gdu_unlock_fail(err, GDU_EXIT_FAILED, "revert_failed", NULL,
                                     "cannot remove %s", dir);
    }
    if (d != NULL)
        closedir(d);
    return failed;
}

/* Undoes what the state file marks (and what lies on disk), newest first. */
static int revert_steps(const gdu_unlock_target *t, const json_t *state,
                        gdu_unlock_install_report *r, gdu_unlock_error *err)
{
    int failed = 0;
    char path[PATH_MAX], said[4096], shown[1024];
    at(t, GDU_UNLOCK_MODPROBE_CONF, path, sizeof path);
    if (exists(path)) {
        if (unlink(path) == 0)
            step(r, "removed %s", path);
        else
            failed = gdu_unlock_fail(err, GDU_EXIT_FAILED, "revert_failed", NULL,
                                     "cannot remove %s: %s", path, strerror(errno));
    }
    if (remove_dkms_modules(t, r, err) != 0)
        failed = -1;
    if (remove_sources(t, r, err) != 0)
        failed = -1;
    /* the stock DKMS module, where the install took it out */
    const char *stock = json_str(state, "stock_dkms");
    char stock_tree[PATH_MAX + 64];
    snprintf(stock_tree, sizeof stock_tree, "%s/var/lib/dkms/%s", t->root, stock);
    if (stock[0] && !exists(stock_tree)) {
        const char *kernel = json_str(state, "kernel");
        if (dkms(t, said, sizeof said, shown, sizeof shown, "add", stock, NULL) == 0 &&
            dkms(t, said, sizeof said, shown, sizeof shown, "install", stock, "-k", kernel, NULL) ==
                0)
            step(r, "%s: the stock module is back", shown);
        else
            failed =
                gdu_unlock_fail(err, GDU_EXIT_FAILED, "revert_failed",
                                "rebuild the stock module: sudo dkms install (its name/version) -k "
                                "$(uname -r), or reinstall the driver package",
                                "%s failed: %.300s", shown, said);
    }
    return failed;
}

static void undo(install *in, gdu_unlock_install_report *undone)
{
    gdu_unlock_error ignored;
    revert_steps(in->t, in->state, undone, &ignored);
    char path[PATH_MAX];
    at(in->t, GDU_UNLOCK_STATE_FILE, path, sizeof path);
    unlink(path);
}

int gdu_unlock_revert(const gdu_unlock_target *t, gdu_unlock_install_report *r,
                      gdu_unlock_error *err)
{
    memset(r, 0, sizeof *r);
    if (!t->privileged)
        return gdu_unlock_fail(err, GDU_EXIT_NOPERM, "not_root",
                               "run it as root: sudo gdunlock p2p unlock --revert",
                               "--revert changes /etc/modprobe.d and DKMS's tree: it needs root");
    json_t *state = read_state(t);
    json_t *empty = state ? NULL : json_object();
    int failed = revert_steps(t, state ? state : empty, r, err);
    char path[PATH_MAX];
    at(t, GDU_UNLOCK_STATE_FILE, path, sizeof path);
    if (failed == 0 && exists(path)) {
        if (unlink(path) == 0)
            step(r, "removed %s", path);
        else
            failed = gdu_unlock_fail(err, GDU_EXIT_FAILED, "revert_failed", NULL,
                                     "cannot remove %s: %s", path, strerror(errno));
    }
    if (state)
        snprintf(r->version, sizeof r->version, "%s", json_str(state, "version"));
    json_decref(state);
    json_decref(empty);
    snprintf(
        r->next, sizeof r->next, "%s",
        r->n_steps == 0
            ? "nothing of gdunlock's unlock was installed: the stock module and options are in "
              "place"
            : "reboot (or reload the nvidia modules) to run the stock module with its own options");
    return failed;
}
