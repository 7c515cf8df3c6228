/* errors.c: cuGetErrorName / cuGetErrorString (work before cuInit). */
#include <stddef.h>

#include "sim.h"

struct err_row {
    CUresult code;
    const char *name;
    const char *text;
};

#define E(c, t) {c, #c, t}
static const struct err_row errs[] = {
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    E(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
    E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
      "operation failed due to a previous error during capture"),
    E(CUDA_ERROR_STREAM_CAPTURE_MERGE,
      "operation would result in a merge of separate capture sequences"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work"),
    E(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
      "dependency created on uncaptured work in another stream"),
    E(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
      "operation would make the legacy stream depend on a capturing blocking stream"),
    E(CUDA_ERROR_CAPTURED_EVENT,
      "operation not permitted on an event last recorded in a capturing stream"),
    E(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
      "attempt to terminate a thread-local capture sequence from another thread"),
    E(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size"),
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
    /* codes the ABI header does not name */
    {(CUresult)704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {(CUresult)705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {(CUresult)712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {(CUresult)713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {(CUresult)910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated "
     "constraints specific to instantiated graph update"},
};

static const struct err_row *find(CUresult e)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].code == e)
            return &errs[i];
    return NULL;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_row *r = find(error);
    *pStr = r ? r->text : NULL;
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_row *r = find(error);
    *pStr = r ? r->name : NULL;
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
