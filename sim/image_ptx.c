/*
 * image_ptx.c: PTX text.  Kernels are the `.entry` names, globals the
 * `.global` and `.const` variables (size = element size x vector width x
 * array extents).  Declarations marked `.extern` define nothing.  Text
 * without a `.version` directive, a kernel or a cost annotation is not
 * PTX: CUDA_ERROR_INVALID_IMAGE, as is text with binary bytes.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "sim.h"

struct lexer {
    const char *p, *end;
};

static int is_id(int c)
{
    return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.';
}

/* Next token: an identifier/directive run or one punctuation character. */
static int next_tok(struct lexer *lx, const char **t, size_t *n)
{
    while (lx->p < lx->end && isspace((unsigned char)*lx->p))
        lx->p++;
    if (lx->p >= lx->end)
        return 0;
    *t = lx->p;
    if (is_id((unsigned char)*lx->p)) {
        while (lx->p < lx->end && is_id((unsigned char)*lx->p))
            lx->p++;
    } else {
        lx->p++;
    }
    *n = (size_t)(lx->p - *t);
    return 1;
}

static int tok_is(const char *t, size_t n, const char *s)
{
    return strlen(s) == n && !memcmp(t, s, n);
}

static uint64_t type_size(const char *t, size_t n)
{
    if (n < 3 || t[0] != '.')
        return 0;
    if (strchr("busf", t[1]) && n <= 4) {
        long bits = strtol(t + 2, NULL, 10);
        if (bits == 8 || bits == 16 || bits == 32 || bits == 64)
            return (uint64_t)bits / 8;
    }
    if (tok_is(t, n, ".pred"))
        return 1;
    return 0;
}

/* A .global/.const declaration, after the state-space token. */
static int parse_var(struct lexer *lx, struct sim_image *out)
{
    const char *t;
    size_t n;
    uint64_t elem = 0, vec = 1;
    while (next_tok(lx, &t, &n)) {
        if (tok_is(t, n, ";"))
            return 0;
        if (tok_is(t, n, ".align")) {
            next_tok(lx, &t, &n);
            continue;
        }
        if (tok_is(t, n, ".v2") || tok_is(t, n, ".v4") || tok_is(t, n, ".v8")) {
            vec = (uint64_t)(t[2] - '0');
            continue;
        }
        if (t[0] == '.') {
            uint64_t s = type_size(t, n);
            if (s)
                elem = s;
            else if (tok_is(t, n, ".texref") || tok_is(t, n, ".samplerref") ||
                     tok_is(t, n, ".surfref"))
                elem = 8;
            continue;
        }
        if (!elem || !(isalpha((unsigned char)t[0]) || t[0] == '_' || t[0] == '$'))
            return 0; /* not a variable we understand: skip */
        /* name [dims]... [= init] [, name ...] ; */
        for (;;) {
            const char *name = t;
            size_t len = n;
            uint64_t count = 1;
            int more = 0;
            while (next_tok(lx, &t, &n)) {
                if (tok_is(t, n, "[")) {
                    const char *d;
                    size_t dn;
                    if (!next_tok(lx, &d, &dn))
                        return 0;
                    if (!tok_is(d, dn, "]")) {
                        count *= strtoull(d, NULL, 0);
                        next_tok(lx, &d, &dn); /* ] */
                    }
                    continue;
                }
                if (tok_is(t, n, ",")) {
                    more = 1;
                    break;
                }
                if (tok_is(t, n, ";") || tok_is(t, n, "="))
                    break;
            }
            if (sim_image_add(out, name, len, SIM_SYM_GLOBAL, elem * vec * count))
                return -1;
            if (tok_is(t, n, "=")) { /* skip the initialiser */
                while (next_tok(lx, &t, &n) && !tok_is(t, n, ";"))
                    ;
                return 0;
            }
            if (!more || !next_tok(lx, &t, &n))
                return 0;
        }
    }
    return 0;
}

/* After `.entry name`: the parameter list "( .param [.align N] .type p[dims], ... )",
 * laid out as the compiler does (each aligned to its alignment). */
