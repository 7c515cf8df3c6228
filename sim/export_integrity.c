/*
 * export_integrity.c: the CUDA runtime's start-up check (the INTEGRITY_CHECK
 * export table).  cudart hands the driver a version and the time; the driver
 * answers a keyed digest of facts about the process and its devices, which
 * cudart recomputes and compares, refusing to start on a mismatch.
 *
 * Public facts (the ZLUDA project's description of the table): the digest is
 * HMAC (RFC 2104) over MD2 (RFC 1319, block size 16) with a fixed 16-byte key;
 * the message is one record {driver version, the version asked, pid, thread,
 * the CUDART_INTERFACE and INTEGRITY_CHECK tables' addresses, the check
 * function's address, the time}, then one record per visible device {UUID,
 * PCI domain, bus, device}.  Versions ending in 0 or 1 get fixed answers.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "export_tables.h"
#include "sim.h"

/* RFC 1319's substitution table (digits of pi). */
static const uint8_t md2_s[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,
    98,  167, 5,   243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202,
    30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,  138, 23,  229, 18,
    190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122,
    169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,
    128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151, 3,
    255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198,
    79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241,
    69,  157, 112, 89,  100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,
    27,  96,  37,  173, 174, 176, 185, 246, 28,  70,  97,  105, 52,  64,  126, 15,
    85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,
    106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,
    120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,
    242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,
    49,  68,  80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

struct md2 {
    uint8_t x[48];   /* state, block, state ^ block */
    uint8_t sum[16]; /* checksum */
    uint8_t last;    /* the checksum's running byte (L) */
    unsigned n;      /* bytes of the current block */
};

static void md2_compress(struct md2 *h)
{
    unsigned t = 0;
    for (unsigned round = 0; round < 18; round++) {
        for (unsigned k = 0; k < 48; k++)
            t = h->x[k] ^= md2_s[t];
        t = (t + round) & 0xff;
    }
}

static void md2_byte(struct md2 *h, uint8_t b, int checksum)
{
    h->x[16 + h->n] = b;
    h->x[32 + h->n] = (uint8_t)(b ^ h->x[h->n]);
    if (checksum)
        h->last = h->sum[h->n] ^= md2_s[b ^ h->last];
    if (++h->n == 16) {
        h->n = 0;
        md2_compress(h);
    }
}

static void md2_update(struct md2 *h, const void *p, size_t len, uint8_t mask)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        md2_byte(h, b[i] ^ mask, 1);
}

static void md2_final(struct md2 *h, uint8_t out[16])
{
    uint8_t pad = (uint8_t)(16 - h->n);
    for (unsigned i = 0; i < pad; i++)
        md2_byte(h, pad, 1);
    uint8_t sum[16];
    memcpy(sum, h->sum, sizeof sum);
    for (unsigned i = 0; i < 16; i++)
        md2_byte(h, sum[i], 0);
    memcpy(out, h->x, 16);
}

/* The key the runtime's check uses (a fact about cudart, not a secret of ours). */
static const uint8_t hmac_key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                     0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

struct integrity_facts {
    uint32_t driver_version;
    uint32_t version;
    uint32_t pid;
    uint32_t thread;
    const void *cudart_table;
    const void *integrity_table;
    const void *check_fn;
    uint64_t unix_seconds;
};

struct integrity_device {
    CUuuid uuid;
    int32_t pci_domain, pci_bus, pci_device;
};

_Static_assert(sizeof(struct integrity_facts) == 48, "the runtime hashes 48 bytes of facts");
_Static_assert(sizeof(struct integrity_device) == 28, "the runtime hashes 28 bytes a device");

static CUresult device_record(CUdevice d, struct integrity_device *rec)
{
    memset(rec, 0, sizeof *rec);
    CUresult r = cuDeviceGetUuid_v2(&rec->uuid, d);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetAttribute(&rec->pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetAttribute(&rec->pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetAttribute(&rec->pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
    return r;
}

CUresult sim_integrity_digest(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    static const uint64_t fixed[2][2] = {
        {0x3341181C03CB675CULL, 0x8ED383AA1F4CD1E8ULL},
        {0x1841181C03CB675CULL, 0x8ED383AA1F4CD1E8ULL},
    };
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 < 2) {
        memcpy(out, fixed[version % 10], 16);
        return CUDA_SUCCESS;
    }
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    int driver = 0;
    cuDriverGetVersion(&driver);
    struct integrity_facts facts = {
        .driver_version = (uint32_t)driver,
        .version = version,
        .pid = (uint32_t)getpid(),
        .thread = (uint32_t)(uintptr_t)pthread_self(),
        .cudart_table = sim_export_table_address(SIM_EXPORT_CUDART_INTERFACE),
        .integrity_table = sim_export_table_address(SIM_EXPORT_INTEGRITY_CHECK),
        .check_fn = sim_export_table_address(SIM_EXPORT_INTEGRITY_CHECK)[1],
        .unix_seconds = unix_seconds,
    };
    struct md2 h = {0};
    md2_update(&h, hmac_key, sizeof hmac_key, 0x36);
    md2_update(&h, &facts, sizeof facts, 0);
    for (int d = 0; d < sim_nvis(); d++) {
        struct integrity_device rec;
        r = device_record(d, &rec);
        if (r != CUDA_SUCCESS)
            return r;
        md2_update(&h, &rec, sizeof rec, 0);
    }
    uint8_t inner[16];
    md2_final(&h, inner);
    memset(&h, 0, sizeof h);
    md2_update(&h, hmac_key, sizeof hmac_key, 0x5c);
    md2_update(&h, inner, sizeof inner, 0);
    uint8_t digest[16];
    md2_final(&h, digest);
    memcpy(out, digest, 16);
    return CUDA_SUCCESS;
}
