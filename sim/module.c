/*
 * module.c: modules and their functions.  An image is parsed strictly
 * (image.c): junk is CUDA_ERROR_INVALID_IMAGE, a kernel that is not in the
 * image CUDA_ERROR_NOT_FOUND.  Each global variable gets device memory of
 * its size at load, so cuModuleGetGlobal answers the real size and copies
 * to and from it work.  A kernel's cost annotation scales its time.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

CUresult sim_read_file(const char *path, void **data, size_t *size)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIM_IMAGE_CAP) {
        close(fd);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    size_t n = (size_t)st.st_size;
    char *b = malloc(n + 1);
    size_t got = 0;
    while (b && got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (!b || got != n) {
        free(b);
        return b ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_OUT_OF_MEMORY;
    }
    b[n] = 0; /* a PTX file ends here */
    *data = b;
    *size = n;
    return CUDA_SUCCESS;
}

void sim_module_free(struct CUmod_st *m)
{
    sim_handle_del(m);
    for (size_t i = 0; i < m->nfuncs; i++) {
        sim_handle_del(m->funcs[i]);
        m->funcs[i]->obj.kind = 0;
        free(m->funcs[i]);
    }
    for (size_t i = 0; m->gaddr && i < m->img.nsyms; i++)
        if (m->gaddr[i])
            sim_mem_free(m->gaddr[i], 1 << SIM_R_MODULE);
    free(m->gaddr);
    free(m->funcs);
    sim_image_free(&m->img);
    m->obj.kind = 0;
    free(m);
}

CUresult sim_module_load(struct CUctx_st *ctx, const void *image, size_t size,
                         struct CUlib_st *lib, struct CUmod_st **out)
{
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->obj.kind = SIM_K_MODULE;
    m->ctx = ctx;
    m->lib = lib;
    CUresult r = sim_image_parse(image, size, &m->img);
    if (r == CUDA_SUCCESS && m->img.nsyms) {
        m->gaddr = calloc(m->img.nsyms, sizeof *m->gaddr);
        if (!m->gaddr)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; r == CUDA_SUCCESS && i < m->img.nsyms; i++) {
        const struct sim_sym *s = &m->img.syms[i];
        if (s->kind == SIM_SYM_GLOBAL) {
            r = sim_mem_alloc(&m->gaddr[i], s->size ? s->size : 1, SIM_R_MODULE, 0);
            if (r == CUDA_SUCCESS)
                memset((void *)(uintptr_t)m->gaddr[i], 0, s->size);
        }
    }
    if (r != CUDA_SUCCESS) {
        m->obj.kind = SIM_K_MODULE;
        for (size_t i = 0; m->gaddr && i < m->img.nsyms; i++)
            if (m->gaddr[i])
                sim_mem_free(m->gaddr[i], 1 << SIM_R_MODULE);
        free(m->gaddr);
        sim_image_free(&m->img);
        free(m);
        sim_log(TGS_LOG_INFO, "module load: error %d", (int)r);
        return r;
    }
    sim_handle_add(m);
    *out = m;
    return CUDA_SUCCESS;
}

CUresult sim_module_load_current(CUmodule *module, const void *image, size_t size)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_module_load(ctx, image, size, NULL, module);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    if (numOptions && (!options || !optionValues))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return sim_module_load_current(module, image, 0);
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return sim_module_load_current(module, image, 0);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return sim_module_load_current(module, fatCubin, 0);
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    void *data;
    size_t n;
    r = sim_read_file(fname, &data, &n);
    if (r != CUDA_SUCCESS)
        return r;
    r = sim_module_load(ctx, data, n, NULL, module);
    free(data);
    return r;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(hmod, SIM_K_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    size_t len = strnlen(name, 4096);
    if (len == 0 || len == 4096 || !sim_image_find(&hmod->img, name, SIM_SYM_KERNEL)) {
        sim_log(TGS_LOG_DEBUG, "cuModuleGetFunction: %s not in the module", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    pthread_mutex_lock(&g_sim.lock);
    struct CUfunc_st *f = NULL;
    int created = 0;
    for (size_t i = 0; i < hmod->nfuncs && !f; i++)
        if (!strcmp(hmod->funcs[i]->name, name))
            f = hmod->funcs[i];
    if (!f) {
        struct CUfunc_st **arr = realloc(hmod->funcs, (hmod->nfuncs + 1) * sizeof *arr);
        if (arr)
            hmod->funcs = arr;
        f = arr ? calloc(1, sizeof *f + len + 1) : NULL;
        if (f) {
            f->obj.kind = SIM_K_FUNC;
            f->mod = hmod;
            f->factor = sim_image_cost(&hmod->img, name);
            memcpy(f->name, name, len + 1);
            hmod->funcs[hmod->nfuncs++] = f;
            created = 1;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (created) /* the registry takes g_sim.lock itself */
        sim_handle_add(f);
    *hfunc = f;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hmod, SIM_K_MODULE) || hmod->lib)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_module_free(hmod);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || (!dptr && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(hmod, SIM_K_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < hmod->img.nsyms; i++) {
        const struct sim_sym *s = &hmod->img.syms[i];
        if (s->kind == SIM_SYM_GLOBAL && !strcmp(s->name, name)) {
            if (dptr)
                *dptr = hmod->gaddr[i];
            if (bytes)
                *bytes = s->size;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

int sim_lazy_loading(void)
{
    const char *v = getenv("CUDA_MODULE_LOADING");
    return !v || strcmp(v, "EAGER") != 0;
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = sim_lazy_loading() ? CU_MODULE_LAZY_LOADING : CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

static unsigned int kernel_count(const struct sim_image *img)
{
    unsigned int n = 0;
    for (size_t i = 0; i < img->nsyms; i++)
        n += img->syms[i].kind == SIM_SYM_KERNEL;
    return n;
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(mod, SIM_K_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = kernel_count(&mod->img);
    return CUDA_SUCCESS;
}

CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                    CUmodule mod)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!functions)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(mod, SIM_K_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    if (numFunctions > kernel_count(&mod->img))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int k = 0;
    for (size_t i = 0; i < mod->img.nsyms && k < numFunctions; i++)
        if (mod->img.syms[i].kind == SIM_SYM_KERNEL &&
            (r = cuModuleGetFunction(&functions[k++], mod, mod->img.syms[i].name)))
            return r;
    return CUDA_SUCCESS;
}

CUresult sim_func_resolve(CUfunction f, struct CUfunc_st **out)
{
    if (sim_handle_ok(f, SIM_K_FUNC)) {
        *out = f;
        return CUDA_SUCCESS;
    }
    if (sim_handle_ok(f, SIM_K_KERNEL))
        return cuKernelGetFunction(out, (CUkernel)(void *)f);
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    if ((r = sim_func_resolve(hfunc, &f)) != CUDA_SUCCESS)
        return r;
    *hmod = f->mod;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    if ((r = sim_func_resolve(hfunc, &f)) != CUDA_SUCCESS)
        return r;
    *name = f->name;
    return CUDA_SUCCESS;
}

CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    if ((r = sim_func_resolve(function, &f)) != CUDA_SUCCESS)
        return r;
    *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

CUresult cuFuncLoad(CUfunction function)
{
    CUresult r = sim_check_init();
    struct CUfunc_st *f;
    return r != CUDA_SUCCESS ? r : sim_func_resolve(function, &f);
}
