/*
 * A stand-in for libnvidia-ml.so.1 for tests on machines without a GPU.
 *
 * It exports the NVML entry points kvops's NVIDIA collector reaches through the real
 * `pynvml` module (nvidia-ml-py), with the signatures and struct layouts of nvml.h,
 * and answers from a text config named by $KVOPS_NVML_STUB_CONFIG. The file is re-read
 * whenever it changes (inode, size or mtime), so a test or a running exporter sees a
 * GPU get lost or a counter wrap mid-run. One "key value" per line:
 *
 *   count 2                      devices nvmlDeviceGetCount_v2 reports
 *   init.ret 9                   nvmlInit's return code (9 = DRIVER_NOT_LOADED)
 *   0.name NVIDIA H100 80GB HBM3 / 0.uuid GPU-... / 0.busid 00000000:18:00.0
 *   0.lost 1                     every call on device 0 returns GPU_IS_LOST (15)
 *   0.ret.<nvmlFunction> 3       that function returns 3 (NOT_SUPPORTED) for device 0
 *   0.mem.total|free|used|reserved <bytes>
 *   0.field.<id>[.<scope>] <value>   a field value; absent -> entry nvmlReturn NOT_SUPPORTED
 *   0.field.<id>[.<scope>].ret|.type|.ts   its own nvmlReturn, valueType, timestamp (us)
 *   0.pcie.tx_kbps|rx_kbps <KB/s>    nvmlDeviceGetPcieThroughput (sleeps 20 ms, as NVML does)
 *   0.link.gen|width|gen_max|width_max <n>
 *   0.replay <n> / 0.util.gpu|memory <percent> / 0.procs <pid>:<bytes|na> ...
 *
 * A value the config does not give is NOT_SUPPORTED, as on a driver that lacks it.
 * kvops_stub_calls() / kvops_stub_last_tid() let tests see which thread called what.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};

/* nvml.h structs (NVML_API_VERSION 13) */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 (unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24U))
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    signed int siVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define STUB_CONFIG_ENV "KVOPS_NVML_STUB_CONFIG"
#include "stub_common.h"

static int initialized;
static char handles[MAX_DEVICES];

/* Lock, reload, log the call, resolve the device and its scripted failure. On a nonzero
 * return the caller unlocks and returns it. */
static nvmlReturn_t enter_device(const char *fn, nvmlDevice_t device, int *dev) {
    pthread_mutex_lock(&mu);
    reload();
    record(fn);
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    long idx = (char *)device - handles;
    if (!device || idx < 0 || idx >= (long)device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (int)idx;
    const char *lost = dget(*dev, "lost");
    if (lost && atoi(lost)) return NVML_ERROR_GPU_IS_LOST;
    char key[128];
    snprintf(key, sizeof key, "ret.%s", fn);
    const char *ret = dget(*dev, key);
    if (ret && atoi(ret)) return atoi(ret);
    return NVML_SUCCESS;
}

#define DEVICE_CALL(fn, device)                     \
    int dev = 0;                                    \
    nvmlReturn_t rc = enter_device(fn, device, &dev); \
    if (rc != NVML_SUCCESS) {                       \
        pthread_mutex_unlock(&mu);                  \
        return rc;                                  \
    }
#define RETURN(rc)                 \
    do {                           \
        pthread_mutex_unlock(&mu); \
        return (rc);               \
    } while (0)

/* ---- library ------------------------------------------------------------------------ */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&mu);
    reload();
    record("nvmlInitWithFlags");
    /* No config: behave as if there were no library, so a stub left loaded in a test
     * process looks like a host without NVIDIA to every later test. */
    if (!loaded_path[0]) RETURN(12); /* NVML_ERROR_LIBRARY_NOT_FOUND */
    const char *r = get("init.ret");
    if (r && atoi(r)) RETURN(atoi(r));
    initialized = 1;
    RETURN(NVML_SUCCESS);
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&mu);
    record("nvmlShutdown");
    if (!initialized) RETURN(NVML_ERROR_UNINITIALIZED);
    initialized = 0;
    RETURN(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    pthread_mutex_lock(&mu);
    reload();
    record("nvmlSystemGetDriverVersion");
    if (!initialized) RETURN(NVML_ERROR_UNINITIALIZED);
    const char *v = get("driver");
    if (!v) v = "555.42.06";
    if (strlen(v) + 1 > length) RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    strcpy(version, v);
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    pthread_mutex_lock(&mu);
    reload();
    record("nvmlDeviceGetCount_v2");
    if (!initialized) RETURN(NVML_ERROR_UNINITIALIZED);
    *count = device_count();
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    pthread_mutex_lock(&mu);
    reload();
    record("nvmlDeviceGetHandleByIndex_v2");
    if (!initialized) RETURN(NVML_ERROR_UNINITIALIZED);
    if (index >= device_count() || !device) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const char *lost = dget((int)index, "lost");
    if (lost && atoi(lost)) RETURN(NVML_ERROR_GPU_IS_LOST);
    *device = (nvmlDevice_t)&handles[index];
    RETURN(NVML_SUCCESS);
}

