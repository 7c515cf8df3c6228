// Kernels for the client tests: nvcc builds cubins and fatbins of this file at test time.
__device__ float gbuf[100];
__device__ int gcount;

extern "C" __global__ void scale(float *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= 2.0f;
    if (i == 0)
        gcount = n;
}

extern "C" __global__ void other(float *p) { p[0] = gbuf[3]; }
