/*
 * image.h: what the simulator reads from a module image (PTX text, a cubin
 * ELF, a fatbin or nvcc's fatbin wrapper): its kernels, its global
 * variables with their sizes, and the `// tgs-sim: cost` annotations.
 */
#ifndef TGS_SIM_IMAGE_H
#define TGS_SIM_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "tgs/cuda_abi.h"

#pragma GCC visibility push(hidden)

enum sim_sym_kind { SIM_SYM_KERNEL = 1, SIM_SYM_GLOBAL };

struct sim_param {
    uint32_t offset, size; /* in the kernel's parameter buffer */
};

struct sim_sym {
    char *name;
    int kind;
    uint64_t size; /* globals: bytes */
    struct sim_param *params; /* kernels: the parameter layout, when known */
    uint32_t nparams;
    int params_known;
};

struct sim_image_cost {
    char name[128];
    double factor;
};

struct sim_image {
    struct sim_sym *syms;
    size_t nsyms;
    struct sim_image_cost *costs;
    size_t ncosts;
};

/* Parse an image (size 0: unknown, as for cuModuleLoadData; the format
 * bounds it).  INVALID_IMAGE for junk, INVALID_PTX for a PTX text without
 * a kernel, NOT_SUPPORTED for a compressed entry that cannot be inflated. */
CUresult sim_image_parse(const void *image, size_t size, struct sim_image *out);
void sim_image_free(struct sim_image *img);
/* Merge src's symbols and costs into dst (the JIT linker); 0 or -1. */
int sim_image_merge(struct sim_image *dst, const struct sim_image *src);
const struct sim_sym *sim_image_find(const struct sim_image *img, const char *name, int kind);
double sim_image_cost(const struct sim_image *img, const char *name);

/* helpers for the format readers (image.c) */
int sim_image_add(struct sim_image *img, const char *name, size_t len, int kind, uint64_t size);
/* Record kernel name's parameter index i (growing the list); 0 or -1. */
int sim_image_param(struct sim_image *img, const char *name, size_t len, uint32_t i,
                    uint32_t offset, uint32_t size);
void sim_image_params_known(struct sim_image *img, const char *name, size_t len);
void sim_image_scan_costs(struct sim_image *img, const unsigned char *p, size_t n);

/* format readers */
CUresult sim_image_ptx(const char *text, size_t n, struct sim_image *out);
CUresult sim_image_elf(const unsigned char *p, size_t n, struct sim_image *out);
int sim_image_is_elf(const unsigned char *p);
size_t sim_image_elf_size(const unsigned char *p);
CUresult sim_image_fatbin(const unsigned char *p, size_t n, struct sim_image *out);

/* Write img as a minimal cubin (ELF64: kernels STT_FUNC, globals STT_OBJECT
 * with sizes, costs as a comment section).  malloc'ed; NULL on failure. */
void *sim_image_write_elf(const struct sim_image *img, size_t *size_out);

#define SIM_FATBIN_MAGIC 0xBA55ED50u
#define SIM_FATBIN_WRAPPER_MAGIC 0x466243b1u
#define SIM_IMAGE_CAP (256ull << 20)

#pragma GCC visibility pop

#endif /* TGS_SIM_IMAGE_H */
