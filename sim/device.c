/* device.c: cuInit, the driver version and device queries. */
#include <string.h>

#include "sim.h"

struct sim_globals g_sim = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .proc_slot = -1,
                             .cap_lock = PTHREAD_MUTEX_INITIALIZER};
__thread struct sim_thread g_sim_thread;

static pthread_mutex_t *init_lock(void)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; /* guards only cuInit */
    return &m;
}

CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_check_init() == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    pthread_mutex_lock(init_lock());
    CUresult r = CUDA_SUCCESS;
    if (!g_sim.initialized) {
        g_sim.ns_per_thread = sim_env_double("TGS_SIM_NS_PER_THREAD", 1.0, 0.0, 1e9);
        g_sim.queue_depth = sim_env_u64("TGS_SIM_QUEUE_DEPTH", 1024, 1, SIM_RING - 1);
        g_sim.lazy_load_ns = sim_env_u64("TGS_SIM_LAZY_LOAD_US", 0, 0, 10000000) * 1000;
        g_sim.sm_count = (int)sim_env_u64("TGS_SIM_SMS", 108, 1, 1024);
        g_sim.pcie_gbps = sim_env_double("TGS_SIM_PCIE_GBPS", 25.0, 0.001, 1e6);
        g_sim.host_limit = sim_env_bytes("TGS_SIM_HOST_MEM", UINT64_MAX);
        sim_trace_open();
        r = sim_state_open();
        if (r == CUDA_SUCCESS)
            sim_visible_init();
        if (r == CUDA_SUCCESS)
            __atomic_store_n(&g_sim.initialized, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(init_lock());
    return r;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_nvis();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim_nvis())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", "TGS Simulated GPU");
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    sim_uuid_bytes(sim_phys(dev), (unsigned char *)uuid->bytes); /* visible.c */
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = g_sim.st->dev[sim_phys(dev)].mem_total;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b = 0;
    if (!bytes)
        return sim_check_dev(dev) != CUDA_SUCCESS ? sim_check_dev(dev) : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuDeviceTotalMem_v2(&b, dev);
    if (r == CUDA_SUCCESS)
        *bytes = b > 0xffffffffull ? 0xffffffffu : (unsigned int)b;
    return r;
}

static int attribute(CUdevice_attribute a, CUdevice dev, int *out)
{
    int v;
    switch ((int)a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
    case 15 /* GPU_OVERLAP */: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = g_sim.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case 32 /* ECC_ENABLED */: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = sim_phys(dev) + 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 50331648; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case 40 /* ASYNC_ENGINE_COUNT */: v = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case 81 /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */: v = 233472; break;
    case 82 /* MAX_REGISTERS_PER_MULTIPROCESSOR */: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case 84 /* MULTI_GPU_BOARD */: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
    case 97 /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */: v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    case 106 /* MAX_BLOCKS_PER_MULTIPROCESSOR */: v = 32; break;
    /* what the simulator does: the features it models read 1, the rest 0 */
    case 79 /* GLOBAL_L1_CACHE_SUPPORTED */: v = 1; break;
    case 80 /* LOCAL_L1_CACHE_SUPPORTED */: v = 1; break;
    case 87 /* SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO */: v = 2; break;
    case 90 /* COMPUTE_PREEMPTION_SUPPORTED */: v = 1; break;
    case 91 /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */: v = 1; break;
    case 99 /* HOST_REGISTER_SUPPORTED */: v = 1; break;
    case 103 /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */: v = 1; break;
    case 108 /* MAX_PERSISTING_L2_CACHE_SIZE */: v = 37748736; break;
    case 109 /* MAX_ACCESS_POLICY_WINDOW_SIZE */: v = 134213632; break;
    case 113 /* READ_ONLY_HOST_REGISTER_SUPPORTED */: v = 1; break;
    case 119 /* MEMPOOL_SUPPORTED_HANDLE_TYPES */: v = 0; break;
    case 120 /* CLUSTER_LAUNCH */: v = 1; break;
    case 126 /* MEM_SYNC_DOMAIN_COUNT */: v = 4; break;
    case 127 /* TENSOR_MAP_ACCESS_SUPPORTED */: v = 1; break;
    case 130 /* NUMA_CONFIG */: v = 0; break;
    case 131 /* NUMA_ID */: v = -1; break;
    case 134 /* HOST_NUMA_ID */: v = -1; break;
    case 111 /* RESERVED_SHARED_MEMORY_PER_BLOCK */: v = 1024; break;
    default:
        /* Other valid attributes read as 0 ("not supported"), like a
         * capability the device lacks; out-of-range ones are invalid. */
        if ((int)a <= 0 || (int)a > 160)
            return -1;
        v = 0;
    }
    *out = v;
    return 0;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    return attribute(attrib, dev, pi) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", (unsigned)(sim_phys(dev) + 1));
    return CUDA_SUCCESS;
}
