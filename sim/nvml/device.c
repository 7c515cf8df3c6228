/*
 * device.c: device handles and identity: name, UUID, index, PCI location,
 * serial, brand, architecture, compute capability and modes.  Values are
 * the simulated driver's (sim/device.c): same name, UUID, PCI bus id and
 * compute capability as cuDeviceGet* report.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nvml_sim.h"

#define SIM_NAME "TGS Simulated GPU"   /* cuDeviceGetName */
#define SIM_CC_MAJOR 9                 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_* */
#define SIM_CC_MINOR 0
#define SIM_PCI_DEVICE_ID 0x233010DEu  /* device id << 16 | NVIDIA's vendor id */
#define SIM_PCI_SUBSYS_ID 0x16C110DEu

nvmlReturn_t nvml_dev(nvmlDevice_t device, unsigned int *idx)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    /* A handle is valid only if it is one we gave out: compare addresses,
     * never dereference what the caller passed. */
    for (unsigned int i = 0; i < st->hdr.ndevices; i++)
        if (device == &g_nvml.dev[i]) {
            *idx = i;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvml_dev_out(nvmlDevice_t device, const void *out, unsigned int *idx)
{
    nvmlReturn_t r = nvml_dev(device, idx);
    if (r == NVML_SUCCESS && !out)
        r = NVML_ERROR_INVALID_ARGUMENT;
    return r;
}

/* The simulator's UUID of device idx (sim/device.c, cuDeviceGetUuid_v2):
 * splitmix64 of the state file's seed, shaped as an RFC 4122 v4 UUID. */
static void uuid_bytes(unsigned int idx, unsigned char out[16])
{
    uint64_t x = nvml_state()->hdr.uuid_seed + 0x9e3779b97f4a7c15ull * (uint64_t)(idx + 1);
    for (int i = 0; i < 2; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(out + 8 * i, &z, 8);
    }
    out[6] = (unsigned char)((out[6] & 0x0f) | 0x40);
    out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);
}

void nvml_uuid_string(unsigned int idx, char *out, size_t n)
{
    unsigned char b[16];
    uuid_bytes(idx, b);
    snprintf(out, n,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = st->hdr.ndevices;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= st->hdr.ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_nvml.dev[index];
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < st->hdr.ndevices; i++) {
        char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        nvml_uuid_string(i, s, sizeof s);
        if (!strcasecmp(s, uuid)) {
            *device = &g_nvml.dev[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* "domain:bus:device.function" (any domain width) or "bus:device.function". */
static int parse_bus_id(const char *s, unsigned int *domain, unsigned int *bus,
                        unsigned int *dev)
{
    unsigned int d, b, v, f;
    int n = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", &d, &b, &v, &f, &n) == 4 && s[n] == 0) {
        *domain = d, *bus = b, *dev = v;
        return 0;
    }
    n = 0;
    if (sscanf(s, "%x:%x.%x%n", &b, &v, &f, &n) == 3 && s[n] == 0) {
        *domain = 0, *bus = b, *dev = v;
        return 0;
    }
    return -1;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                       nvmlDevice_t *device)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    unsigned int domain, bus, dev;
    if (!pciBusId || !device || parse_bus_id(pciBusId, &domain, &bus, &dev) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* Device i sits at 0000:(i+1):00.0, as cuDeviceGetPCIBusId says. */
    if (domain != 0 || dev != 0 || bus < 1 || bus > st->hdr.ndevices)
        return NVML_ERROR_NOT_FOUND;
    *device = &g_nvml.dev[bus - 1];
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    return r != NVML_SUCCESS ? r : nvml_put_string(name, length, SIM_NAME);
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvml_uuid_string(i, s, sizeof s);
    return nvml_put_string(uuid, length, s);
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, index, &i);
    if (r != NVML_SUCCESS)
        return r;
    *index = i;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    return nvmlDeviceGetIndex(device, minorNumber); /* /dev/nvidia<index> */
}

NVML_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    unsigned char b[16];
    uuid_bytes(i, b);
    uint64_t x;
    memcpy(&x, b, sizeof x);
    char s[NVML_DEVICE_SERIAL_BUFFER_SIZE];
    snprintf(s, sizeof s, "1654%09llu", (unsigned long long)(x % 1000000000ull));
    return nvml_put_string(serial, length, s);
}

/* One-value queries: check the handle and the out-pointer, then store. */
#define DEVICE_VALUE(fn, type, value)                                  \
    NVML_API nvmlReturn_t fn(nvmlDevice_t device, type *out)           \
    {                                                                  \
        unsigned int i;                                                \
        nvmlReturn_t r = nvml_dev_out(device, out, &i);                \
        if (r != NVML_SUCCESS)                                         \
            return r;                                                  \
        *out = (value);                                                \
        return NVML_SUCCESS;                                           \
    }

DEVICE_VALUE(nvmlDeviceGetBrand, nvmlBrandType_t, NVML_BRAND_NVIDIA)
DEVICE_VALUE(nvmlDeviceGetArchitecture, nvmlDeviceArchitecture_t, NVML_DEVICE_ARCH_HOPPER)
DEVICE_VALUE(nvmlDeviceGetComputeMode, nvmlComputeMode_t, NVML_COMPUTEMODE_DEFAULT)
DEVICE_VALUE(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, NVML_FEATURE_ENABLED)
DEVICE_VALUE(nvmlDeviceIsMigDeviceHandle, unsigned int, 0)
DEVICE_VALUE(nvmlDeviceGetMaxMigDeviceCount, unsigned int, 0)

NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                         int *minor)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = SIM_CC_MAJOR;
    *minor = SIM_CC_MINOR;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                           unsigned int *pendingMode)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!currentMode || !pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, pci, &i);
    if (r != NVML_SUCCESS)
        return r;
    memset(pci, 0, sizeof *pci);
    pci->domain = 0;
    pci->bus = i + 1;
    pci->device = 0;
    pci->pciDeviceId = SIM_PCI_DEVICE_ID;
    pci->pciSubSystemId = SIM_PCI_SUBSYS_ID;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", 0u, i + 1, 0u);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", 0u, i + 1, 0u);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_v1_t *pci)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, pci, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (pci->version != nvmlPciInfoExt_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memset(pci, 0, sizeof *pci);
    pci->version = nvmlPciInfoExt_v1;
    pci->bus = i + 1;
    pci->pciDeviceId = SIM_PCI_DEVICE_ID;
    pci->pciSubSystemId = SIM_PCI_SUBSYS_ID;
    pci->baseClass = 0x03; /* display controller */
    pci->subClass = 0x02;  /* 3D controller */
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", 0u, i + 1, 0u);
    return NVML_SUCCESS;
}
