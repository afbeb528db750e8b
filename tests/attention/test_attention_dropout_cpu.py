"""The attention dropout without a GPU: Philox4x32-10 against Random123's published known-answer
vectors (the attention's DROPOUT_ROUNDS, C++ against Python, and 7 rounds, the same rounds stopped earlier), the Python keep
mask (tk_kernels/families/attention/dropout_reference.py) against the kernels' own C++ keep function
compiled as host code (csrc/dropout.cuh, with nvcc), the mask's statistics, and the argument checks of
the Python API."""

import random
import re
import subprocess

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tk_kernels.families.attention import dropout_reference as ref
from tk_kernels.families.attention import ops as tka
from host_code import compile_host_program

# Random123 kat_vectors, the three "philox4x32 10" lines: counter, key, result
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_python_philox_known_answers(ctr, key, want):
    assert ref.philox4x32_10(ctr, key) == want
    got = ref.philox4x32_10_tensor([torch.tensor([c]) for c in ctr], *key)
    assert tuple(int(w) for w in got) == want


def test_threshold():
    assert ref.threshold(0.0) == 0 and ref.threshold(0.5) == 32768
    assert ref.threshold(0.2) == 13107 and ref.threshold(0.1) == 6554
    assert ref.threshold(0.99999999) == 65535  # capped: every p < 1 keeps something


def _host_program(tmp_path):
    """The C++ keep function (csrc/dropout.cuh) and Philox (include/common/philox.cuh) compiled
    as host code; reads lines 'seed offset threshold bh q k', prints 'keep w0 w1 w2 w3'."""
    return compile_host_program(tmp_path, "keep", r'''
#include <cstdio>
#include "dropout.cuh"
int main() {
  using namespace tk_attn;
  for (int i = 0; i < 3; i++) {  // the KAT vectors
    const tk::philox4 c[3] = {{0, 0, 0, 0}, {~0u, ~0u, ~0u, ~0u}, {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    const uint32_t k[3][2] = {{0, 0}, {~0u, ~0u}, {0xa4093822u, 0x299f31d0u}};
    const tk::philox4 r = tk::philox4x32_10(c[i], k[i][0], k[i][1]);
    printf("kat %08x %08x %08x %08x\n", r.x, r.y, r.z, r.w);
    const tk::philox4 ra = tk::philox4x32<DROPOUT_ROUNDS>(c[i], k[i][0], k[i][1]);
    printf("attention %08x %08x %08x %08x\n", ra.x, ra.y, ra.z, ra.w);
    const tk::philox4 r7 = tk::philox4x32<7>(c[i], k[i][0], k[i][1]);
    printf("seven %08x %08x %08x %08x\n", r7.x, r7.y, r7.z, r7.w);
  }
  unsigned long long seed, offset;
  unsigned thr;
  int bh, q, k;
  while (scanf("%llu %llu %u %d %d %d", &seed, &offset, &thr, &bh, &q, &k) == 6) {
    const dropout_key d = make_dropout_key(seed, offset, thr);
    const tk::philox4 r = dropout_group(d, bh, q, k);
    printf("%d %u %u %u %u\n", int(dropout_keep(d, bh, q, k)), r.x, r.y, r.z, r.w);
  }
  printf("threshold %u %u %u\n", dropout_threshold(0.2f), dropout_threshold(0.5f), dropout_threshold(0.99999999f));
  return 0;
}
''', "attention")


