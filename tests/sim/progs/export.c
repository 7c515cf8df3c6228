/*
 * export.c: the CUDA runtime's private tables (cuGetExportTable), driven as
 * cudart drives them.  Prints one "key value..." line per fact; the test
 * (tests/sim/test_sim_export_tables.py) checks them, and recomputes the
 * integrity digest from the printed facts with its own HMAC-MD2.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tgs/cuda_abi.h"

static const void *const *table(const char *hex)
{
    CUuuid id;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        id.bytes[i] = (char)v;
    }
    const void *t = (const void *)1;
    CUresult r = cuGetExportTable(&t, &id);
    printf("table %.8s %d %s\n", hex, (int)r, t ? "set" : "null");
    return r == CUDA_SUCCESS ? (const void *const *)t : NULL;
}

static int dtor_calls;
static void dtor(CUcontext c, void *key, void *value)
{
    (void)c;
    if (key == (void *)0x11 && value == (void *)0x22)
        dtor_calls++;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cuInit(0))
        return 2;
    table("00000000000000000000000000000000"); /* unknown: INVALID_VALUE, NULL */
    const void *const *rt = table("6bd5fb6c5bf4e74a8987d93912fd9df9");
    const void *const *cls = table("c693336e1121df11a8c368f355d89593");
    const void *const *ic = table("d4082055bde6704b8d34ba123c66e1f2");
    const void *const *tls = table("42d85a8123f6cb478298f6e78a3aecdc");
    const void *const *cid = table("21318c60971432488ca641ff7324c8f2");
    if (!rt || !cls || !ic || !tls)
        return 2;
    CUresult r;
    printf("cudart_size %zu\n", (size_t)(uintptr_t)rt[0]);

    /* slot 2: the primary context, the same on every call, and the runtime's reference
     * keeps it when the program releases its own */
    CUresult (*primary)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))rt[2];
    CUcontext c1 = NULL, c2 = NULL, p = NULL;
    cuDevicePrimaryCtxRetain(&p, 0);
    r = primary(&c1, 0);
    printf("primary %d %d\n", (int)r, (int)primary(&c2, 0));
    printf("primary_same %d %d\n", c1 == c2, c1 == p);
    unsigned int pflags = 0;
    int active = 0;
    cuDevicePrimaryCtxRelease_v2(0);
    cuDevicePrimaryCtxGetState(0, &pflags, &active);
    printf("primary_kept %d\n", active);
    cuCtxSetCurrent(c1);

    /* slot 1: a module from nvcc's fatbin wrapper around a fatbin around PTX */
    static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                              ".visible .entry k1()\n{\n    ret;\n}\n";
    static unsigned char fatbin[16 + 64 + sizeof ptx];
    uint32_t magic = 0xBA55ED50u;
    uint16_t ver = 1, hsize = 16, kind = 1; /* kind 1: PTX */
    uint32_t ehsize = 64, arch = 70;
    uint64_t fsize = 64 + sizeof ptx;
    memcpy(fatbin, &magic, 4);
    memcpy(fatbin + 4, &ver, 2);
    memcpy(fatbin + 6, &hsize, 2);
    memcpy(fatbin + 8, &fsize, 8);
    unsigned char *e = fatbin + 16;
    uint64_t payload = sizeof ptx;
    memcpy(e, &kind, 2);
    memcpy(e + 2, &ver, 2);
    memcpy(e + 4, &ehsize, 4);
    memcpy(e + 8, &payload, 8);
    memcpy(e + 28, &arch, 4);
    memcpy(e + 64, ptx, sizeof ptx);
    struct { uint32_t magic, version; const void *data, *unused; } wrapper = {
        0x466243B1u, 1, fatbin, NULL};
    CUresult (*from_wrapper)(CUmodule *, const void *) = (CUresult(*)(CUmodule *, const void *))rt[1];
    CUmodule m = NULL;
    CUfunction f = NULL;
    r = from_wrapper(&m, &wrapper);
    printf("module_wrapper %d %d\n", (int)r, r ? -1 : (int)cuModuleGetFunction(&f, m, "k1"));
    CUresult (*from_fatbin)(const void *, CUmodule *, void *, void *, unsigned) =
        (CUresult(*)(const void *, CUmodule *, void *, void *, unsigned))rt[8];
    m = NULL;
    r = from_fatbin(fatbin, &m, NULL, NULL, 0);
    printf("module_fatbin %d %d\n", (int)r, r ? -1 : (int)cuModuleGetFunction(&f, m, "k1"));

    /* context-local storage */
    CUresult (*put)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *)) =
        (CUresult(*)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *)))cls[0];
    CUresult (*del)(CUcontext, void *) = (CUresult(*)(CUcontext, void *))cls[1];
    CUresult (*get)(void **, CUcontext, void *) = (CUresult(*)(void **, CUcontext, void *))cls[2];
    void *v = NULL;
    printf("cls_missing %d\n", (int)get(&v, NULL, (void *)0x11));
    printf("cls_put %d\n", (int)put(NULL, (void *)0x11, (void *)0x22, dtor));
    r = get(&v, c1, (void *)0x11);
    printf("cls_get %d %d\n", (int)r, v == (void *)0x22);
    printf("cls_put2 %d\n", (int)put(c1, (void *)0x33, (void *)0x44, NULL));
    r = del(NULL, (void *)0x33);
    printf("cls_del %d %d\n", (int)r, (int)get(&v, NULL, (void *)0x33));

    /* tools TLS slot 2: the current context; context id slot 4 = cuCtxGetId */
    CUresult (*tls_ctx)(CUcontext *) = (CUresult(*)(CUcontext *))tls[2];
    CUcontext cur = NULL;
    r = tls_ctx(&cur);
    printf("tls_ctx %d %d\n", (int)r, cur == c1);
    if (cid) {
        CUresult (*ctx_id)(CUcontext, unsigned long long *) =
            (CUresult(*)(CUcontext, unsigned long long *))cid[4];
        unsigned long long a = 0, b = 0;
        cuCtxGetId(c1, &b);
        r = ctx_id(c1, &a);
        printf("ctx_id %d %d\n", (int)r, a == b && a != 0);
    }

    /* the integrity digest and the facts it covers */
    CUresult (*check)(uint32_t, uint64_t, uint64_t *) = (CUresult(*)(uint32_t, uint64_t, uint64_t *))ic[1];
    uint64_t d[2] = {0, 0}, d0[2] = {0, 0};
    r = check(13002, 1764547200ull, d);
    check(13000, 1764547200ull, d0);
    int drv = 0;
    cuDriverGetVersion(&drv);
    printf("digest %d %016llx%016llx\n", (int)r, (unsigned long long)d[0], (unsigned long long)d[1]);
    printf("digest_v0 %016llx%016llx\n", (unsigned long long)d0[0], (unsigned long long)d0[1]);
    printf("facts %d %u %u %llu %llu %llu\n", drv, (unsigned)getpid(),
           (unsigned)(uintptr_t)pthread_self(), (unsigned long long)(uintptr_t)rt,
           (unsigned long long)(uintptr_t)ic, (unsigned long long)(uintptr_t)ic[1]);
    int n = 0;
    cuDeviceGetCount(&n);
    for (int i = 0; i < n; i++) {
        CUuuid u;
        int dom = 0, bus = 0, dev = 0;
        cuDeviceGetUuid_v2(&u, i);
        cuDeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, i);
        cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i);
        cuDeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, i);
        printf("device ");
        for (int k = 0; k < 16; k++)
            printf("%02x", (unsigned char)u.bytes[k]);
        printf(" %d %d %d\n", dom, bus, dev);
    }

    /* the context's destructors run when it goes */
    cuDevicePrimaryCtxReset_v2(0);
    printf("dtor_calls %d\n", dtor_calls);
    return 0;
}
