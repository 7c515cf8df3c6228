/* Each argument through tgs/size.h: one line "SIZE LIMIT" per argument, each a number of
 * bytes, "error" (refused) or, for LIMIT, "unlimited" (tests/abi/test_size_grammar.py). */
#include <inttypes.h>
#include <stdio.h>

#include "tgs/size.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        uint64_t size = 0, limit = 0;
        if (tgs_size_parse(argv[i], &size) == 0)
            printf("%" PRIu64, size);
        else
            printf("error");
        if (tgs_limit_parse(argv[i], &limit) != 0)
            printf(" error\n");
        else if (limit == TGS_SIZE_UNLIMITED)
            printf(" unlimited\n");
        else
            printf(" %" PRIu64 "\n", limit);
    }
    return 0;
}
