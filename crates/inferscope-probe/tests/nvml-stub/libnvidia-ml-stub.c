/*
 * A stand-in for libnvidia-ml.so.1 with two H100-like GPUs joined by two NVLinks, for testing
 * inferscope's NVML source on machines without a driver. It exports only some symbols on
 * purpose: every call the stub lacks must come back as one unknown field, never a crash.
 * Layouts follow nvml.h (nvmlPciInfo_t v3, nvmlMemory_v2_t); return codes: 0 success,
 * 2 invalid argument, 3 not supported.
 */
#include <stdint.h>
#include <string.h>

typedef void *nvmlDevice_t;
typedef struct { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; } nvmlPciInfo_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

static const char *bus_ids[2] = {"00000000:18:00.0", "00000000:3A:00.0"};
static int idx(nvmlDevice_t d) { return (int)(intptr_t)d - 1; }

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) { if (i > 1) return 2; *d = (nvmlDevice_t)(intptr_t)(i + 1); return 0; }
int nvmlSystemGetDriverVersion(char *s, unsigned len) { strncpy(s, "550.90.07", len); return 0; }
int nvmlSystemGetNVMLVersion(char *s, unsigned len) { strncpy(s, "12.550.90.07", len); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12040; return 0; }
int nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *i) { *i = (unsigned)idx(d); return 0; }
int nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned len) { (void)d; strncpy(s, "NVIDIA H100 80GB HBM3", len); return 0; }
int nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned len) { strncpy(s, idx(d) ? "GPU-22222222-2222-2222-2222-222222222222" : "GPU-11111111-1111-1111-1111-111111111111", len); return 0; }
int nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    strncpy(p->busId, bus_ids[idx(d)], sizeof p->busId - 1);
    p->bus = idx(d) ? 0x3a : 0x18; p->pciDeviceId = 0x233010de;
    return 0;
}
int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    (void)d; m->total = 85520809984ULL; m->reserved = 559218688ULL; m->used = 1048576ULL * 4; m->free = m->total - m->reserved - m->used; return 0;
}
int nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pend) { (void)d; (void)cur; (void)pend; return 3; }
int nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned *n) { (void)d; (void)n; return 3; }
int nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned *g) { (void)d; *g = 5; return 0; }
int nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int *active) { (void)d; if (link > 1) return 2; *active = 1; return 0; }
int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t *p) {
    (void)link; memset(p, 0, sizeof *p); strncpy(p->busId, bus_ids[1 - idx(d)], sizeof p->busId - 1); return 0;
}
int nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) { (void)a; (void)b; *level = 40; return 0; }
