/*
 * image_elf.c: cubins (ELF64, little-endian, machine EM_CUDA = 190).  The
 * symbol table gives the kernels (STT_FUNC with the entry flag 0x10 in
 * st_other; other functions are device functions) and the globals
 * (STT_OBJECT, with st_size: local ones too, nvcc makes a whole-program
 * module's __device__ variables local).  Undefined symbols define nothing.  Every offset is checked
 * against the image: a truncated or inconsistent ELF is INVALID_IMAGE.
 * The writer builds the same kind of image for the JIT linker's output.
 */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "sim.h"

#define EM_NVIDIA_CUDA 190
#define STO_CUDA_ENTRY 0x10

int sim_image_is_elf(const unsigned char *p)
{
    return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F';
}

/* Bytes the headers say the image spans (for cuModuleLoadData, no size). */
size_t sim_image_elf_size(const unsigned char *p)
{
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64)
        return sizeof eh;
    uint64_t a = eh.e_shoff + (uint64_t)eh.e_shentsize * eh.e_shnum;
    uint64_t b = eh.e_phoff + (uint64_t)eh.e_phentsize * eh.e_phnum;
    uint64_t n = a > b ? a : b;
    if (n < sizeof eh)
        n = sizeof eh;
    return (size_t)(n < SIM_IMAGE_CAP ? n : SIM_IMAGE_CAP);
}

static int in_image(uint64_t off, uint64_t len, size_t n)
{
    return off <= n && len <= n - off;
}

CUresult sim_image_elf(const unsigned char *p, size_t n, struct sim_image *out)
{
    Elf64_Ehdr eh;
    if (n < sizeof eh)
        return CUDA_ERROR_INVALID_IMAGE;
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != EM_NVIDIA_CUDA || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || !in_image(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), n))
        return CUDA_ERROR_INVALID_IMAGE;
    const unsigned char *sh = p + eh.e_shoff;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr s;
        memcpy(&s, sh + (size_t)i * sizeof s, sizeof s);
        if (s.sh_type != SHT_SYMTAB)
            continue;
        if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= eh.e_shnum ||
            !in_image(s.sh_offset, s.sh_size, n))
            return CUDA_ERROR_INVALID_IMAGE;
        Elf64_Shdr str;
        memcpy(&str, sh + (size_t)s.sh_link * sizeof str, sizeof str);
        if (!in_image(str.sh_offset, str.sh_size, n) || str.sh_size == 0)
            return CUDA_ERROR_INVALID_IMAGE;
        const char *strtab = (const char *)p + str.sh_offset;
        for (uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, p + s.sh_offset + k * sizeof sym, sizeof sym);
            int type = ELF64_ST_TYPE(sym.st_info);
            if (sym.st_shndx == SHN_UNDEF || sym.st_name >= str.sh_size)
                continue;
            const char *name = strtab + sym.st_name;
            size_t len = strnlen(name, str.sh_size - sym.st_name);
            int entry = type == STT_FUNC && (sym.st_other & STO_CUDA_ENTRY);
            int kind = entry ? SIM_SYM_KERNEL : type == STT_OBJECT ? SIM_SYM_GLOBAL : 0;
            if (kind && sim_image_add(out, name, len, kind, kind == SIM_SYM_GLOBAL ? sym.st_size : 0))
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    /* kernel parameters: .nv.info.<kernel> sections, records of
     * {u8 format, u8 attribute, value}; format 4 has a u16 size and data.
     * EIATTR_KPARAM_INFO (0x17): u32 index, u16 ordinal, u16 offset,
     * u32 with the size in bits 18..31. */
    Elf64_Shdr shs = {0};
    if (eh.e_shstrndx < eh.e_shnum)
        memcpy(&shs, sh + (size_t)eh.e_shstrndx * sizeof shs, sizeof shs);
    if (eh.e_shstrndx < eh.e_shnum && in_image(shs.sh_offset, shs.sh_size, n)) {
        const char *names = (const char *)p + shs.sh_offset;
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr s;
            memcpy(&s, sh + (size_t)i * sizeof s, sizeof s);
            if (s.sh_name >= shs.sh_size || !in_image(s.sh_offset, s.sh_size, n))
                continue;
            const char *sn = names + s.sh_name;
            size_t snl = strnlen(sn, shs.sh_size - s.sh_name);
            if (snl <= 9 || memcmp(sn, ".nv.info.", 9))
                continue;
            const char *kname = sn + 9;
            size_t klen = snl - 9;
            sim_image_params_known(out, kname, klen);
            const unsigned char *q = p + s.sh_offset, *end = q + s.sh_size;
            while (end - q >= 2) {
                unsigned fmt = q[0], attr = q[1];
                size_t rec;
                if (fmt == 1)
                    rec = 2;
                else if (fmt == 2 || fmt == 3)
                    rec = 4;
                else if (fmt == 4 && end - q >= 4)
                    rec = 4 + (size_t)(q[2] | q[3] << 8);
                else
                    break;
                if ((size_t)(end - q) < rec)
                    break;
                if (fmt == 4 && attr == 0x17 && rec >= 16) {
                    uint16_t ordinal, offset;
                    uint32_t bits;
                    memcpy(&ordinal, q + 8, 2);
                    memcpy(&offset, q + 10, 2);
                    memcpy(&bits, q + 12, 4);
                    if (sim_image_param(out, kname, klen, ordinal, offset, (bits >> 18) & 0x3fff))
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                q += rec;
            }
        }
    }
    /* annotations survive in any section (the writer's .comment, say) */
    sim_image_scan_costs(out, p, n);
    return CUDA_SUCCESS;
}