def test_cpp_keep_function_matches_python(tmp_path):
    exe = _host_program(tmp_path)
    rnd = random.Random(1234)
    cases = []
    for _ in range(400):
        seed = rnd.choice([0, 1337, 2**63 + 5, rnd.getrandbits(64)])
        offset = rnd.choice([0, 4, 2**32 + 8, rnd.getrandbits(64)])
        thr = ref.threshold(rnd.choice([0.1, 0.2, 0.5, 0.9]))
        cases.append((seed, offset, thr, rnd.randrange(2**31), rnd.randrange(2**31), rnd.randrange(2**31)))
    for bh, q, k in ((0, 0, 0), (5, 31, 15), (7, 32, 16), (1, 2047, 2047), (2**31 - 1, 2**31 - 1, 2**31 - 1)):
        cases.append((1337, 12, ref.threshold(0.2), bh, q, k))
    stdin = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.splitlines()
    kat = [tuple(int(x, 16) for x in line.split()[1:]) for line in out[:9]]
    assert kat[0::3] == [want for _, _, want in KAT]
    assert kat[1::3] == [ref.philox4x32(ctr, key, ref.ROUNDS) for ctr, key, _ in KAT]
    assert ref.ROUNDS == 10 and kat[1::3] == kat[0::3]  # the attention runs the full Philox4x32-10
    assert kat[2::3] == [ref.philox4x32(ctr, key, 7) for ctr, key, _ in KAT]
    assert all(ref.philox4x32(ctr, key, 7) != want for ctr, key, want in KAT)  # 7 rounds: other words
    assert out[-1] == f"threshold {ref.threshold(0.2)} {ref.threshold(0.5)} {ref.threshold(0.99999999)}"
    for (seed, offset, thr, bh, q, k), line in zip(cases, out[9:-1]):
        keep, *words = map(int, line.split())
        ctr = (((k >> 4) << 3) | (k & 7), (1 << 31) | ((q >> 5) << 3) | (q & 7), bh, offset & ref.MASK32)
        want = ref.philox4x32(ctr, (seed & ref.MASK32, ((seed >> 32) ^ (offset >> 32)) & ref.MASK32), ref.ROUNDS)
        assert tuple(words) == want, (seed, offset, bh, q, k)
        x = want[(q >> 3) & 3]
        u = x >> 16 if (k >> 3) & 1 else x & 0xFFFF
        assert keep == int(u >= thr), (seed, offset, thr, bh, q, k)
    assert len(out) == 9 + len(cases) + 1