static nvmlReturn_t copy_str(int dev, const char *key, char *out, unsigned int length) {
    const char *v = dget(dev, key);
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(v) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, v);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetName", device);
    RETURN(copy_str(dev, "name", name, length));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetUUID", device);
    RETURN(copy_str(dev, "uuid", uuid, length));
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEVICE_CALL("nvmlDeviceGetPciInfo_v3", device);
    const char *v = dget(dev, "busid");
    if (!v) RETURN(NVML_ERROR_NOT_SUPPORTED);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", v);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", v + (strlen(v) > 12 ? 4 : 0));
    unsigned int fn = 0;
    sscanf(v, "%x:%x:%x.%x", &pci->domain, &pci->bus, &pci->device, &fn);
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo", device);
    unsigned long long total, used, free_ = 0, reserved = 0;
    if (!dget_u64(dev, "mem.total", &total) || !dget_u64(dev, "mem.used", &used)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    dget_u64(dev, "mem.reserved", &reserved);
    if (!dget_u64(dev, "mem.free", &free_)) free_ = total - used - reserved;
    mem->total = total;
    mem->used = used + reserved; /* v1 used = reserved + allocated (nvml.h) */
    mem->free = free_;
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo_v2", device);
    if (mem->version != nvmlMemory_v2) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long total, used, free_ = 0, reserved = 0;
    if (!dget_u64(dev, "mem.total", &total) || !dget_u64(dev, "mem.used", &used)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    dget_u64(dev, "mem.reserved", &reserved);
    if (!dget_u64(dev, "mem.free", &free_)) free_ = total - used - reserved;
    mem->total = total;
    mem->reserved = reserved;
    mem->used = used;
    mem->free = free_;
    RETURN(NVML_SUCCESS);
}

static long long now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values) {
    DEVICE_CALL("nvmlDeviceGetFieldValues", device);
    if (!values || valuesCount < 0) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (int j = 0; j < valuesCount; j++) {
        nvmlFieldValue_t *fv = &values[j];
        char base[96], key[128];
        snprintf(base, sizeof base, "field.%u.%u", fv->fieldId, fv->scopeId);
        const char *v = dget(dev, base);
        if (!v) {
            snprintf(base, sizeof base, "field.%u", fv->fieldId);
            v = dget(dev, base);
        }
        snprintf(key, sizeof key, "%s.ret", base);
        const char *ret = dget(dev, key);
        snprintf(key, sizeof key, "%s.type", base);
        const char *type = dget(dev, key);
        snprintf(key, sizeof key, "%s.ts", base);
        const char *ts = dget(dev, key);
        fv->timestamp = ts ? strtoll(ts, NULL, 0) : now_us();
        fv->latencyUsec = 0;
        fv->valueType = type ? atoi(type) : 3;
        fv->value.ullVal = 0;
        if (ret && atoi(ret)) {
            fv->nvmlReturn = atoi(ret);
            continue;
        }
        if (!v) {
            fv->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        fv->nvmlReturn = NVML_SUCCESS;
        switch (fv->valueType) {
        case 0: fv->value.dVal = strtod(v, NULL); break;
        case 1: fv->value.uiVal = (unsigned int)strtoull(v, NULL, 0); break;
        case 2: fv->value.ulVal = strtoul(v, NULL, 0); break;
        case 4: fv->value.sllVal = strtoll(v, NULL, 0); break;
        case 5: fv->value.siVal = (int)strtol(v, NULL, 0); break;
        case 6: fv->value.usVal = (unsigned short)strtoul(v, NULL, 0); break;
        default: fv->value.ullVal = strtoull(v, NULL, 0); break;
        }
    }
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value) {
    unsigned long long v = 0;
    int have;
    {
        DEVICE_CALL("nvmlDeviceGetPcieThroughput", device);
        have = dget_u64(dev, counter == 0 ? "pcie.tx_kbps" : "pcie.rx_kbps", &v);
        pthread_mutex_unlock(&mu);
    }
    if (!have) return NVML_ERROR_NOT_SUPPORTED;
    usleep(20000); /* NVML reads a byte counter over a 20 ms window (nvml.h) */
    *value = (unsigned int)v;
    return NVML_SUCCESS;
}

static nvmlReturn_t get_uint(const char *fn, nvmlDevice_t device, const char *key, unsigned int *out) {
    DEVICE_CALL(fn, device);
    unsigned long long v;
    if (!dget_u64(dev, key, &v)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    *out = (unsigned int)v;
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) {
    return get_uint("nvmlDeviceGetCurrPcieLinkGeneration", d, "link.gen", v);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) {
    return get_uint("nvmlDeviceGetCurrPcieLinkWidth", d, "link.width", v);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) {
    return get_uint("nvmlDeviceGetMaxPcieLinkGeneration", d, "link.gen_max", v);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) {
    return get_uint("nvmlDeviceGetMaxPcieLinkWidth", d, "link.width_max", v);
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int *v) {
    return get_uint("nvmlDeviceGetPcieReplayCounter", d, "replay", v);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    DEVICE_CALL("nvmlDeviceGetUtilizationRates", device);
    unsigned long long g, m = 0;
    if (!dget_u64(dev, "util.gpu", &g)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    dget_u64(dev, "util.memory", &m);
    util->gpu = (unsigned int)g;
    util->memory = (unsigned int)m;
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    DEVICE_CALL("nvmlDeviceGetComputeRunningProcesses_v3", device);
    nvmlProcessInfo_t found[256];
    unsigned int n = 0;
    const char *v = dget(dev, "procs");
    while (v && *v && n < 256) {
        while (*v == ' ') v++;
        if (!*v) break;
        char *end;
        unsigned long pid = strtoul(v, &end, 10);
        if (end == v || *end != ':') break;
        v = end + 1;
        unsigned long long mem;
        if (strncmp(v, "na", 2) == 0) {
            mem = ~0ULL; /* NVML_VALUE_NOT_AVAILABLE */
            v += 2;
        } else {
            mem = strtoull(v, &end, 10);
            v = end;
        }
        found[n].pid = (unsigned int)pid;
        found[n].usedGpuMemory = mem;
        found[n].gpuInstanceId = found[n].computeInstanceId = 0xFFFFFFFF;
        n++;
    }
    if (n == 0) {
        *count = 0;
        RETURN(NVML_SUCCESS);
    }
    if (!infos || *count < n) {
        *count = n;
        RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    memcpy(infos, found, n * sizeof *infos);
    *count = n;
    RETURN(NVML_SUCCESS);
}

/* ---- host link (issue 45): GPM, NUMA ----------------------------------------------------
 *   0.gpm.supported 1            nvmlGpmQueryDeviceSupport's isSupportedDevice (absent: 0)
 *   0.gpm.<metricId> <MiB/s>     what nvmlGpmMetricsGet answers for that metric between two
 *                                samples of device 0 (absent: the entry's NOT_SUPPORTED)
 *   0.numa <node>                nvmlDeviceGetNumaNodeId (absent: NOT_SUPPORTED, as on PCIe hosts)
 * C2C and PCIe-health field values are plain `0.field.<id>` lines. */
typedef struct {
    int dev;
    int taken;
    long long t_us;
} stub_gpm_sample;
typedef stub_gpm_sample *nvmlGpmSample_t;
typedef struct {
    char *shortName, *longName, *unit;
} nvmlGpmMetricInfo_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    nvmlGpmMetricInfo_t metricInfo;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[1]; /* NVML_GPM_METRIC_MAX entries in nvml.h; numMetrics are read */
} nvmlGpmMetricsGet_t;
typedef struct {
    unsigned int version, isSupportedDevice;
} nvmlGpmSupport_t;

static int gpm_supported(int dev) {
    const char *v = dget(dev, "gpm.supported");
    return v && atoi(v);
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    DEVICE_CALL("nvmlGpmQueryDeviceSupport", device);
    if (!support) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (support->version != 1) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    support->isSupportedDevice = (unsigned int)gpm_supported(dev);
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    pthread_mutex_lock(&mu);
    record("nvmlGpmSampleAlloc");
    if (!sample) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *sample = calloc(1, sizeof **sample);
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    pthread_mutex_lock(&mu);
    record("nvmlGpmSampleFree");
    free(sample);
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
    DEVICE_CALL("nvmlGpmSampleGet", device);
    if (!sample) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!gpm_supported(dev)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    sample->dev = dev;
    sample->taken = 1;
    sample->t_us = now_us();
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *get) {
    pthread_mutex_lock(&mu);
    reload();
    record("nvmlGpmMetricsGet");
    if (!initialized) RETURN(NVML_ERROR_UNINITIALIZED);
    if (!get) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (get->version != 1) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlGpmSample_t a = get->sample1, b = get->sample2;
    /* nvml.h: two samples of one device, the second taken after the first */
    if (!a || !b || !a->taken || !b->taken || a->dev != b->dev || b->t_us <= a->t_us)
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < get->numMetrics; i++) {
        nvmlGpmMetric_t *m = &get->metrics[i];
        char key[64];
        snprintf(key, sizeof key, "gpm.%u", m->metricId);
        const char *v = dget(a->dev, key);
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        m->nvmlReturn = v ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
        m->value = v ? strtod(v, NULL) : 0.0;
    }
    RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node) {
    return get_uint("nvmlDeviceGetNumaNodeId", device, "numa", node);
}