/* Layout: header | .shstrtab | .strtab | .symtab | .comment | section headers. */
void *sim_image_write_elf(const struct sim_image *img, size_t *size_out)
{
    static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab\0.comment\0.text\0.nv.global";
    enum { S_NULL, S_SHSTR, S_STR, S_SYM, S_COMMENT, S_TEXT, S_GLOBAL, NSEC };
    size_t strsz = 1, nsym = img->nsyms + 1, comsz = 0;
    for (size_t i = 0; i < img->nsyms; i++)
        strsz += strlen(img->syms[i].name) + 1;
    for (size_t i = 0; i < img->ncosts; i++)
        comsz += 48 + strlen(img->costs[i].name);
    size_t off_shstr = sizeof(Elf64_Ehdr), off_str = off_shstr + sizeof shstr;
    size_t off_sym = (off_str + strsz + 7) & ~(size_t)7;
    size_t off_com = off_sym + nsym * sizeof(Elf64_Sym);
    size_t off_sh = (off_com + comsz + 7) & ~(size_t)7;
    size_t total = off_sh + NSEC * sizeof(Elf64_Shdr);
    unsigned char *b = calloc(1, total);
    if (!b)
        return NULL;
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC;
    eh.e_machine = EM_NVIDIA_CUDA;
    eh.e_version = EV_CURRENT;
    eh.e_shoff = off_sh;
    eh.e_ehsize = sizeof eh;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = NSEC;
    eh.e_shstrndx = S_SHSTR;
    memcpy(b, &eh, sizeof eh);
    memcpy(b + off_shstr, shstr, sizeof shstr);
    size_t so = 1;
    for (size_t i = 0; i < img->nsyms; i++) {
        const struct sim_sym *s = &img->syms[i];
        Elf64_Sym sym = {0};
        sym.st_name = (Elf64_Word)so;
        int kernel = s->kind == SIM_SYM_KERNEL;
        sym.st_info = ELF64_ST_INFO(STB_GLOBAL, kernel ? STT_FUNC : STT_OBJECT);
        sym.st_other = kernel ? STO_CUDA_ENTRY : 0;
        sym.st_shndx = kernel ? S_TEXT : S_GLOBAL;
        sym.st_size = s->size;
        memcpy(b + off_sym + (i + 1) * sizeof sym, &sym, sizeof sym);
        size_t len = strlen(s->name) + 1;
        memcpy(b + off_str + so, s->name, len);
        so += len;
    }
    char *com = (char *)b + off_com;
    for (size_t i = 0; i < img->ncosts; i++)
        com += snprintf(com, 48 + strlen(img->costs[i].name), "// tgs-sim: cost %s %.9g\n",
                        img->costs[i].name, img->costs[i].factor);
    Elf64_Shdr sh[NSEC] = {{0}};
    sh[S_SHSTR] = (Elf64_Shdr){.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = off_shstr,
                               .sh_size = sizeof shstr, .sh_addralign = 1};
    sh[S_STR] = (Elf64_Shdr){.sh_name = 11, .sh_type = SHT_STRTAB, .sh_offset = off_str,
                             .sh_size = strsz, .sh_addralign = 1};
    sh[S_SYM] = (Elf64_Shdr){.sh_name = 19, .sh_type = SHT_SYMTAB, .sh_offset = off_sym,
                             .sh_size = nsym * sizeof(Elf64_Sym), .sh_link = S_STR,
                             .sh_info = 1, .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym)};
    sh[S_COMMENT] = (Elf64_Shdr){.sh_name = 27, .sh_type = SHT_PROGBITS, .sh_offset = off_com,
                                 .sh_size = (size_t)(com - ((char *)b + off_com)),
                                 .sh_addralign = 1};
    sh[S_TEXT] = (Elf64_Shdr){.sh_name = 36, .sh_type = SHT_PROGBITS, .sh_offset = off_sh,
                              .sh_addralign = 1};
    sh[S_GLOBAL] = (Elf64_Shdr){.sh_name = 42, .sh_type = SHT_NOBITS, .sh_offset = off_sh,
                                .sh_addralign = 8};
    memcpy(b + off_sh, sh, sizeof sh);
    *size_out = total;
    return b;
}
