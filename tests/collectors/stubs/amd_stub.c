/*
 * A stand-in for ROCm's libamd_smi.so for tests on machines without an AMD GPU.
 *
 * The `amdsmi` Python package binds every symbol of the library when it is imported, so
 * amd_stub.py compiles this file together with a generated one that defines each other
 * symbol amdsmi_wrapper.py names as "return AMDSMI_STATUS_NOT_SUPPORTED". The functions
 * here answer from the text config named by $KVOPS_AMDSMI_STUB_CONFIG (format and reload
 * as in stub_common.h):
 *
 *   count 2 / init.ret 34
 *   0.bdf 0000:c1:00.0 / 0.uuid <str>
 *   0.mem.<amdsmi_memory_type_t>.total|used <bytes>      (0 VRAM, 1 VIS_VRAM, 2 GTT)
 *   0.blob.<function> <hex>    the struct the function writes, byte for byte
 *   0.procs.count <n>          entries in 0.blob.amdsmi_get_gpu_process_list
 *   0.pci.sent|received|max_pkt_sz <n>, pci.sleep_ms <ms> (amdgpu's pcie_bw sleeps 1 s)
 *   0.ret.<function> <status>
 *
 * The blobs are built by the test from amdsmi_wrapper's own ctypes structures: this stub
 * checks how kvops reads what the binding returns, not the binding's struct layouts.
 */
#define _GNU_SOURCE
#include <stdint.h>
#define STUB_CONFIG_ENV "KVOPS_AMDSMI_STUB_CONFIG"
#include "stub_common.h"

enum {
    AMDSMI_STATUS_SUCCESS = 0,
    AMDSMI_STATUS_INVAL = 1,
    AMDSMI_STATUS_NOT_SUPPORTED = 2,
    AMDSMI_STATUS_OUT_OF_RESOURCES = 15,
    AMDSMI_STATUS_NOT_INIT = 32,
    AMDSMI_STATUS_DRIVER_NOT_LOADED = 34,
};

static int initialized;
static char handles[MAX_DEVICES];
static char socket_handle;

#define RETURN(rc)                 \
    do {                           \
        pthread_mutex_unlock(&mu); \
        return (rc);               \
    } while (0)

static int enter_device(const char *fn, void *h, int *dev) {
    pthread_mutex_lock(&mu);
    reload();
    record(fn);
    if (!initialized) return AMDSMI_STATUS_NOT_INIT;
    long idx = (char *)h - handles;
    if (!h || idx < 0 || idx >= (long)device_count()) return AMDSMI_STATUS_INVAL;
    *dev = (int)idx;
    char key[128];
    snprintf(key, sizeof key, "ret.%s", fn);
    const char *ret = dget(*dev, key);
    if (ret && atoi(ret)) return atoi(ret);
    return AMDSMI_STATUS_SUCCESS;
}

#define DEVICE_CALL(fn, h)                   \
    int dev = 0;                             \
    int rc = enter_device(fn, h, &dev);      \
    if (rc != AMDSMI_STATUS_SUCCESS) RETURN(rc);