static int parse_params(struct lexer *lx, struct sim_image *out, const char *name, size_t len)
{
    const char *t;
    size_t n;
    struct lexer save = *lx;
    sim_image_params_known(out, name, len); /* even with no list: none */
    if (!next_tok(lx, &t, &n) || !tok_is(t, n, "(")) {
        *lx = save;
        return 0;
    }
    uint32_t index = 0, offset = 0;
    uint64_t elem = 0, align = 0, count = 1;
    int in_param = 0;
    while (next_tok(lx, &t, &n)) {
        if (tok_is(t, n, ")") || tok_is(t, n, ",")) {
            if (in_param && elem) {
                uint64_t a = align ? align : elem;
                offset = (uint32_t)((offset + a - 1) / a * a);
                uint64_t size = elem * count;
                if (sim_image_param(out, name, len, index++, offset, (uint32_t)size))
                    return -1;
                offset += (uint32_t)size;
            }
            in_param = 0;
            elem = align = 0;
            count = 1;
            if (tok_is(t, n, ")"))
                return 0;
            continue;
        }
        if (tok_is(t, n, ".param")) {
            in_param = 1;
        } else if (tok_is(t, n, ".align")) {
            const char *v;
            size_t vn;
            if (next_tok(lx, &v, &vn))
                align = strtoull(v, NULL, 10);
        } else if (tok_is(t, n, "[")) {
            const char *v;
            size_t vn;
            if (next_tok(lx, &v, &vn) && !tok_is(v, vn, "]")) {
                count *= strtoull(v, NULL, 0);
                next_tok(lx, &v, &vn); /* ] */
            }
        } else if (t[0] == '.' && type_size(t, n)) {
            elem = type_size(t, n);
        }
    }
    return 0;
}

static void strip_comments(char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] == '/' && s[i + 1] == '/') {
            while (i < n && s[i] != '\n')
                s[i++] = ' ';
        } else if (s[i] == '/' && s[i + 1] == '*') {
            s[i] = s[i + 1] = ' ';
            for (i += 2; i < n && !(i + 1 < n && s[i] == '*' && s[i + 1] == '/'); i++)
                if (s[i] != '\n')
                    s[i] = ' ';
            if (i + 1 < n)
                s[i] = s[i + 1] = ' ';
        } else if (s[i] == '"') {
            for (i++; i < n && s[i] != '"' && s[i] != '\n'; i++)
                ;
        }
    }
}

CUresult sim_image_ptx(const char *text, size_t n, struct sim_image *out)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\f' && c != '\v')
            return CUDA_ERROR_INVALID_IMAGE;
    }
    sim_image_scan_costs(out, (const unsigned char *)text, n);
    char *s = malloc(n + 1);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(s, text, n);
    s[n] = 0;
    strip_comments(s, n);
    struct lexer lx = {s, s + n};
    const char *t;
    size_t tn;
    int version = 0, ext = 0, stmt_start = 1, depth = 0;
    CUresult r = CUDA_SUCCESS;
    while (r == CUDA_SUCCESS && next_tok(&lx, &t, &tn)) {
        int start = stmt_start;
        stmt_start = tok_is(t, tn, ";") || tok_is(t, tn, "{") || tok_is(t, tn, "}");
        if (tok_is(t, tn, "{"))
            depth++;
        else if (tok_is(t, tn, "}"))
            depth--;
        if (tok_is(t, tn, ".version")) {
            version = 1;
            stmt_start = 1;
        } else if (tok_is(t, tn, ".extern")) {
            ext = 1;
            stmt_start = start;
        } else if (tok_is(t, tn, ".visible") || tok_is(t, tn, ".weak")) {
            stmt_start = start;
        } else if (tok_is(t, tn, ".entry")) {
            const char *name;
            size_t len;
            if (!next_tok(&lx, &name, &len))
                break;
            if (!ext && (sim_image_add(out, name, len, SIM_SYM_KERNEL, 0) ||
                         parse_params(&lx, out, name, len)))
                r = CUDA_ERROR_OUT_OF_MEMORY;
            ext = 0;
        } else if (depth == 0 && (tok_is(t, tn, ".global") || tok_is(t, tn, ".const"))) {
            if (ext) { /* a declaration of someone else's variable */
                while (next_tok(&lx, &t, &tn) && !tok_is(t, tn, ";"))
                    ;
                stmt_start = 1;
            } else if (parse_var(&lx, out)) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                stmt_start = 1;
            }
            ext = 0;
        } else if (stmt_start) {
            ext = 0;
        }
    }
    free(s);
    if (r != CUDA_SUCCESS)
        return r;
    /* The project's own test images declare kernels only by annotation. */
    for (size_t i = 0; i < out->ncosts; i++)
        if (sim_image_add(out, out->costs[i].name, strlen(out->costs[i].name), SIM_SYM_KERNEL,
                          0))
            return CUDA_ERROR_OUT_OF_MEMORY;
    if (!version && !out->nsyms)
        return CUDA_ERROR_INVALID_IMAGE;
    return CUDA_SUCCESS;
}