TILE_CHECK = r'''
#include <cstdio>
#include "dropout.cuh"
using namespace tk_attn;
// Every lane's keep bits of a row_l tile (dropout_bits_q_lane / dropout_bits_k_lane, the kernels' code)
// against dropout_keep at the element's coordinates (rt.cuh: pair e of data[k] of fragment (i, j) is
// row 16 i + g + 8 (k & 1), col 16 j + 2 t + e + 8 (k >> 1), g = lane / 4, t = lane % 4).
// QROWS: rows are queries (S tiles), else keys (S^T tiles).
template <typename RT, bool QROWS, bool ROLLED = false>
int check(const dropout_key &d, int bh, int row0, int col0) {
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) {
    keep_bits<RT> b;
    if constexpr (QROWS) dropout_bits_q_lane<RT>(b, d, bh, row0, col0, lane);
    else dropout_bits_k_lane<RT, ROLLED>(b, d, bh, row0, col0, lane);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < RT::height; i++)
      for (int j = 0; j < RT::width; j++)
        for (int k = 0; k < 4; k++)
          for (int e = 0; e < 2; e++) {
            const int r = row0 + 16 * i + g + 8 * (k & 1), c = col0 + 16 * j + 2 * t + e + 8 * (k >> 1);
            const bool want = QROWS ? dropout_keep(d, bh, r, c) : dropout_keep(d, bh, c, r);
            if (b.get(keep_bit<RT>(i, j, k, e)) != want) bad++;
          }
  }
  return bad;
}
// The transposed dK / dV kernel's raw words (dropout_prefix_k + dropout_words_k_lane: rounds 0-2 hoisted)
// of a 16-key S^T tile: bitwise dropout_group's words, and the pair test (dropout_keep_pair, the same code
// the GPU runs) of the word keep_word picks gives dropout_keep.
template <typename RT>
int check_words(const dropout_key &d, int bh, int key0, int q0) {
  constexpr int JJ = keep_words<RT>::JJ;
  const int qw = RT::cols == 16 ? (q0 >> 3) & 2 : 0;
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    keep_words<RT> kw;
    dropout_words_k_lane(kw, d, dropout_prefix_k(d, bh, key0 + g), q0, lane);
    for (int jp = 0; jp < keep_words<RT>::QG; jp++)
      for (int e = 0; e < 2; e++) {
        const tk::philox4 want = dropout_group(d, bh, q0 + 32 * jp + 2 * t + e, key0 + g);
        const tk::philox4 got = kw.r[jp][e];
        if (got.x != want.x || got.y != want.y || got.z != want.z || got.w != want.w) bad += 100;
      }
    for (int j = 0; j < RT::width; j++)
      for (int kh = 0; kh < 2; kh++)
        for (int e = 0; e < 2; e++) {
          const uint32_t x = keep_word(kw.r[j / JJ], j % JJ, kh, e, qw);
          bool keep[2];
          dropout_keep_pair(x, d.threshold << 16, keep[0], keep[1]);
          for (int s = 0; s < 2; s++)
            if (keep[s] != dropout_keep(d, bh, q0 + 16 * j + 2 * t + e + 8 * kh, key0 + g + 8 * s)) bad++;
        }
  }
  return bad;
}
// The forward's keep flags of a 16-key slice (dropout_slice_q_lane: pair tests straight from the words) of a
// 16 HEIGHT-query S tile against dropout_keep.
template <int HEIGHT>
int check_slice_q(const dropout_key &d, int bh, int q0, int k0) {
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    int seen = 0;
    dropout_slice_q_lane<HEIGHT>(d, bh, q0, k0, d.threshold << 16, lane, [&](int i, int k, int e, bool keep) {
      seen++;
      if (keep != dropout_keep(d, bh, q0 + 16 * i + g + 8 * (k & 1), k0 + 2 * t + e + 8 * (k >> 1))) bad++;
    });
    if (seen != HEIGHT * 8) bad += 1000;
  }
  return bad;
}
// The Hopper forward's keep bits (dropout_bits_wg_lane) of a 32-query x 64-key band held by a warp pair of a
// wgmma accumulator: bit 4 n + 2 h + e of lo (hi) is element (q0 + g + 8 h (+ 16), k0 + 8 n + 2 t + e); and
// what the kernel makes of them: warp w of a consumer draws keys 64 (w & 1).. of its 128-key tile, keeps its
// rows' word and swaps the other with warp w ^ 1, and register i of its S accumulator (row 16 w + g + 8 h',
// column 8 n' + 2 t + e', i = 4 n' + 2 h' + e', warpgroup/mma.cuh) takes bit i of keep[i >> 5].
int check_wg(const dropout_key &d, int bh, int r0, int n0) {
  int bad = 0;
  const uint32_t thr16 = d.threshold << 16;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    uint32_t lo, hi;
    dropout_bits_wg_lane(d, bh, r0, n0, thr16, lane, lo, hi);
    for (int n = 0; n < 8; n++)
      for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++) {
          const int b = 4 * n + 2 * h + e, k = n0 + 8 * n + 2 * t + e;
          if (((lo >> b) & 1) != dropout_keep(d, bh, r0 + g + 8 * h, k)) bad++;
          if (((hi >> b) & 1) != dropout_keep(d, bh, r0 + 16 + g + 8 * h, k)) bad++;
        }
  }
  // the exchange of hopper_forward.cu's draw_keep, for the 4 warps of a consumer (rows r0.. of 64, a 128-key tile)
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    uint32_t sent[4], own[4];
    for (int w = 0; w < 4; w++) {
      const int pw = w & 1;
      uint32_t lo, hi;
      dropout_bits_wg_lane(d, bh, r0 + 32 * (w >> 1), n0 + 64 * pw, thr16, lane, lo, hi);
      sent[w] = pw ? lo : hi;
      own[w] = pw ? hi : lo;
    }
    for (int w = 0; w < 4; w++) {
      const int pw = w & 1;
      const uint32_t got = sent[w ^ 1], keep[2] = {pw ? got : own[w], pw ? own[w] : got};
      for (int i = 0; i < 64; i++) {
        const int row = r0 + 16 * w + g + ((i & 2) ? 8 : 0), col = n0 + 8 * (i / 4) + 2 * t + (i & 1);
        if (((keep[i >> 5] >> (i & 31)) & 1) != dropout_keep(d, bh, row, col)) bad++;
      }
    }
  }
  return bad;
}
// The Hopper backward's keep bits (dropout_bits_k_prefix_lane: rounds 0-2 hoisted into the key row's prefix)
// of a warp's 16-key x 64-query S^T slice, read the way hopper_backward.cu reads them: bit i for accumulator
// register i, at row key0 + g + 8 ((i >> 1) & 1), column q0 + 8 (i / 4) + 2 t + (i & 1) (warpgroup/mma.cuh).
int check_k_prefix(const dropout_key &d, int bh, int key0, int q0) {
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    keep_bits<tk::rt<float, 16, 64>> b;
    dropout_bits_k_prefix_lane(b, d, dropout_prefix_k(d, bh, key0 + g), q0, d.threshold << 16, lane);
    for (int i = 0; i < 32; i++) {
      const int key = key0 + g + ((i & 2) ? 8 : 0), q = q0 + 8 * (i / 4) + 2 * t + (i & 1);
      if (((b.w[0] >> i) & 1) != dropout_keep(d, bh, q, key)) bad++;
    }
  }
  return bad;
}
// The backward's causal skip (hopper_backward.cu passes the warp's first key): every bit is dropout_keep's except in
// the skipped query groups, whose bits are 0 and whose elements are all causally masked (key > query). *skipped
// counts the skipped elements, so that the caller can see that diagonal blocks skip some.
int check_k_prefix_causal(const dropout_key &d, int bh, int key0, int q0, int *skipped) {
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    keep_bits<tk::rt<float, 16, 64>> b;
    dropout_bits_k_prefix_lane(b, d, dropout_prefix_k(d, bh, key0 + g), q0, d.threshold << 16, lane, key0);
    for (int i = 0; i < 32; i++) {
      const int key = key0 + g + ((i & 2) ? 8 : 0), q = q0 + 8 * (i / 4) + 2 * t + (i & 1);
      const bool skip = key0 > q0 + 32 * (i / 16) + 31, bit = ((b.w[0] >> i) & 1) != 0;
      if (skip) {
        (*skipped)++;
        if (bit || key <= q) bad++;
      } else if (bit != dropout_keep(d, bh, q, key)) {
        bad++;
      }
    }
  }
  return bad;
}
int main() {
  int bad = 0, n = 0, skipped = 0;
  for (unsigned thr : {6554u, 13107u, 32768u, 58982u})
    for (unsigned long long off : {0ull, 12ull, (1ull << 32) + 4})
      for (int bh : {0, 7, 100000}) {
        const dropout_key d = make_dropout_key(0x1234567890abcdefull, off, thr);
        for (int m = 0; m < 6; m++) {
          const int r32 = 32 * m + 96 * (bh % 5), r16 = 16 * m + 48 * (bh % 3), c16 = 16 * m + 64 * (bh % 7);
          // S tiles: 32 queries x 16 keys, deterministic dQ (16 queries x 64 keys)
          bad += check<tk::rt<float, 32, 16>, true>(d, bh, r32, c16);
          bad += check<tk::rt<float, 16, 64>, true>(d, bh, r16, 64 * m);
          // transposed dK / dV kernel (16 keys x 64 / 32 / 16 queries), split kernel (32 x 32, rolled)
          bad += check<tk::rt<float, 16, 64>, false>(d, bh, r16, 64 * m);
          bad += check<tk::rt<float, 16, 32>, false>(d, bh, r16, 32 * m);
          bad += check<tk::rt<float, 16, 16>, false>(d, bh, r16, c16);
          bad += check<tk::rt<float, 32, 32>, false, true>(d, bh, 32 * m, r32);
          // the transposed kernel's raw words (16 keys x 64 / 32 / 16 queries)
          bad += check_words<tk::rt<float, 16, 64>>(d, bh, r16, 64 * m);
          bad += check_words<tk::rt<float, 16, 32>>(d, bh, r16, 32 * m);
          bad += check_words<tk::rt<float, 16, 16>>(d, bh, r16, c16);
          // the forward's slices (32 queries; 16 too)
          bad += check_slice_q<2>(d, bh, r32, c16);
          bad += check_slice_q<1>(d, bh, r16, c16);
          // the Hopper kernels (forward: 32-row bands of 64-row consumers, 128-key tiles; backward: 16 keys of a
          // warp, 64-query blocks)
          bad += check_wg(d, bh, 64 * m + 128 * (bh % 3), 128 * m + 256 * (bh % 7));
          bad += check_k_prefix(d, bh, r16, 64 * m + 128 * (bh % 5));
          // the backward's causal skip on the diagonal: warps of 16 keys against their 64-query block
          for (int dk = 0; dk < 64; dk += 16) bad += check_k_prefix_causal(d, bh, 64 * m + dk, 64 * m, &skipped);
          n += 16;
        }
      }
  if (skipped == 0) bad++;  // the diagonal blocks above must skip some groups
  printf("checked %d tiles, %d skipped elements, %d wrong bits\n", n, skipped, bad);
  return bad != 0;
}
'''


