/*
 * image.c: module images.  Picks the format by its first bytes and keeps
 * the symbol table the readers find (image_ptx.c, image_elf.c, fatbin.c).
 * Cost annotations, `// tgs-sim: cost <kernel> <factor>` lines in a //
 * comment, scale a kernel's simulated time; a text image that only carries
 * annotations (the project's own test images) declares those kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "sim.h"

int sim_image_add(struct sim_image *img, const char *name, size_t len, int kind, uint64_t size)
{
    if (len == 0 || len > 4095)
        return 0;
    for (size_t i = 0; i < img->nsyms; i++)
        if (img->syms[i].kind == kind && strlen(img->syms[i].name) == len &&
            !memcmp(img->syms[i].name, name, len)) {
            if (size > img->syms[i].size)
                img->syms[i].size = size;
            return 0;
        }
    struct sim_sym *n = realloc(img->syms, (img->nsyms + 1) * sizeof *n);
    if (!n)
        return -1;
    img->syms = n;
    char *s = strndup(name, len);
    if (!s)
        return -1;
    n[img->nsyms++] = (struct sim_sym){.name = s, .kind = kind, .size = size};
    return 0;
}

int sim_image_param(struct sim_image *img, const char *name, size_t len, uint32_t i,
                    uint32_t offset, uint32_t size)
{
    if (i > 4096)
        return 0; /* not a plausible parameter index: ignore the record */
    for (size_t k = 0; k < img->nsyms; k++) {
        struct sim_sym *s = &img->syms[k];
        if (s->kind != SIM_SYM_KERNEL || strlen(s->name) != len || memcmp(s->name, name, len))
            continue;
        if (i >= s->nparams) {
            struct sim_param *p = realloc(s->params, (i + 1) * sizeof *p);
            if (!p)
                return -1;
            memset(p + s->nparams, 0, (i + 1 - s->nparams) * sizeof *p);
            s->params = p;
            s->nparams = i + 1;
        }

        s->params[i] = (struct sim_param){offset, size};
        s->params_known = 1;
        return 0;
    }
    return 0; /* not a kernel of this image (a device function): nothing to record */
}

void sim_image_params_known(struct sim_image *img, const char *name, size_t len)
{
    for (size_t k = 0; k < img->nsyms; k++)
        if (img->syms[k].kind == SIM_SYM_KERNEL && strlen(img->syms[k].name) == len &&
            !memcmp(img->syms[k].name, name, len))
            img->syms[k].params_known = 1;
}

static void add_cost(struct sim_image *img, const char *line, size_t len)
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
    struct sim_image_cost *n = realloc(img->costs, (img->ncosts + 1) * sizeof *n);
    if (!n)
        return;
    img->costs = n;
    snprintf(n[img->ncosts].name, sizeof n[img->ncosts].name, "%s", name);
    n[img->ncosts].factor = f;
    img->ncosts++;
}

void sim_image_scan_costs(struct sim_image *img, const unsigned char *img_p, size_t n)
{
    static const char tag[] = "tgs-sim:";
    const unsigned char *p = img_p, *end = img_p + n;
    while (p < end) {
        const unsigned char *hit = memmem(p, (size_t)(end - p), tag, sizeof tag - 1);
        if (!hit)
            break;
        const unsigned char *s = hit + sizeof tag - 1;
        const unsigned char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol)
            eol = end;
        const unsigned char *q = hit; /* must sit in a // comment */
        while (q > img_p && (q[-1] == ' ' || q[-1] == '\t'))
            q--;
        if (q - img_p >= 2 && q[-1] == '/' && q[-2] == '/')
            add_cost(img, (const char *)s, (size_t)(eol - s));
        p = eol;
    }
}

void sim_image_free(struct sim_image *img)
{
    for (size_t i = 0; i < img->nsyms; i++) {
        free(img->syms[i].name);
        free(img->syms[i].params);
    }
    free(img->syms);
    free(img->costs);
    memset(img, 0, sizeof *img);
}

int sim_image_merge(struct sim_image *dst, const struct sim_image *src)
{
    for (size_t i = 0; i < src->nsyms; i++) {
        const struct sim_sym *s = &src->syms[i];
        size_t len = strlen(s->name);
        if (sim_image_add(dst, s->name, len, s->kind, s->size))
            return -1;
        for (uint32_t k = 0; k < s->nparams; k++)
            if (sim_image_param(dst, s->name, len, k, s->params[k].offset, s->params[k].size))
                return -1;
    }
    if (src->ncosts) {
        struct sim_image_cost *n =
            realloc(dst->costs, (dst->ncosts + src->ncosts) * sizeof *n);
        if (!n)
            return -1;
        memcpy(n + dst->ncosts, src->costs, src->ncosts * sizeof *n);
        dst->costs = n;
        dst->ncosts += src->ncosts;
    }
    return 0;
}

const struct sim_sym *sim_image_find(const struct sim_image *img, const char *name, int kind)
{
    for (size_t i = 0; i < img->nsyms; i++)
        if (img->syms[i].kind == kind && !strcmp(img->syms[i].name, name))
            return &img->syms[i];
    return NULL;
}

double sim_image_cost(const struct sim_image *img, const char *name)
{
    double f = 1.0;
    for (size_t i = 0; i < img->ncosts; i++)
        if (!strcmp(img->costs[i].name, name))
            f = img->costs[i].factor;
    return f;
}

CUresult sim_image_parse(const void *image, size_t size, struct sim_image *out)
{
    memset(out, 0, sizeof *out);
    if (!image)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *p = image;
    uint32_t magic = 0;
    if (!p[0])
        return CUDA_ERROR_INVALID_IMAGE;
    /* the magics have no zero byte: a shorter text stops at its NUL first */
    if (p[1] && p[2] && p[3])
        memcpy(&magic, p, 4);
    CUresult r;
    if ((magic == SIM_FATBIN_WRAPPER_MAGIC || magic == SIM_FATBIN_MAGIC) && size && size < 16)
        return CUDA_ERROR_INVALID_IMAGE; /* shorter than the header */
    if (magic == SIM_FATBIN_WRAPPER_MAGIC) {
        const unsigned char *data;
        memcpy(&data, p + 8, sizeof data);
        if (!data)
            return CUDA_ERROR_INVALID_IMAGE;
        r = sim_image_fatbin(data, 0, out);
    } else if (magic == SIM_FATBIN_MAGIC) {
        r = sim_image_fatbin(p, size, out);
    } else if (sim_image_is_elf(p)) {
        r = sim_image_elf(p, size ? size : sim_image_elf_size(p), out);
    } else {
        size_t n = strnlen((const char *)p, size ? size : SIM_IMAGE_CAP);
        r = sim_image_ptx((const char *)p, n, out);
    }
    if (r != CUDA_SUCCESS)
        sim_image_free(out);
    return r;
}
