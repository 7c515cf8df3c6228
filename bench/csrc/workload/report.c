/*
 * JSON lines on stdout (one object per line, flushed at once so a harness
 * reading a pipe sees progress live) and fatal error reports.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

static void wl_json_raw(struct wl_json *j, const char *s)
{
    size_t n = strlen(s);
    /* Keep room for the closing braces; a line that long is a bug anyway. */
    if (j->len + n + 8 >= sizeof j->buf)
        return;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void wl_json_quoted(struct wl_json *j, const char *s)
{
    char esc[8];
    wl_json_raw(j, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            esc[2] = '\0';
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            esc[1] = '\0';
        }
        wl_json_raw(j, esc);
    }
    wl_json_raw(j, "\"");
}

static void wl_json_key(struct wl_json *j, const char *key)
{
    if (!j->first)
        wl_json_raw(j, ",");
    j->first = 0;
    wl_json_quoted(j, key);
    wl_json_raw(j, ":");
}

void wl_json_begin(struct wl_json *j, const char *type, const char *name)
{
    j->len = 0;
    j->buf[0] = '\0';
    j->first = 1;
    wl_json_raw(j, "{");
    wl_json_str(j, "type", type);
    wl_json_str(j, "name", name);
}

void wl_json_str(struct wl_json *j, const char *key, const char *val)
{
    wl_json_key(j, key);
    if (val)
        wl_json_quoted(j, val);
    else
        wl_json_raw(j, "null");
}

void wl_json_int(struct wl_json *j, const char *key, long long val)
{
    char num[32];
    snprintf(num, sizeof num, "%lld", val);
    wl_json_key(j, key);
    wl_json_raw(j, num);
}

void wl_json_uint(struct wl_json *j, const char *key, unsigned long long val)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", val);
    wl_json_key(j, key);
    wl_json_raw(j, num);
}

void wl_json_num(struct wl_json *j, const char *key, double val)
{
    char num[40];
    if (isfinite(val))
        snprintf(num, sizeof num, "%.9g", val);
    else
        snprintf(num, sizeof num, "null");
    wl_json_key(j, key);
    wl_json_raw(j, num);
}

void wl_json_bool(struct wl_json *j, const char *key, int val)
{
    wl_json_key(j, key);
    wl_json_raw(j, val ? "true" : "false");
}

void wl_json_obj_begin(struct wl_json *j, const char *key)
{
    wl_json_key(j, key);
    wl_json_raw(j, "{");
    j->first = 1;
}

void wl_json_obj_end(struct wl_json *j)
{
    wl_json_raw(j, "}");
    j->first = 0;
}

void wl_json_emit(struct wl_json *j)
{
    wl_json_raw(j, "}");
    fputs(j->buf, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static void __attribute__((noreturn)) wl_die_msg(const struct wl_run *run, const char *call, const char *result,
                       long long code, const char *msg)
{
    struct wl_json j;
    fprintf(stderr, "tgs-workload: error: %s\n", msg);
    fflush(stderr);
    wl_json_begin(&j, "error", run ? run->cfg.name : NULL);
    wl_json_str(&j, "error", msg);
    if (call) {
        wl_json_str(&j, "call", call);
        wl_json_str(&j, "result", result);
        wl_json_int(&j, "code", code);
    }
    wl_json_emit(&j);
    exit(WL_EXIT_FAIL);
}

void wl_die_cu(const struct wl_run *run, const char *call, CUresult rc)
{
    const char *name = NULL;
    const char *text = NULL;
    char fallback[32];
    char msg[512];
    if (run->drv.get_error_name && run->drv.get_error_name(rc, &name) != CUDA_SUCCESS)
        name = NULL;
    if (run->drv.get_error_string && run->drv.get_error_string(rc, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name) {
        snprintf(fallback, sizeof fallback, "CUresult %d", (int)rc);
        name = fallback;
    }
    if (text)
        snprintf(msg, sizeof msg, "%s failed: %s (%s)", call, name, text);
    else
        snprintf(msg, sizeof msg, "%s failed: %s", call, name);
    wl_die_msg(run, call, name, (long long)rc, msg);
}

void wl_die(const struct wl_run *run, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wl_die_msg(run, NULL, NULL, 0, msg);
}
