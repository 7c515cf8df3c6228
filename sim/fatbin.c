/*
 * fatbin.c: fatbin containers (what nvcc -fatbin writes and what its
 * __fatBinC_Wrapper_t points to).  Layout, as nvcc writes it:
 *
 *   header: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 bytes
 *           of entries that follow;
 *   entry:  u16 kind (1 PTX, 2 ELF), u16 version, u32 entry header size,
 *           u64 payload size, u32 compressed size, u32 options offset,
 *           u16 x2, u32 arch (90 = sm_90), u32 name offset, u32 name size,
 *           u64 flags, u64 reserved, u64 uncompressed size; the payload
 *           follows the entry header.
 *
 * Flags 0x2000 (LZ4) and 0x8000 (Zstandard) mark a compressed payload: it
 * is inflated with the system's liblz4.so.1 / libzstd.so.1 (dlopen'ed when
 * first needed); without them such an entry is CUDA_ERROR_NOT_SUPPORTED.
 * The simulated device is sm_90: the loader takes the ELF entry of the
 * highest arch <= 90, else the PTX entry of the highest arch <= 90, and
 * reads the kernels and globals of that one entry.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "sim.h"

#define FB_KIND_PTX 1
#define FB_KIND_ELF 2
#define FB_LZ4 0x2000ull
#define FB_ZSTD 0x8000ull
#define SIM_ARCH 90

struct fb_entry {
    uint16_t kind;
    uint16_t version;
    uint32_t header_size;
    uint64_t size;
    uint32_t compressed_size;
    uint32_t options;
    uint16_t minor, major;
    uint32_t arch;
    uint32_t name_off, name_size;
    uint64_t flags;
    uint64_t reserved;
    uint64_t uncompressed_size;
};

typedef size_t (*zstd_fn)(void *, size_t, const void *, size_t);
typedef int (*lz4_fn)(const char *, char *, int, int);

static void *inflate(const unsigned char *src, size_t n, uint64_t out_size, int zstd,
                     CUresult *err)
{
    const char *lib = zstd ? "libzstd.so.1" : "liblz4.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    void *fn = h ? dlsym(h, zstd ? "ZSTD_decompress" : "LZ4_decompress_safe") : NULL;
    if (!fn || out_size == 0 || out_size > SIM_IMAGE_CAP) {
        sim_log(TGS_LOG_WARN, "fatbin: a compressed entry needs %s (%s)", lib,
                fn ? "bad size" : "not found");
        *err = fn ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_NOT_SUPPORTED;
        return NULL;
    }
    unsigned char *out = malloc(out_size + 1);
    if (!out) {
        *err = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    size_t got;
    if (zstd) {
        got = ((zstd_fn)fn)(out, out_size, src, n);
    } else {
        int r = ((lz4_fn)fn)((const char *)src, (char *)out, (int)n, (int)out_size);
        got = r < 0 ? (size_t)-1 : (size_t)r;
    }
    if (got > out_size) { /* ZSTD errors are huge values, LZ4's negative */
        free(out);
        *err = CUDA_ERROR_INVALID_IMAGE;
        return NULL;
    }
    out[got] = 0;
    *err = CUDA_SUCCESS;
    return out;
}

static int better(const struct fb_entry *cand, const struct fb_entry *best)
{
    if (cand->arch > SIM_ARCH || (cand->kind != FB_KIND_PTX && cand->kind != FB_KIND_ELF))
        return 0;
    if (!best)
        return 1;
    if (cand->kind != best->kind)
        return cand->kind == FB_KIND_ELF;
    return cand->arch > best->arch;
}

CUresult sim_image_fatbin(const unsigned char *p, size_t n, struct sim_image *out)
{
    uint32_t magic;
    uint16_t version, hsize;
    uint64_t fsize;
    memcpy(&magic, p, 4);
    memcpy(&version, p + 4, 2);
    memcpy(&hsize, p + 6, 2);
    memcpy(&fsize, p + 8, 8);
    if (magic != SIM_FATBIN_MAGIC || hsize < 16 || fsize > SIM_IMAGE_CAP ||
        (n && (size_t)hsize + fsize > n))
        return CUDA_ERROR_INVALID_IMAGE;
    const unsigned char *e = p + hsize, *end = p + hsize + fsize;
    struct fb_entry best = {0};
    const unsigned char *best_payload = NULL;
    int nentries = 0;
    while (e < end) {
        struct fb_entry fe;
        if ((size_t)(end - e) < sizeof fe)
            return CUDA_ERROR_INVALID_IMAGE;
        memcpy(&fe, e, sizeof fe);
        if (fe.header_size < sizeof fe || fe.header_size > (size_t)(end - e) ||
            fe.size > (size_t)(end - e) - fe.header_size)
            return CUDA_ERROR_INVALID_IMAGE;
        nentries++;
        if (better(&fe, best_payload ? &best : NULL)) {
            best = fe;
            best_payload = e + fe.header_size;
        }
        e += fe.header_size + fe.size;
    }
    if (!nentries)
        return CUDA_ERROR_INVALID_IMAGE;
    if (!best_payload)
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    const unsigned char *payload = best_payload;
    size_t psize = best.size;
    void *owned = NULL;
    if (best.flags & (FB_LZ4 | FB_ZSTD)) {
        CUresult err;
        size_t csize = best.compressed_size && best.compressed_size <= best.size
                           ? best.compressed_size
                           : best.size;
        owned = inflate(payload, csize, best.uncompressed_size, (best.flags & FB_ZSTD) != 0,
                        &err);
        if (!owned)
            return err;
        payload = owned;
        psize = best.uncompressed_size;
    }
    CUresult r;
    if (best.kind == FB_KIND_ELF)
        r = sim_image_is_elf(payload) ? sim_image_elf(payload, psize, out)
                                      : CUDA_ERROR_INVALID_IMAGE;
    else
        r = sim_image_ptx((const char *)payload, strnlen((const char *)payload, psize), out);
    free(owned);
    return r;
}