int amdsmi_init(uint64_t flags) {
    (void)flags;
    pthread_mutex_lock(&mu);
    reload();
    record("amdsmi_init");
    /* No config: as on a host whose amdgpu driver is not loaded. */
    if (!loaded_path[0]) RETURN(AMDSMI_STATUS_DRIVER_NOT_LOADED);
    const char *r = get("init.ret");
    if (r && atoi(r)) RETURN(atoi(r));
    initialized = 1;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_shut_down(void) {
    pthread_mutex_lock(&mu);
    record("amdsmi_shut_down");
    initialized = 0;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_get_socket_handles(uint32_t *count, void **sockets) {
    pthread_mutex_lock(&mu);
    reload();
    record("amdsmi_get_socket_handles");
    if (!initialized) RETURN(AMDSMI_STATUS_NOT_INIT);
    uint32_t n = device_count() ? 1 : 0;
    if (sockets && *count >= n && n) sockets[0] = &socket_handle;
    *count = n;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_get_processor_handles(void *socket, uint32_t *count, void **out) {
    pthread_mutex_lock(&mu);
    reload();
    record("amdsmi_get_processor_handles");
    if (!initialized) RETURN(AMDSMI_STATUS_NOT_INIT);
    if (socket != &socket_handle) RETURN(AMDSMI_STATUS_INVAL);
    uint32_t n = device_count();
    if (out) {
        if (*count < n) n = *count;
        for (uint32_t i = 0; i < n; i++) out[i] = &handles[i];
    }
    *count = n;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_get_gpu_device_bdf(void *h, uint64_t *bdf) {
    DEVICE_CALL("amdsmi_get_gpu_device_bdf", h);
    const char *v = dget(dev, "bdf");
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    if (!v || sscanf(v, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) RETURN(AMDSMI_STATUS_NOT_SUPPORTED);
    /* amdsmi_bdf_t bit fields: function 3, device 5, bus 8, domain 48 */
    *bdf = (uint64_t)function | (uint64_t)device << 3 | (uint64_t)bus << 8 | (uint64_t)domain << 16;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_get_gpu_device_uuid(void *h, uint32_t *len, char *uuid) {
    DEVICE_CALL("amdsmi_get_gpu_device_uuid", h);
    const char *v = dget(dev, "uuid");
    if (!v) RETURN(AMDSMI_STATUS_NOT_SUPPORTED);
    if (strlen(v) + 1 > *len) RETURN(AMDSMI_STATUS_INVAL);
    strcpy(uuid, v);
    *len = (uint32_t)strlen(v) + 1;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

static int memory(const char *fn, void *h, uint32_t type, const char *what, uint64_t *out) {
    DEVICE_CALL(fn, h);
    char key[64];
    snprintf(key, sizeof key, "mem.%u.%s", type, what);
    unsigned long long v;
    if (!dget_u64(dev, key, &v)) RETURN(AMDSMI_STATUS_NOT_SUPPORTED);
    *out = v;
    RETURN(AMDSMI_STATUS_SUCCESS);
}
int amdsmi_get_gpu_memory_total(void *h, uint32_t type, uint64_t *out) {
    return memory("amdsmi_get_gpu_memory_total", h, type, "total", out);
}
int amdsmi_get_gpu_memory_usage(void *h, uint32_t type, uint64_t *out) {
    return memory("amdsmi_get_gpu_memory_usage", h, type, "used", out);
}

/* Copy the hex blob configured for `fn` into out; returns its size or -1. */
static long copy_blob(int dev, const char *fn, void *out, size_t max) {
    char key[128];
    snprintf(key, sizeof key, "blob.%s", fn);
    const char *hex = dget(dev, key);
    if (!hex) return -1;
    size_t n = strlen(hex) / 2;
    if (n > max) n = max;
    for (size_t i = 0; i < n; i++) {
        unsigned int byte;
        sscanf(hex + 2 * i, "%2x", &byte);
        ((unsigned char *)out)[i] = (unsigned char)byte;
    }
    return (long)n;
}

#define BLOB_FN(name)                                                              \
    int name(void *h, void *out) {                                                 \
        DEVICE_CALL(#name, h);                                                     \
        if (copy_blob(dev, #name, out, 1 << 20) < 0) RETURN(AMDSMI_STATUS_NOT_SUPPORTED); \
        RETURN(AMDSMI_STATUS_SUCCESS);                                             \
    }
BLOB_FN(amdsmi_get_gpu_asic_info)
BLOB_FN(amdsmi_get_gpu_metrics_info)
BLOB_FN(amdsmi_get_pcie_info)
BLOB_FN(amdsmi_get_link_metrics)
BLOB_FN(amdsmi_get_gpu_activity)

int amdsmi_get_gpu_process_list(void *h, uint32_t *max_processes, void *list) {
    DEVICE_CALL("amdsmi_get_gpu_process_list", h);
    unsigned long long n = 0;
    dget_u64(dev, "procs.count", &n);
    if (n == 0) {
        *max_processes = 0;
        RETURN(AMDSMI_STATUS_SUCCESS);
    }
    if (!list || *max_processes < n) {
        *max_processes = (uint32_t)n;
        RETURN(AMDSMI_STATUS_OUT_OF_RESOURCES);
    }
    if (copy_blob(dev, "amdsmi_get_gpu_process_list", list, 1 << 24) < 0) RETURN(AMDSMI_STATUS_NOT_SUPPORTED);
    *max_processes = (uint32_t)n;
    RETURN(AMDSMI_STATUS_SUCCESS);
}

int amdsmi_get_gpu_pci_throughput(void *h, uint64_t *sent, uint64_t *received, uint64_t *max_pkt_sz) {
    unsigned long long s, r, m, sleep_ms = 1000;
    {
        DEVICE_CALL("amdsmi_get_gpu_pci_throughput", h);
        int ok = dget_u64(dev, "pci.sent", &s) && dget_u64(dev, "pci.received", &r) &&
                 dget_u64(dev, "pci.max_pkt_sz", &m);
        const char *sl = get("pci.sleep_ms");
        if (sl) sleep_ms = strtoull(sl, NULL, 0);
        pthread_mutex_unlock(&mu);
        if (!ok) return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    usleep((useconds_t)(sleep_ms * 1000)); /* amdgpu's pcie_bw read sleeps 1 s in the kernel */
    *sent = s;
    *received = r;
    *max_pkt_sz = m;
    return AMDSMI_STATUS_SUCCESS;
}

/* issue 45: 0.numa <node> answers amdsmi_get_gpu_topo_numa_affinity (absent: NOT_SUPPORTED) */
int amdsmi_get_gpu_topo_numa_affinity(void *h, int32_t *node) {
    DEVICE_CALL("amdsmi_get_gpu_topo_numa_affinity", h);
    unsigned long long v;
    if (!dget_u64(dev, "numa", &v)) RETURN(AMDSMI_STATUS_NOT_SUPPORTED);
    *node = (int32_t)v;
    RETURN(AMDSMI_STATUS_SUCCESS);
}
