/*
 * library.c: the context-independent loading API (cuLibrary*, cuKernel*).
 * A library keeps its parsed image and a copy of the code; it needs cuInit
 * but no context.  Each context that uses it gets its own module (made on
 * the first cuLibraryGetModule / cuKernelGetFunction / cuLibraryGetGlobal
 * there), freed with the library.  A CUkernel may be passed wherever a
 * CUfunction is expected: it means its function in the current context.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static size_t image_bytes(const void *code)
{
    const unsigned char *p = code;
    uint32_t magic = 0;
    if (p[0] && p[1] && p[2] && p[3])
        memcpy(&magic, p, 4);
    if (magic == SIM_FATBIN_MAGIC) {
        uint16_t h;
        uint64_t n;
        memcpy(&h, p + 6, 2);
        memcpy(&n, p + 8, 8);
        return (size_t)h + (size_t)n;
    }
    if (magic == SIM_FATBIN_WRAPPER_MAGIC)
        return 24; /* the wrapper: it points to the fatbin, which stays put */
    if (sim_image_is_elf(p))
        return sim_image_elf_size(p);
    return strnlen((const char *)p, SIM_IMAGE_CAP) + 1;
}

static CUresult lib_load(CUlibrary *library, const void *code, size_t size, unsigned int nj,
                         CUjit_option *jo, void **jv, unsigned int nl, CUlibraryOption *lo,
                         void **lv)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    /* library options may come without values (cuBLASLt passes
     * CU_LIBRARY_BINARY_IS_PRESERVED so): the simulator reads none of them */
    (void)lv;
    if (!library || !code || (nj && (!jo || !jv)) || (nl && !lo))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlib_st *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = sim_image_parse(code, size, &l->img);
    if (r != CUDA_SUCCESS) {
        free(l);
        return r;
    }
    l->code_size = size ? size : image_bytes(code);
    l->code = malloc(l->code_size + 1);
    if (!l->code) {
        sim_image_free(&l->img);
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(l->code, code, l->code_size);
    ((char *)l->code)[l->code_size] = 0;
    l->obj.kind = SIM_K_LIB;
    sim_handle_add(l);
    *library = l;
    return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    return lib_load(library, code, 0, numJitOptions, jitOptions, jitOptionsValues,
                    numLibraryOptions, libraryOptions, libraryOptionValues);
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fileName)
        return CUDA_ERROR_INVALID_VALUE;
    void *data;
    size_t n;
    if ((r = sim_read_file(fileName, &data, &n)) != CUDA_SUCCESS)
        return r;
    r = lib_load(library, data, n, numJitOptions, jitOptions, jitOptionsValues,
                 numLibraryOptions, libraryOptions, libraryOptionValues);
    free(data);
    return r;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(library, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_handle_del(library);
    for (size_t i = 0; i < library->nmods; i++)
        sim_module_free(library->mods[i]);
    for (size_t i = 0; i < library->nkerns; i++) {
        sim_handle_del(library->kerns[i]);
        library->kerns[i]->obj.kind = 0;
        free(library->kerns[i]);
    }
    free(library->mods);
    free(library->kerns);
    free(library->code);
    sim_image_free(&library->img);
    library->obj.kind = 0;
    free(library);
    return CUDA_SUCCESS;
}

CUresult sim_library_module(struct CUlib_st *lib, struct CUmod_st **out)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUmod_st *m = NULL, *made = NULL;
    for (int pass = 0; pass < 2 && !m; pass++) {
        pthread_mutex_lock(&g_sim.lock);
        for (size_t i = 0; i < lib->nmods && !m; i++)
            if (lib->mods[i]->ctx == ctx)
                m = lib->mods[i];
        if (!m && made) { /* add the one made outside the lock */
            struct CUmod_st **arr = realloc(lib->mods, (lib->nmods + 1) * sizeof *arr);
            if (arr) {
                lib->mods = arr;
                arr[lib->nmods++] = m = made;
                made = NULL;
            }
        }
        pthread_mutex_unlock(&g_sim.lock);
        if (!m && !made && (r = sim_module_load(ctx, lib->code, lib->code_size, lib, &made)))
            return r;
    }
    if (made) /* another thread was first, or no memory to keep ours */
        sim_module_free(made);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = m;
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(library, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    return sim_library_module(library, pMod);
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || (!dptr && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(library, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!sim_image_find(&library->img, name, SIM_SYM_GLOBAL))
        return CUDA_ERROR_NOT_FOUND;
    struct CUmod_st *m;
    if ((r = sim_library_module(library, &m)) != CUDA_SUCCESS)
        return r;
    return cuModuleGetGlobal_v2(dptr, bytes, m, name);
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(library, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!sim_image_find(&library->img, name, SIM_SYM_KERNEL)) {
        sim_log(TGS_LOG_DEBUG, "cuLibraryGetKernel: %s not in the library", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    size_t len = strlen(name);
    pthread_mutex_lock(&g_sim.lock);
    struct CUkern_st *k = NULL;
    int created = 0;
    for (size_t i = 0; i < library->nkerns && !k; i++)
        if (!strcmp(library->kerns[i]->name, name))
            k = library->kerns[i];
    if (!k) {
        struct CUkern_st **arr = realloc(library->kerns, (library->nkerns + 1) * sizeof *arr);
        if (arr)
            library->kerns = arr;
        k = arr ? calloc(1, sizeof *k + len + 1) : NULL;
        if (k) {
            k->obj.kind = SIM_K_KERNEL;
            k->lib = library;
            memcpy(k->name, name, len + 1);
            library->kerns[library->nkerns++] = k;
            created = 1;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (created)
        sim_handle_add(k);
    *pKernel = k;
    return CUDA_SUCCESS;
}

static unsigned int lib_kernel_count(const struct CUlib_st *l)
{
    unsigned int n = 0;
    for (size_t i = 0; i < l->img.nsyms; i++)
        n += l->img.syms[i].kind == SIM_SYM_KERNEL;
    return n;
}

CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(lib, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = lib_kernel_count(lib);
    return CUDA_SUCCESS;
}

CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!kernels)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(lib, SIM_K_LIB))
        return CUDA_ERROR_INVALID_HANDLE;
    if (numKernels > lib_kernel_count(lib))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int k = 0;
    for (size_t i = 0; i < lib->img.nsyms && k < numKernels; i++)
        if (lib->img.syms[i].kind == SIM_SYM_KERNEL &&
            (r = cuLibraryGetKernel(&kernels[k++], lib, lib->img.syms[i].name)))
            return r;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(kernel, SIM_K_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *m;
    if ((r = sim_library_module(kernel->lib, &m)) != CUDA_SUCCESS)
        return r;
    struct CUfunc_st *f;
    if ((r = cuModuleGetFunction(&f, m, kernel->name)) != CUDA_SUCCESS)
        return r;
    /* settings made on the kernel apply to its function in every context */
    for (int i = 0; i < SIM_FUNC_NATTR; i++)
        if (kernel->attr_set[i] && !f->attr_set[i]) {
            f->attr[i] = kernel->attr[i];
            f->attr_set[i] = 1;
        }
    if (kernel->cache_config && !f->cache_config)
        f->cache_config = kernel->cache_config;
    *pFunc = f;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(kernel, SIM_K_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    *pLib = kernel->lib;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(hfunc, SIM_K_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    *name = hfunc->name;
    return CUDA_SUCCESS;
}
