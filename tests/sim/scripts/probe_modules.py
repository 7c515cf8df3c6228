"""Driver-API scenarios run by api_probe.py: the module, library and linker scenarios."""

from __future__ import annotations

import random
import struct
import sys

from probe_common import C, call, get_fn, global_size, load, ok, out, param_layout, setup, u64, vp

PTX = b"""//
.version 8.0
.target sm_90
.address_size 64
.extern .global .align 4 .u32 elsewhere;
.global .align 4 .u32 counter;
.visible .global .align 8 .b8 table[16][4];
.global .v4 .f32 quad;
.const .align 8 .u64 a, b[3];
.visible .const .align 4 .f32 init[3] = {1.0, 2.0, 3.0};
.extern .func helper(.param .u32 x);
.visible .entry first(.param .u64 p)
{
  .reg .u32 %r<2>;
  ld.global.u32 %r1, [counter];
  ret;
}
/* .entry commented_out() */
.entry second()
{
  ret;
}
"""


def scenario_images() -> None:
    setup()
    out["junk"] = load(b"this is not a module image")[0]
    out["empty_text"] = load(b"\n\n")[0]
    out["binary_bytes"] = load(b"\x01\x02\x03\x04garbage")[0]
    out["bad_elf"] = load(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8)[0]
    out["truncated_fatbin"] = load(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 20))[0]
    r, mod = load(PTX)
    out["ptx"] = r
    out["kernels"] = [get_fn(mod, n) for n in (b"first", b"second", b"commented_out", b"helper")]
    out["globals"] = {n: global_size(mod, n.encode())
                      for n in ("counter", "table", "quad", "a", "b", "init", "elsewhere")}
    out["annotated"] = get_fn(load(b"// tgs-sim: cost k 2.0\n")[1], b"k")
    ok("cuModuleUnload", mod)


def scenario_link() -> None:
    setup()
    state, img, size = vp(), vp(), C.c_size_t()
    ok("cuLinkCreate_v2", 0, None, None, C.byref(state))
    a = b".version 8.0\n.target sm_90\n.global .u32 ga[8];\n.entry ka()\n{\nret;\n}\n"
    b = b".version 8.0\n.target sm_90\n// tgs-sim: cost kb 3.0\n.entry kb()\n{\nret;\n}\n"
    ok("cuLinkAddData_v2", state, 1, a, len(a), b"a.ptx", 0, None, None)
    ok("cuLinkAddData_v2", state, 1, b, len(b), b"b.ptx", 0, None, None)
    junk = b"not ptx at all"
    out["add_junk"] = call("cuLinkAddData_v2", state, 1, junk, len(junk), b"j", 0, None, None)
    out["add_object"] = call("cuLinkAddData_v2", state, 3, a, len(a), b"o", 0, None, None)
    ok("cuLinkComplete", state, C.byref(img), C.byref(size))
    cubin = C.string_at(img, size.value)
    out["elf"] = cubin[:4] == b"\x7fELF"
    mod = vp()
    ok("cuModuleLoadData", C.byref(mod), C.c_char_p(cubin))
    out["kernels"] = [get_fn(mod, n) for n in (b"ka", b"kb", b"kc")]
    out["ga"] = global_size(mod, b"ga")
    ok("cuLinkDestroy", state)


