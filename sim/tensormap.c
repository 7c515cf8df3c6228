/*
 * tensormap.c: TMA descriptors (cuTensorMapEncodeTiled, ReplaceAddress).
 * The descriptor is opaque to programs; the simulator checks the arguments
 * as the driver documents them (rank 1-5, 16-byte aligned address, strides
 * multiples of 16 below 2^40, box sides 1-256, element strides 1-8, an
 * inner box of at most the swizzle span, a descriptor 64-byte aligned) and
 * stores them in the 128 bytes.
 */
#include <string.h>

#include "sim.h"

static const unsigned elem_bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void *globalAddress,
                                const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill)
{
    if (!tensorMap || (uintptr_t)tensorMap % 64 || !globalDim || !boxDim || !elementStrides ||
        (unsigned)tensorDataType > CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ || tensorRank < 1 ||
        tensorRank > 5 || (tensorRank > 1 && !globalStrides) ||
        (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B ||
        (unsigned)l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t a = (uintptr_t)globalAddress;
    if (!a || a % (interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned es = elem_bytes[tensorDataType];
    for (cuuint32_t i = 0; i < tensorRank; i++) {
        if (!globalDim[i] || globalDim[i] > (1ull << 32) || !boxDim[i] || boxDim[i] > 256 ||
            !elementStrides[i] || elementStrides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        if (i + 1 < tensorRank &&
            (globalStrides[i] % 16 || globalStrides[i] >= (1ull << 40) || !globalStrides[i]))
            return CUDA_ERROR_INVALID_VALUE;
    }
    static const unsigned span[] = {0, 32, 64, 128};
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE &&
        boxDim[0] * es > span[swizzle])
        return CUDA_ERROR_INVALID_VALUE;
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && (boxDim[0] * es) % 16)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t o[16] = {0};
    o[0] = (cuuint64_t)a;
    o[1] = tensorDataType | (cuuint64_t)tensorRank << 8 | (cuuint64_t)interleave << 12 |
           (cuuint64_t)swizzle << 16 | (cuuint64_t)l2Promotion << 20 | (cuuint64_t)oobFill << 24;
    for (cuuint32_t i = 0; i < tensorRank; i++) {
        o[2 + i] = globalDim[i];
        o[7 + i] = i + 1 < tensorRank ? globalStrides[i] : 0;
        o[12 + i / 2] |= (cuuint64_t)(boxDim[i] | elementStrides[i] << 16) << (32 * (i % 2));
    }
    memcpy((void *)tensorMap, o, sizeof o);
    return CUDA_SUCCESS;
}

CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
    uintptr_t a = (uintptr_t)globalAddress;
    cuuint64_t first;
    if (!tensorMap || (uintptr_t)tensorMap % 64 || !a || a % 16)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&first, (void *)tensorMap, sizeof first);
    if (!first) /* never encoded */
        return CUDA_ERROR_INVALID_VALUE;
    first = (cuuint64_t)a;
    memcpy((void *)tensorMap, &first, sizeof first);
    return CUDA_SUCCESS;
}
