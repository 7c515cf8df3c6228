/*
 * module.c: modules and functions.  Any image loads; the simulator only
 * looks for cost annotations, lines "// tgs-sim: cost <kernel> <factor>"
 * (a PTX comment, ignored by a real GPU), which scale that kernel's time.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define TEXT_CAP (256ull << 20)
#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243b1u

/* Bytes of the image that may be read: binary formats carry their size,
 * text ends at its NUL. */
static size_t image_size(const unsigned char *img)
{
    uint32_t magic;
    memcpy(&magic, img, 4);
    if (magic == FATBIN_WRAPPER_MAGIC)
        return 0; /* a wrapper points elsewhere; nothing to scan here */
    if (magic == FATBIN_MAGIC) {
        uint16_t hsz;
        uint64_t fsz;
        memcpy(&hsz, img + 6, 2);
        memcpy(&fsz, img + 8, 8);
        return (size_t)hsz + (size_t)(fsz < TEXT_CAP ? fsz : TEXT_CAP);
    }
    if (memcmp(img, "\x7f" "ELF", 4) == 0 && img[4] == 2) {
        uint64_t shoff, phoff;
        uint16_t shentsize, shnum, phentsize, phnum;
        memcpy(&phoff, img + 0x20, 8);
        memcpy(&shoff, img + 0x28, 8);
        memcpy(&phentsize, img + 0x36, 2);
        memcpy(&phnum, img + 0x38, 2);
        memcpy(&shentsize, img + 0x3A, 2);
        memcpy(&shnum, img + 0x3C, 2);
        uint64_t a = shoff + (uint64_t)shentsize * shnum, b = phoff + (uint64_t)phentsize * phnum;
        uint64_t n = a > b ? a : b;
        return (size_t)(n < TEXT_CAP ? n : TEXT_CAP);
    }
    return strnlen((const char *)img, TEXT_CAP);
}

static void add_cost(struct CUmod_st *m, const char *line, size_t len)
{
    char buf[320];
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    char name[128];
    double f;
    if (sscanf(buf, " cost %127s %lf", name, &f) != 2 || !(f >= 0) || f > 1e9)
        return;
    struct sim_cost *n = realloc(m->costs, (m->ncosts + 1) * sizeof *n);
    if (!n)
        return;
    m->costs = n;
    snprintf(n[m->ncosts].name, sizeof n[m->ncosts].name, "%s", name);
    n[m->ncosts].factor = f;
    m->ncosts++;
}

static void scan_costs(struct CUmod_st *m, const unsigned char *img, size_t n)
{
    static const char tag[] = "tgs-sim:";
    const unsigned char *p = img, *end = img + n;
    while (p < end) {
        const unsigned char *hit = memmem(p, (size_t)(end - p), tag, sizeof tag - 1);
        if (!hit)
            break;
        const unsigned char *s = hit + sizeof tag - 1;
        const unsigned char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol)
            eol = end;
        /* Must sit in a // comment. */
        const unsigned char *q = hit;
        while (q > img && (q[-1] == ' ' || q[-1] == '\t'))
            q--;
        if (q - img >= 2 && q[-1] == '/' && q[-2] == '/')
            add_cost(m, (const char *)s, (size_t)(eol - s));
        p = eol;
    }
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->obj.kind = SIM_K_MODULE;
    m->ctx = ctx;
    scan_costs(m, image, image_size(image));
    sim_handle_add(m);
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return cuModuleLoadDataEx(module, image, 0, NULL, NULL);
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
    if (len == 0 || len == 4096)
        return CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&g_sim.lock);
    struct CUfunc_st *f = NULL;
    for (size_t i = 0; i < hmod->nfuncs && !f; i++)
        if (!strcmp(hmod->funcs[i]->name, name))
            f = hmod->funcs[i];
    pthread_mutex_unlock(&g_sim.lock);
    if (!f) {
        struct CUfunc_st **arr = realloc(hmod->funcs, (hmod->nfuncs + 1) * sizeof *arr);
        f = calloc(1, sizeof *f + len + 1);
        if (!arr || !f) {
            free(f);
            if (arr)
                hmod->funcs = arr;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        hmod->funcs = arr;
        f->obj.kind = SIM_K_FUNC;
        f->mod = hmod;
        f->factor = 1.0;
        memcpy(f->name, name, len + 1);
        for (size_t i = 0; i < hmod->ncosts; i++)
            if (!strcmp(hmod->costs[i].name, name))
                f->factor = hmod->costs[i].factor;
        pthread_mutex_lock(&g_sim.lock);
        hmod->funcs[hmod->nfuncs++] = f;
        pthread_mutex_unlock(&g_sim.lock);
        sim_handle_add(f);
    }
    *hfunc = f;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hmod, SIM_K_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_handle_del(hmod);
    for (size_t i = 0; i < hmod->nfuncs; i++) {
        sim_handle_del(hmod->funcs[i]);
        hmod->funcs[i]->obj.kind = 0;
        free(hmod->funcs[i]);
    }
    free(hmod->funcs);
    free(hmod->costs);
    hmod->obj.kind = 0;
    free(hmod);
    return CUDA_SUCCESS;
}