def scenario_library() -> None:
    ok("cuInit", 0)
    lib, kern, fn, mod = vp(), vp(), vp(), vp()
    img = b".version 8.0\n.target sm_90\n.global .u64 g[4];\n.entry k1()\n{\nret;\n}\n"
    ok("cuLibraryLoadData", C.byref(lib), C.c_char_p(img), None, None, 0, None, None, 0)
    ok("cuLibraryGetKernel", C.byref(kern), lib, b"k1")
    out["missing_kernel"] = call("cuLibraryGetKernel", C.byref(vp()), lib, b"nope")
    cnt = C.c_uint()
    ok("cuLibraryGetKernelCount", C.byref(cnt), lib)
    out["count"] = cnt.value
    out["function_without_context"] = call("cuKernelGetFunction", C.byref(fn), kern)
    ok("cuKernelSetAttribute", 8, 65536, kern, 0)  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    setup()
    ok("cuKernelGetFunction", C.byref(fn), kern)
    v = C.c_int()
    ok("cuFuncGetAttribute", C.byref(v), 8, fn)
    out["dyn_smem"] = v.value
    d, n = u64(), C.c_size_t()
    ok("cuLibraryGetGlobal", C.byref(d), C.byref(n), lib, b"g")
    out["global_size"] = n.value
    ok("cuLibraryGetModule", C.byref(mod), lib)
    # a CUkernel launches like its function
    out["launch_kernel_handle"] = call("cuLaunchKernel", kern, 1, 1, 1, 32, 1, 1, 0, None,
                                       None, None)
    ok("cuCtxSynchronize")
    ok("cuLibraryUnload", lib)
    out["after_unload"] = call("cuKernelGetFunction", C.byref(fn), kern)


def scenario_params() -> None:
    setup()
    ptx = (b".version 8.0\n.target sm_90\n.visible .entry k(.param .u32 a, .param .u64 b,"
           b" .param .align 16 .b8 c[24], .param .f32 d)\n{\nret;\n}\n.entry none()\n{\nret;\n}\n")
    _, mod = load(ptx)
    fn, fn2 = vp(), vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    ok("cuModuleGetFunction", C.byref(fn2), mod, b"none")
    out["ptx"] = param_layout(fn)
    out["ptx_none"] = param_layout(fn2)
    _, amod = load(b"// tgs-sim: cost k2 1.0\n")
    ok("cuModuleGetFunction", C.byref(fn2), amod, b"k2")
    out["annotated"] = param_layout(fn2)
    if len(sys.argv) > 2:
        data = open(sys.argv[2], "rb").read()
        cmod = vp()
        ok("cuModuleLoadData", C.byref(cmod), C.c_char_p(data))
        ok("cuModuleGetFunction", C.byref(fn), cmod, b"scale")
        out["cubin"] = param_layout(fn)
        lib, kern = vp(), vp()
        ok("cuLibraryLoadData", C.byref(lib), C.c_char_p(data), None, None, 0, None, None, 0)
        ok("cuLibraryGetKernel", C.byref(kern), lib, b"scale")
        out["cubin_kernel"] = param_layout(kern, "cuKernelGetParamInfo")


def scenario_fuzz() -> None:
    """Mutated images through the linker (sizes known): error codes, never a crash."""
    setup()
    ptx = (b".version 8.0\n.target sm_90\n.global .u32 g[4];\n"
           b".visible .entry k(.param .u64 p, .param .u32 n)\n{\nret;\n}\n")
    state, img, size = vp(), vp(), C.c_size_t()
    ok("cuLinkCreate_v2", 0, None, None, C.byref(state))
    ok("cuLinkAddData_v2", state, 1, ptx, len(ptx), b"a", 0, None, None)
    ok("cuLinkComplete", state, C.byref(img), C.byref(size))
    elf = C.string_at(img, size.value)
    ok("cuLinkDestroy", state)
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(elf), 0, 0, 8, 1, 90, 0, 0, 0x11,
                        0, len(elf))
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry) + len(elf)) + entry + elf
    rnd = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    codes: dict[int, int] = {}
    for _ in range(1500):
        kind, seed = rnd.choice(((1, ptx), (0, elf), (2, fatbin)))
        b = bytearray(seed)
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(1, len(b))]
        st = vp()
        ok("cuLinkCreate_v2", 0, None, None, C.byref(st))
        buf = C.create_string_buffer(bytes(b), len(b))
        r = call("cuLinkAddData_v2", st, kind, buf, C.c_size_t(len(b)), b"x", 0, None, None)
        codes[r] = codes.get(r, 0) + 1
        ok("cuLinkDestroy", st)
    out["codes"] = sorted(codes)
