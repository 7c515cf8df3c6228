/*
 * libshim/real.c: the real dynamic-linker entry points and the real driver.
 *
 * The shim exports its own dlsym and dlvsym, so a call to either from inside
 * the shim would land on itself.  To start, we find libc's dlvsym by reading
 * the ELF dynamic symbol table of the loaded libc (dl_iterate_phdr: no dlsym
 * involved), then ask it for the real dlsym, exactly as glibc versions it:
 * dlsym@GLIBC_2.34, falling back to the base versions of older glibc.  We
 * never use __libc_dlsym (gone since glibc 2.34).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "shim.h"

struct elf_find { const char *sym; void *addr; };

static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p)
{
    /* ld.so relocates most d_ptr values in place; some arches keep them relative */
    return p < base ? base + p : p;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static void *elf_lookup(const struct dl_phdr_info *info, const char *name)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return NULL;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gh = NULL, *h = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: gh = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_HASH: h = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    if (!symtab || !strtab)
        return NULL;
    if (gh) {
        uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t hv = gnu_hash(name);
        for (uint32_t i = buckets[hv % nbuckets]; i >= symoffset && i != 0; i++) {
            const ElfW(Sym) *s = &symtab[i];
            uint32_t ch = chain[i - symoffset];
            if ((ch | 1) == (hv | 1) && s->st_shndx != SHN_UNDEF && s->st_value &&
                ELF64_ST_TYPE(s->st_info) == STT_FUNC && strcmp(strtab + s->st_name, name) == 0)
                return (void *)(base + s->st_value);
            if (ch & 1)
                break;
        }
        return NULL;
    }
    if (h) {
        uint32_t nchain = h[1];
        for (uint32_t i = 1; i < nchain; i++) {
            const ElfW(Sym) *s = &symtab[i];
            if (s->st_shndx != SHN_UNDEF && s->st_value &&
                ELF64_ST_TYPE(s->st_info) == STT_FUNC && strcmp(strtab + s->st_name, name) == 0)
                return (void *)(base + s->st_value);
        }
    }
    return NULL;
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct elf_find *f = data;
    const char *n = info->dlpi_name;
    if (!n || (!strstr(n, "/libc.so.6") && strcmp(n, "libc.so.6") != 0 &&
               !strstr(n, "/libdl.so.2") && strcmp(n, "libdl.so.2") != 0))
        return 0;
    f->addr = elf_lookup(info, f->sym);
    return f->addr != NULL;
}

void tgs_real_bootstrap(void)
{
    if (tgs_g.real_dlsym)
        return;
    struct elf_find f = { "dlvsym", NULL };
    dl_iterate_phdr(find_cb, &f);
    void *(*vsym)(void *, const char *, const char *) = (void *(*)(void *, const char *,
                                                                   const char *))f.addr;
    if (!vsym) {
        tgs_log(TGS_LOG_ERROR, "cannot find libc's dlvsym; the shim is inactive");
        return;
    }
    static const char *versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
    void *ds = NULL, *dv = NULL;
    for (size_t i = 0; i < 3 && !ds; i++)
        ds = vsym(RTLD_NEXT, "dlsym", versions[i]);
    for (size_t i = 0; i < 3 && !dv; i++)
        dv = vsym(RTLD_NEXT, "dlvsym", versions[i]);
    __atomic_store_n(&tgs_g.real_dlvsym,
                     dv ? (void *(*)(void *, const char *, const char *))dv : vsym,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&tgs_g.real_dlsym, (void *(*)(void *, const char *))ds, __ATOMIC_RELEASE);
    if (!ds)
        tgs_log(TGS_LOG_ERROR, "cannot find the real dlsym; the shim is inactive");
}

void tgs_real_open(void)
{
    if (!tgs_g.real_dlsym)
        return;
    const char *path = tgs_g.opt.real_libcuda[0] ? tgs_g.opt.real_libcuda : "libcuda.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        /* not an error for us: the program gets CUDA_ERROR_NOT_INITIALIZED-like
         * failures from the hooks, as it would without a driver */
        tgs_log(TGS_LOG_WARN, "cannot load the real driver %s: %s", path, dlerror());
        return;
    }
    if (tgs_g.real_dlsym(h, "tgs_shim_debug_hits")) {
        tgs_log(TGS_LOG_ERROR, "%s resolves to the shim itself; refusing to loop", path);
        return;
    }
    tgs_g.real.handle = h;
#define TGS_RESOLVE(name, params) \
    tgs_g.real.name = (tgs_pfn_##name)tgs_g.real_dlsym(h, #name);
    TGS_CUDA_ENTRY_POINTS(TGS_RESOLVE)
#undef TGS_RESOLVE
}
