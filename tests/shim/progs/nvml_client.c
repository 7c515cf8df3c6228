/*
 * nvml_client.c: a C program linked with -lnvidia-ml (calls through its PLT,
 * the route a shim export intercepts), built against the project's NVML ABI
 * declaration.  Queries device argv[1] (default 0), one line per result:
 *   mem1 <rc> <total> <free> <used>          nvmlDeviceGetMemoryInfo
 *   mem2 <rc> <total> <free> <used> <reserved>  _v2 with nvmlMemory_v2
 *   badver <rc>                              _v2 with a wrong version word
 *   badhandle <rc> <rc>                      memory info, process list on a forged handle
 *   count <rc> <n>                           compute processes: count query (0, NULL)
 *   procs1 <rc> <n> pid:bytes...             v1 layout
 *   procs3 <rc> <n> pid:bytes...             v3 layout
 *   graphics <rc> <n>                        graphics processes (v3)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgs/nvml_abi.h"

int main(int argc, char **argv)
{
    unsigned int idx = argc > 1 ? (unsigned int)atoi(argv[1]) : 0;
    nvmlDevice_t h, bad = (nvmlDevice_t)(uintptr_t)0x1234;
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(idx, &h) != NVML_SUCCESS)
        return 1;
    nvmlMemory_t m;
    memset(&m, 0, sizeof m);
    nvmlReturn_t r = nvmlDeviceGetMemoryInfo(h, &m);
    printf("mem1 %d %llu %llu %llu\n", (int)r, m.total, m.free, m.used);
    nvmlMemory_v2_t m2;
    memset(&m2, 0, sizeof m2);
    m2.version = nvmlMemory_v2;
    r = nvmlDeviceGetMemoryInfo_v2(h, &m2);
    printf("mem2 %d %llu %llu %llu %llu\n", (int)r, m2.total, m2.free, m2.used, m2.reserved);
    m2.version = 1;
    printf("badver %d\n", (int)nvmlDeviceGetMemoryInfo_v2(h, &m2));
    unsigned int n = 4;
    nvmlProcessInfo_v1_t p1[16];
    nvmlProcessInfo_t p3[16];
    printf("badhandle %d %d\n", (int)nvmlDeviceGetMemoryInfo(bad, &m),
           (int)nvmlDeviceGetComputeRunningProcesses(bad, &n, p1));
    n = 0;
    r = nvmlDeviceGetComputeRunningProcesses(h, &n, NULL);
    printf("count %d %u\n", (int)r, n);
    n = 16;
    r = nvmlDeviceGetComputeRunningProcesses(h, &n, p1);
    printf("procs1 %d %u", (int)r, n);
    for (unsigned int k = 0; r == NVML_SUCCESS && k < n; k++)
        printf(" %u:%llu", p1[k].pid, p1[k].usedGpuMemory);
    printf("\n");
    n = 16;
    r = nvmlDeviceGetComputeRunningProcesses_v3(h, &n, p3);
    printf("procs3 %d %u", (int)r, n);
    for (unsigned int k = 0; r == NVML_SUCCESS && k < n; k++)
        printf(" %u:%llu", p3[k].pid, p3[k].usedGpuMemory);
    printf("\n");
    n = 0;
    r = nvmlDeviceGetGraphicsRunningProcesses_v3(h, &n, NULL);
    printf("graphics %d %u\n", (int)r, n);
    return nvmlShutdown() == NVML_SUCCESS ? 0 : 1;
}
