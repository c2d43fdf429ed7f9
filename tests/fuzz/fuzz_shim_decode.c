/* Fuzzes the shim's parameter decoders with arbitrary bytes: RM escape
 * blocks (first byte: the escape number), UVM range blocks, UVM map blocks in
 * both layouts, driver version texts, and the 64 KiB alignment arithmetic. */
#include "driverabi/uvm_abi.h"
#include "shim/shim_decode.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t sel = data[0];
    data++;
    size--;
    switch (sel % 5) {
    case 0: { /* RM block: escape number, then the block itself */
        unsigned nr = data[0];
        size_t n = size - 1;
        unsigned char *block = malloc(n ? n : 1);
        memcpy(block, data + 1, n);
        gdu_rm_call c;
        if (gdu_rm_call_decode(nr, block, n, &c) && c.op == 0)
            abort(); /* a decoded call always has an operation */
        free(block);
        break;
    }
    case 1: { /* UVM_FREE / UVM_UNMAP_EXTERNAL */
        unsigned long request = data[0] & 1 ? GDU_UVM_FREE : GDU_UVM_UNMAP_EXTERNAL;
        size_t need = gdu_uvm_watched_size(request, NULL);
        unsigned char *block = calloc(1, need);
        memcpy(block, data + 1, size - 1 < need ? size - 1 : need);
        gdu_uvm_range r;
        gdu_uvm_range_decode(request, block, &r);
        free(block);
        break;
    }
    case 2: { /* UVM_MAP_EXTERNAL_ALLOCATION in the layout of an old or a new driver */
        gdu_uvm_layout l;
        char why[200];
        if (gdu_uvm_layout_for_driver(data[0] & 1 ? "580.159.04" : "535.288.01", &l, why,
                                      sizeof why) != 0)
            abort();
        unsigned char *block = calloc(1, l.size);
        memcpy(block, data + 1, size - 1 < l.size ? size - 1 : l.size);
        gdu_uvm_map_external m;
        gdu_uvm_map_external_read(&l, block, &m);
        free(block);
        break;
    }
    case 3: { /* driver version text */
        char *text = strndup((const char *)data, size);
        if (text == NULL)
            return 0;
        unsigned v[3];
        gdu_uvm_layout l;
        char why[200];
        int parsed = gdu_nv_driver_version_parse(text, v);
        int known = gdu_uvm_layout_for_driver(text, &l, why, sizeof why);
        if (known == 0 && (parsed != 0 || (l.max_gpus != 32 && l.max_gpus != 256)))
            abort();
        free(text);
        break;
    }
    default: { /* alignment */
        uint64_t in[3] = {0, 0, 0}, a, s, o;
        memcpy(in, data, size < sizeof in ? size : sizeof in);
        if (gdu_vidmem_aligned_part(in[0], in[1], in[2], &a, &s, &o)) {
            const uint64_t m = 0xffff;
            if ((a & m) || (s & m) || (o & m) || s == 0 || a < in[0] || s > in[1] ||
                a - in[0] + s > in[1] || o - in[2] != a - in[0])
                abort();
        }
        break;
    }
    }
    return 0;
}
