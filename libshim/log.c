/* libshim/log.c: one-line diagnostics on stderr, prefixed "tgs: ". */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "state.h"

void tgs_log(int level, const char *fmt, ...)
{
    if (level > tgs_g.opt.log_level)
        return;
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "tgs: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < sizeof(buf) - (size_t)n - 1 ? (size_t)m
                                                                       : sizeof(buf) - (size_t)n - 2);
    buf[len++] = '\n';
    /* one write() per line, so lines of concurrent processes do not interleave */
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
