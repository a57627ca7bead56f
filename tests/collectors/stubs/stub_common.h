/*
 * What the stub libraries share: a "key value" text config named by $STUB_CONFIG_ENV,
 * re-read whenever the file changes, and a per-function call log for tests.
 * Include once, from one stub .c file, after defining STUB_CONFIG_ENV.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- config ------------------------------------------------------------------------- */
#define MAX_ENTRIES 8192
#define MAX_DEVICES 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *keys[MAX_ENTRIES], *vals[MAX_ENTRIES];
static int n_entries;
static char loaded_path[4096];
static struct stat loaded_st;

static void clear_config(void) {
    for (int i = 0; i < n_entries; i++) {
        free(keys[i]);
        free(vals[i]);
    }
    n_entries = 0;
}

static void reload(void) {
    const char *path = getenv(STUB_CONFIG_ENV);
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        if (loaded_path[0]) clear_config();
        loaded_path[0] = 0;
        return;
    }
    if (strcmp(path, loaded_path) == 0 && st.st_ino == loaded_st.st_ino && st.st_size == loaded_st.st_size &&
        st.st_mtim.tv_sec == loaded_st.st_mtim.tv_sec && st.st_mtim.tv_nsec == loaded_st.st_mtim.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    clear_config();
    char line[4096];
    while (n_entries < MAX_ENTRIES && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *sp = strchr(line, ' ');
        if (!sp || line[0] == '#') continue;
        *sp = 0;
        keys[n_entries] = strdup(line);
        vals[n_entries] = strdup(sp + 1);
        n_entries++;
    }
    fclose(f);
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    loaded_st = st;
}

static const char *get(const char *key) {
    for (int i = 0; i < n_entries; i++)
        if (strcmp(keys[i], key) == 0) return vals[i];
    return NULL;
}

static const char *dget(int dev, const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%d.%s", dev, suffix);
    return get(key);
}

static int dget_u64(int dev, const char *suffix, unsigned long long *out) {
    const char *v = dget(dev, suffix);
    if (!v) return 0;
    *out = strtoull(v, NULL, 0);
    return 1;
}

static unsigned int device_count(void) {
    const char *v = get("count");
    unsigned long n = v ? strtoul(v, NULL, 0) : 0;
    return n > MAX_DEVICES ? MAX_DEVICES : (unsigned int)n;
}

/* ---- call log, for tests ------------------------------------------------------------ */
#define MAX_FNS 64
static char fn_names[MAX_FNS][64];
static long fn_calls[MAX_FNS], fn_tid[MAX_FNS];
static int n_fns;

static void record(const char *fn) {
    int i = 0;
    while (i < n_fns && strcmp(fn_names[i], fn) != 0) i++;
    if (i == n_fns) {
        if (n_fns == MAX_FNS) return;
        snprintf(fn_names[n_fns++], 64, "%s", fn);
    }
    fn_calls[i]++;
    fn_tid[i] = (long)syscall(SYS_gettid);
}

long kvops_stub_calls(const char *fn) {
    long n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_fns; i++)
        if (strcmp(fn_names[i], fn) == 0) n = fn_calls[i];
    pthread_mutex_unlock(&mu);
    return n;
}

long kvops_stub_last_tid(const char *fn) {
    long t = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_fns; i++)
        if (strcmp(fn_names[i], fn) == 0) t = fn_tid[i];
    pthread_mutex_unlock(&mu);
    return t;
}