def test_tile_keep_bits_match_the_definition(tmp_path):
    """The keep bits every lane draws for the tiles the kernels use (forward, deterministic dQ,
    transposed and split dK / dV kernels; the transposed kernel's raw Philox words with their first
    rounds hoisted and its pair test; the forward's per-slice keep flags; the Hopper forward's warp-pair
    bands with their exchange and the Hopper backward's prefix-hoisted S^T bits, in wgmma accumulator
    order) are exactly dropout_keep at each element's coordinates."""
    exe = compile_host_program(tmp_path, "tiles", TILE_CHECK, "attention")
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and "0 wrong bits" in out.stdout, out.stdout + out.stderr


def test_python_keep_mask_matches_scalar_definition():
    B, H, T, p = 2, 3, 70, 0.3
    seed, offset = 2**40 + 17, 2**33 + 44
    mask = ref.keep_mask(seed, offset, B, H, T, p)
    assert mask.shape == (B, H, T, T) and mask.dtype == torch.bool
    rnd = random.Random(5)
    for _ in range(300):
        b, h, q, k = rnd.randrange(B), rnd.randrange(H), rnd.randrange(T), rnd.randrange(T)
        ctr = (((k >> 4) << 3) | (k & 7), (1 << 31) | ((q >> 5) << 3) | (q & 7), b * H + h, offset & ref.MASK32)
        x = ref.philox4x32(ctr, (seed & ref.MASK32, ((seed >> 32) ^ (offset >> 32)) & ref.MASK32), ref.ROUNDS)[(q >> 3) & 3]
        u = x >> 16 if (k >> 3) & 1 else x & 0xFFFF
        assert bool(mask[b, h, q, k]) == (u >= ref.threshold(p))


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_keep_mask_statistics(p):
    """~1.2e6 elements: kept fraction within 4 sigma of 1 - p; masks differ per head and offset."""
    B, H, T = 2, 3, 450
    m = ref.keep_mask(1337, 8, B, H, T, p)
    n = m.numel()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(m.float().mean().item() - (1 - p)) < 4 * sigma
    assert not torch.equal(m[0, 0], m[0, 1]) and not torch.equal(m[0, 0], m[1, 0])
    assert not torch.equal(m, ref.keep_mask(1337, 12, B, H, T, p))
    assert not torch.equal(m, ref.keep_mask(1338, 8, B, H, T, p))
    # neighbouring elements are not correlated (agreement of two independent bits: p^2 + (1 - p)^2)
    agree = (m[..., 1:] == m[..., :-1]).float().mean().item()
    assert abs(agree - (p * p + (1 - p) ** 2)) < 0.01


@pytest.mark.parametrize("dropout_p,match", [(1.0, r"\[0, 1\)"), (-0.1, r"\[0, 1\)"), ("0.1", "Python float"),
                                             (True, "Python float")])
def test_bad_dropout_p_is_one_clear_error(dropout_p, match):
    with FakeTensorMode():
        q = torch.empty(1, 1, 4, 64, dtype=torch.bfloat16, device="cuda")
        assert tka.tensor_reason(q, q, q, True, None, 0.2) is None
        reason = tka.tensor_reason(q, q, q, True, None, dropout_p)
        with pytest.raises(ValueError, match=match):
            tka.attention(q, q, q, dropout_p=dropout_p)
    assert reason is not None and re.search(match, reason), reason
