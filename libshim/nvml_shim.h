/*
 * libshim/nvml_shim.h: internals of the NVML view (nvml_real.c, nvml_job.c,
 * nvml_hooks.c).  The NVML ABI is the project's own declaration of it,
 * tgs/nvml_abi.h (contracts/, checked against NVIDIA's nvml.h by
 * tests/sim/test_nvml_abi.py); the shim never links or loads NVML.
 */
#ifndef TGS_NVML_SHIM_H
#define TGS_NVML_SHIM_H

#include "tgs/nvml_abi.h"
#include "shim.h"

/* The NVML entry points the shim replaces, in the order of their slot in
 * tgs_g.nvml.real[]. */
#define TGS_NVML_HOOKED(X) \
    X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2) \
    X(nvmlDeviceGetComputeRunningProcesses) X(nvmlDeviceGetComputeRunningProcesses_v2) \
    X(nvmlDeviceGetComputeRunningProcesses_v3) \
    X(nvmlDeviceGetGraphicsRunningProcesses) X(nvmlDeviceGetGraphicsRunningProcesses_v2) \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3) \
    X(nvmlDeviceGetMPSComputeRunningProcesses) X(nvmlDeviceGetMPSComputeRunningProcesses_v2) \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v3)

enum tgs_nvml_id {
#define TGS_NVML_ENUM(name) TGS_NVML_##name,
    TGS_NVML_HOOKED(TGS_NVML_ENUM)
#undef TGS_NVML_ENUM
    TGS_NVML_NHOOKS
};
_Static_assert(TGS_NVML_NHOOKS <= TGS_NVML_MAX, "tgs_g.nvml.real[] is too small");

/* nvml_real.c: the real function a hook replaces (NULL: no NVML loaded) and
 * the real NVML's device identity queries. */
void *tgs_nvml_real(int id);
nvmlReturn_t tgs_nvml_uuid(nvmlDevice_t dev, char *uuid, unsigned int len);
nvmlReturn_t tgs_nvml_index(nvmlDevice_t dev, unsigned int *index);
nvmlReturn_t tgs_nvml_by_uuid(const char *uuid, nvmlDevice_t *dev);

/* nvml_job.c: the job's view (the one place that reads the segment). */
struct tgs_nvml_job {
    int has_quota;                  /* mem_quota below applies */
    uint64_t mem_quota, mem_used;   /* bytes, the whole job */
    int32_t device_index;           /* the job's GPU: ordinal on the host */
    char device_uuid[TGS_SEG_UUID_MAX];
};
int tgs_nvml_job(struct tgs_nvml_job *j);   /* 1 when this process belongs to a job */
/* A multi-device job (TGS_PARTS): its part on the device of NVML UUID `uuid`, read from the
 * part's files (read-only, no slot taken): 1 when there is one, with its quota and usage in
 * *j and (pids non-NULL) its live GPU processes, *n of them (<= max). */
int tgs_nvml_part(const char *uuid, struct tgs_nvml_job *j, unsigned int *pids,
                  unsigned long long *bytes, unsigned int max, unsigned int *n);
/* The job's live processes that allocated memory or launched work: pids (as
 * the job sees them) and their ledger bytes; returns how many (<= max). */
unsigned int tgs_nvml_job_procs(unsigned int *pids, unsigned long long *bytes, unsigned int max);

#endif /* TGS_NVML_SHIM_H */
