"""The dq_accum layouts of the attention backward (csrc/dq_accum.cuh), compiled as host code with nvcc: the
frag64 offset that bwd_dq_convert_kernel reads back is exactly where the Hopper backward adds
each accumulator value (thread tid's register r at (r / 4) * 512 + 4 tid + r % 4, wgmma's D layout), a
permutation of the 64 x 64 block; and xor32's is one of its 32 x 32 block."""
import subprocess

from host_code import compile_host_program

HOST_PROGRAM = r'''
#include <cstdio>
#include "dq_accum.cuh"
int main() {  // 'f r c offset' for every element of a frag64 block, then 'x r c offset' of an xor32 block
  for (int r = 0; r < 64; r++)
    for (int c = 0; c < 64; c++) printf("f %d %d %d\n", r, c, tk_attn::frag64_offset(r, c));
  for (int r = 0; r < 32; r++)
    for (int c = 0; c < 32; c++) printf("x %d %d %d\n", r, c, tk_attn::xor32_offset(r, c));
  return 0;
}
'''


def wgmma_d_position(tid: int, reg: int) -> tuple[int, int]:
    """(row, col) of register reg of warpgroup thread tid in an m64nN fp32 wgmma accumulator (the PTX ISA's
    D-fragment figure): warp w = tid / 32 holds rows 16 w ..; lane l: row 16 w + l / 4 (+ 8 for registers
    2, 3 of each group of 4), column 8 (reg / 4) + 2 (l % 4) + reg % 2."""
    w, lane = divmod(tid, 32)
    return 16 * w + lane // 4 + (8 if reg & 2 else 0), 8 * (reg // 4) + 2 * (lane % 4) + (reg & 1)


def _offsets(tmp_path) -> tuple[dict, dict]:
    """{(row, col): offset} of a frag64 block and of an xor32 block, as the host program prints them."""
    exe = compile_host_program(tmp_path, "offsets", HOST_PROGRAM, "attention")
    frag, xor = {}, {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        kind, r, c, off = line.split()
        (frag if kind == "f" else xor)[int(r), int(c)] = int(off)
    return frag, xor


def test_frag64_and_xor32_offsets(tmp_path):
    frag, xor = _offsets(tmp_path)
    assert len(frag) == 64 * 64 and len(xor) == 32 * 32
    # the staging: thread tid stores its registers 4 r' .. 4 r' + 3 as one float4 at (r' * 128 + tid) * 4
    for tid in range(128):
        for reg in range(32):
            assert frag[wgmma_d_position(tid, reg)] == (reg // 4) * 512 + 4 * tid + reg % 4, (tid, reg)
    assert sorted(frag.values()) == list(range(4096))
    assert sorted(xor.values()) == list(range(1024))
    # xor32 permutes whole groups of 8 within a row (bwd_dq_convert_kernel's two 16-byte loads rely on it)
    for r in range(32):
        for c in range(0, 32, 8):
            base = xor[r, c]
            assert base // 32 == r and base % 8 == 0 and all(xor[r, c + e] == base + e for e in range(8))


def test_frag64_blocks_of_the_one_consumer_dq(tmp_path):
    """The Hopper backward's dQ (session 40: one consumer computes a query block's whole dQ = dS K, an m64nD
    accumulator, rows = queries, columns = head dims) is added in register order (thread tid's float4 r' at
    (r' * 128 + tid) * 4 floats, add_frag64 / store_frag64_warp) over the block's D / 64 contiguous frag64 blocks:
    every value of query row, dim col must land where dq_accum keeps (row, col), block col / 64 (4096 floats each)
    at frag64_offset(row, col % 64)."""
    frag = _offsets(tmp_path)[0]
    for D in (64, 128):
        seen = set()
        for tid in range(128):
            for reg in range(D // 2):  # an m64nD accumulator: D / 2 registers a thread
                row, col = wgmma_d_position(tid, reg)
                assert col < D
                off = (reg // 4) * 512 + 4 * tid + reg % 4
                assert (col // 64) * 4096 + frag[row, col % 64] == off, (D, tid, reg)
                seen.add(off)
        assert seen == set(range(64 * D))


def test_convert_reads_of_frag64(tmp_path):
    """bwd_dq_convert_kernel reads dims col .. col + 7 (col a multiple of 8) of query t as 4 float2 loads, the e-th
    at float offset frag64_offset(t, col) + 4 e: dims 2e, 2e + 1 of the chunk must be there."""
    frag = _offsets(tmp_path)[0]
    for t in range(64):
        for col in range(0, 64, 8):
            base = frag[t, col]
            assert base % 2 == 0  # 8-byte aligned
            for e in range(4):
                assert (frag[t, col + 2 * e], frag[t, col + 2 * e + 1]) == (base + 4 * e, base + 4 * e + 1), (t, col, e)
