// Flash attention forward for Hopper (sm_90a: wgmma, TMA, mbarriers, setmaxnreg), written with the
// DSL's warpgroup / thread / host layers. Same semantics and outputs as forward.cu, dropout included:
//
//   O = softmax(scale * Q K^T [+ causal mask]) V,   lse_i = ln sum_j exp(scale * q_i . k_j)
//   Q, K, V, O: (B, H, T, D), D in {64, 128}, stride 1 along D, any b/h/t strides that are multiples
//   of 16 bytes; lse: (B, H, T) contiguous fp32, natural log, exactly forward.cu's layout and units,
//   so both backwards (backward*.cu, hopper_backward.cu) consume it unchanged.
//
// Structure: a tk::pipeline description (include/pipeline/producer_consumer.cuh owns the K / V ring, its
// mbarriers and phases, the Q buffer's barriers, setmaxnreg, the producer's TMA loop and the persistent
// item loop); this file states the tile logic, top to bottom: the tiles (KVTile: one ring slot, QBlock:
// the per-item buffer), the walk over work items, the consumer (start: zero O, m, l; compute(j): S_j and
// P_{j-1} V_{j-1}, the softmax of S_j; drain: the last P V; finish: lse and the O store), the description
// HopPipe and the kernel. Ported from the hand-written kernel with the same SASS budget (cuobjdump, sm_90a,
// all 16 instances: no stack, no LDL / STL, the same HGMMA / UTMALDG / UTMASTG / SYNCS / BAR counts;
// instructions -1.3% to +2.0% for p = 0, -9% to -12% for dropout, whose Philox round keys now stay in
// registers instead of being re-added from uniform registers per round).
//
// Algorithm (FlashAttention-3 style warp specialisation, online softmax in base 2):
//   A work item is a 128-query block of one (b, h). The grid is persistent: one CTA per SM walks the
//   items, so the producer loads the next item's Q, K, V while the consumers finish the current one.
//   3 warpgroups.
//   * Warpgroup 0, the producer, shrinks to 24 registers (setmaxnreg; 56 where it walks a counter, below,
//     with 224 for the consumers); one thread issues TMA loads:
//     the Q block once, then K_j and V_j (128 keys each) into a STAGES-deep ring. Each slot has two
//     "full" barriers (K landed, V landed: S = Q K^T may start before V arrives) and one "empty"
//     barrier that both consumers arrive on when done with the slot.
//   * Warpgroups 1 and 2, the consumers, grow to 240 registers and own 64 query rows each:
//       S_j = Q K_j^T        wgmma m64n128k16, B = K K-major in shared memory; A = Q from registers
//                             (loaded once per item: each wgmma then reads 4 KB of shared memory instead of
//                             6 KB), except D = 128 with dropout (from shared memory: 32 more registers a
//                             thread spilled there). H100, session 35, D = 64 forward TFLOP/s before / after,
//                             one call: causal (16,12,1024,64) 299.1 / 301.3, (8,16,2048,64) 358.1 / 368.1,
//                             (4,16,4096,64) 397.9 / 403.5, (64,6,256,64) 105.7 / 107.1; non-causal 399.0 /
//                             408.3, 429.5 / 438.8, 438.2 / 449.5, 224.7 / 225.1. D = 128, whose one Q buffer
//                             the pipeline then frees after the item's first key tile (ITEM_AFTER_FIRST: the
//                             next item's Q loads during this one), H100, session 36, one call, TFLOP/s before /
//                             after (cuDNN): causal (8,16,2048,128) 473.0 / 487.5 (497.0), (4,16,4096,128)
//                             525.3 / 540.6 (526.5), (2,16,8192,128) 510.6 / 565.1 (557.4), (1,16,16384,128)
//                             561.3 / 575.3 (582.0); non-causal 564.0 / 591.4 (619.4), 595.5 / 619.1
//                             (607.9), 621.9 / 601.8 (610.9), 604.7 / 607.1 (627.1); Q from registers alone
//                             was within the run-to-run spread)
//       m' = max(m, rowmax S_j);  P_j = 2^(S_j c - m' c);  l = l 2^((m - m') c) + rowsum P_j
//       O = O 2^((m - m') c) + P_j V_j     wgmma m64nDk16 with A = P_j from REGISTERS (the fp32
//                             accumulator packed to 16 bits is the A fragment: wg::to_a_fragment)
//                             and B = V_j MN-major in shared memory (wg::desc_mn128, tnspB)
//     with c = scale * log2(e) folded into one FFMA before exp2. Per key tile a consumer issues
//     S_{j+1} = Q K_{j+1}^T and O += P_j V_j back to back, waits for S_{j+1}, runs its softmax, waits for
//     P_j V_j (then p[] and the ring slot are free) and rescales O before its next issue.
//   * Ping-pong (FlashAttention-3): the two consumers hand the right to issue wgmmas back and forth with
//     named barriers, so one's softmax runs while the other's GEMMs occupy the tensor cores.
//     Intra-warpgroup overlap (the softmax of S_{j+1} while P_j V_j is still running) is what the issue
//     order above asks for, but ptxas (CUDA 13) moves the wait for P_j V_j above the softmax's exp2s
//     (seen in the SASS; the PTX has the intended order), and a data dependency to pin it (a branch
//     on the row sum) made ptxas serialise every wgmma. So within a warpgroup the exp2s run after the
//     P V group; across the two warpgroups they overlap.
//   * Finish: O /= l, lse = (m c + log2 l) ln 2. lse goes straight from registers (one lane per row).
//     O: D = 128 without dropout stores its 64 x 128 tile from registers, 16 bytes a lane (wg::store_rows:
//     the quad that shares a row transposes its words, 4 shuffles per 32 columns, so a warp instruction
//     writes 8 rows x 64 contiguous bytes; until session 42 each lane wrote 4 bytes, 8 rows x 16 bytes an
//     instruction, and the phase stamps of session 42 put that finish at 2,282 / 2,910 cycles an item for the
//     two consumers at (8,16,2048,128) non-causal, 5-6% of the item, while the other consumer waits for it;
//     session 43, H100, two alternated processes each: D = 128 forward +4.6% / +5.1% at (8,16,2048,128)
//     non-causal / causal, +2.5% / +3.6% at (4,16,4096,128), +0.6% / +1.3% at (2,16,8192,128)); the others
//     write it (stmatrix, one per 16 columns a warp; until session 42 4-byte shared stores: D = 64 level to
//     +1.6%) into their rows of an O staging buffer, in the
//     128B-swizzled layout, and one thread stores it with TMA. A "Q empty" barrier per Q buffer (both
//     consumers' last S GEMM of its item done) lets the producer refill it: D = 64 has two Q buffers, so the
//     next item's Q (and first K / V tile) load while this item still runs; D = 128 one, loaded during the finish.
//
// Tiling and data movement:
//   * Shared memory (128B swizzle; a 64-column panel per 128 bytes of row): the ring, STAGES x (K 128 x D
//     + V 128 x D), then the Q block(s) 128 x D and (not at D = 128 without dropout) the O staging buffer
//     128 x D. D = 64: 3 stages and two Q buffers, 144 KB. D = 128: 3 stages, one Q buffer and no staging
//     buffer, 224 KB (with dropout 2 stages and the buffer, 192 KB: its 2 KB static keep-bit buffer leaves
//     no room for a third stage, nor for a second Q). 1 CTA per SM (the 240-register consumers use the
//     whole register file).
//     Why D = 64 double-buffers Q (the pipeline's ITEM_STAGES = 2): with one Q buffer the producer can load
//     the next item's Q only once both consumers' last S GEMM of this item is done, and its K / V tiles only
//     after that (it issues an item's loads in order), so every item boundary exposed a Q + K load from
//     DRAM while the consumers had only the last P V and the finish left to run. With two, both are in
//     flight a whole item earlier. H200, bench_attention.py --graphs, forward TFLOP/s, one buffer -> two,
//     two builds side by side (session 16): (64,6,256,64) causal 105.1 -> 118.3, non-causal 198.5 -> 235.2
//     (cuDNN 122.9 / 238.3); (16,12,1024,64) 277.7 -> 289.7, 377.9 -> 396.6 (cuDNN 298.6 / 408.1);
//     (8,16,2048,64) 344.4 -> 348.4, 420.0 -> 430.6; D = 128 unchanged (447.6 / 450.0, 556.8 / 554.2):
//     the shorter the items, the more it pays.
//     The walk (causal D = 64, from T = 512 on): the items' lengths differ (query block mb sees mb + 1 key
//     tiles), and a static order left the busiest CTA at 1.03-1.09x the mean; the CTAs now take the next item
//     from a counter in global memory when they are done (the pipeline's DYNAMIC scheduler; the binding zero-fills
//     the counter, see hopper_fwd_dynamic_walk in attention.h for T < 512). Session 17, forward TFLOP/s, static ->
//     counter: (16,12,1024,64) 291 -> 308, (8,16,2048,64) 352 -> 376, (4,16,4096,64) 395 -> 413 (with the
//     records on the item buffer's barriers; their own barriers, which racecheck needs, cost 2.6-3.1% of that
//     at T = 1024-2048). At D = 64 the ping-pong turn also runs on across items (see my_turn): +0.5-2.5%.
//     Why D = 128 gave up the staged store for a third stage (H200, bench_attention.py --graphs, forward
//     TFLOP/s, two builds side by side, session 9): with 2 stages a ring slot is refilled only after both
//     consumers' P V of it, so each tile's K / V load latency was exposed; 3 stages took non-causal from
//     497 / 515 / 526 / 541 to 568 / 599 / 620 / 631 at T = 2048 / 4096 / 8192 / 16384 (cuDNN 594 / 628 / 618
//     / 624), causal from 373 / 445 / 491 / 516 to 375-412 / 458 / 506 / 527. The same register store at
//     D = 64 (still 3 stages) was 3-5% slower at T <= 2048 (276.6 -> 262.2 causal, 378.1 -> 359.8 non-causal
//     at (16,12,1024,64)), and a fourth stage there gained nothing (260.3 / 356.4), so D = 64 keeps the TMA
//     store.
//   * Strided views: every operand is a rank-4 TMA tensor map over (D, T, H, B) with the tensor's own
//     strides (nanoGPT's q/k/v views of one (B, T, 3C) tensor, no copies), built on the host per call
//     (a few microseconds; plain kernel parameters, so CUDA-graph capture records them).
//   * Ragged T: T is its own tensor-map dimension, so TMA zero-fills rows >= T of a box (never reading
//     the next head's rows) and drops them on the O store; keys >= T are masked to -inf (non-causal;
//     with causal every row < T masks them already).
//   * Causal (top-left aligned): the key loop stops at the diagonal tile (query and key blocks are both
//     128, so block mb sees tiles 0..mb); only that tile is masked. The persistent CTAs walk the items in
//     groups of G heads (G n_mblocks ~ 2 x the grid; hop_block): within a group by query block, the G heads
//     of each block together, heaviest blocks first in even groups and lightest first in odd ones, so a CTA
//     striding through the items alternates heavy and light ones (a load model puts the busiest CTA at
//     1.03-1.09x the mean) while the CTAs running together share a few heads' K / V in L2. The walk before
//     (query-block-major over all heads, heaviest first: every CTA of a wave on a different head) measured
//     3.17 TB/s of DRAM traffic and a 32.6% L2 hit rate at (8,16,2048,128) (Nsight Compute); the grouped walk
//     0.89 TB/s and 72.9%, and forward TFLOP/s (H200, CUDA-graph replays, side by side, session 9) went from
//     419 / 475 / 520 / 537 to 463 / 528 / 564 / 589 at D = 128, T = 2048 / 4096 / 8192 / 16384 (cuDNN 482-492
//     / 523-525 / 545-548 / 566-570); D = 64 within noise (275 -> 277-278 at (16,12,1024,64), 352 -> 346-348,
//     385 -> 387-390, 99 -> 101-103 at (64,6,256,64)).
//   * The first tile always holds key 0, which every row sees, so the running max is finite from then
//     on (2^(-inf) = 0 covers the initial rescale).
//   * Choices, measured (H200, bf16, forward TFLOP/s, dev/hopper/check_attention.py --quick, 2026-12-01,
//     bench/RESULTS.md session 4): the persistent grid beat one CTA per item at every shape, most at
//     short sequences: (16,12,1024,64) causal 269 vs 245, non-causal 383 vs 352; (8,16,2048,128) causal
//     372 vs 359, non-causal 502 vs 488; (64,6,256,64) causal 103 vs 89, non-causal 198 vs 172. Without
//     the ping-pong hand-offs it was equal or slower (243 / 357 / 357 / 491 / 88 / 165); three consumer
//     warpgroups at D = 64 (192-query items, 160 registers) were slower (238 / 368 / 71 / 147). Those
//     variants are in git history (dev/hopper/attention_variants.cu, removed with this choice).
//     In-warpgroup overlap was then tried (commit 0303509: P double-buffered in registers, the wait for
//     P V moved to the next key tile, so the SASS ran the exp2s under P V): 267 / 364 / 351 / 461 / 106
//     / 202 at the six cases above, i.e. 5-8% slower except at T = 256 (+2-3%); reverted.
// Measured with the persistent grid (the hand-written kernel, bench/bench_attention.py, session 5 call 2):
// 0.75-0.95x cuDNN at the issue's shapes, e.g. (16,12,1024,64) causal 269 vs 303, (8,16,2048,128) causal
// 368 vs 492, non-causal 506 vs 628; 1.19x / 1.98x at (64,6,256,64); 1.29-1.56x SDPA's flash backend.
// The in-warpgroup overlap above is the first thing still missing: ptxas's placement of the P V wait is
// visible in the SASS (WARPGROUP.DEPBAR.LE gsb0, 0x0 above the MUFU.EX2 block of the loop); the variants
// of dev/hopper/check_fwd_variants.py pin it (and move part of the exponentials off the MUFU), not yet timed.
// The port to the pipeline template first ran in session 6 (dev/gpu_call_s6a.sh: its float64 checks passed;
// bench/RESULTS.md session 6) and is what every later table times.
//
// Dropout (the DROPOUT = true instances; p = 0 runs the kernels above, whose SASS adding dropout left
// unchanged: normalized cuobjdump diff against the kernel before dropout, 0 lines in all 8 instances):
//   The keep decision of (b, h, query i, key j) is dropout.cuh's (Philox4x32-10 of (seed, offset, b H + h,
//   i, j): the same mask as forward.cu and the backwards, so either backward fits this forward and
//   ops.dropout_mask / the float64 reference of the tests validate it). After the row max and row sum of a
//   tile (m, l and lse are those of the undropped P, as in forward.cu), P~ = keep ? P : 0 in place on the
//   fp32 accumulator before it is packed into the A fragments of O += P~ V; the finish scales O by
//   (1 / (1 - p)) / l. CTA 0 writes the (seed, offset) it used (rng_out).
//   Where the random bits come from: one Philox call covers 8 elements, rows i + {0, 8, 16, 24} x keys
//   j + {0, 8} of a 32-row block; in the wgmma accumulator a warp holds only 16 rows (16 w + g + {0, 8}), so
//   a call's words are split between the two warps 2 u, 2 u + 1 of a consumer. Each warp of such a pair
//   draws the calls of one half of the tile's keys (dropout_bits_wg_lane: 8 calls per lane per 128-key
//   tile, both words of each call used: 32 keep bits for its rows, 32 for the partner's) and hands the
//   partner's bits over through a 2 KB static shared buffer (hop_keep_xchg, double-buffered by tile
//   parity; one 64-thread named barrier per tile, ids 7..10); so per tile a lane holds 2 registers of keep
//   bits, applied with one shift/test and one select per element. Drawing all 16 calls a lane's elements
//   touch would waste half of every call (twice the Philox work). The bits are drawn right after the
//   tile's S = Q K^T (and the previous P V) are issued, before the wait for S, so the integer work can
//   overlap the tensor cores.
//   ptxas -v (CUDA 13): every DROPOUT instance spill-free (0 bytes stack, no LDL / STL in the SASS), as the
//   p = 0 ones. SASS per kernel (on the pipeline template): D = 64 ~3.4K instructions (p = 0: 1944 / 2032,
//   non-causal / causal), D = 128 ~3.8-3.9K (2408 / 2488).
//   Measured (the hand-written kernel, session 5 calls 3 / 4): the same mask as the portable path
//   (dev/hopper/check_attention_dropout.py), the dropout GPU matrix passes on both paths; fwd + bwd at
//   p = 0.2 vs 0 (bench/bench_attention_dropout.py, causal): (16,12,1024,64) 0.420 -> 0.580 ms (+38.1%; the
//   forward 0.096 -> 0.183 ms: the Philox draws, ~65 integer instructions per 8 elements, make the D = 64
//   forward issue-bound), (64,6,256,64) +0.1%; cuDNN +25.3% / +47.4%, flash +15.6% / +12.7%. The issue's
//   <= 10% is missed at the GPT-2 shape.
//
// Built for every architecture of the family (build.py compiles all csrc/*.cu); the kernel body exists
// only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL) and traps elsewhere; ops.py dispatches here only on sm_90
// with an extension built for sm_90a.
#include <cmath>
#include <cstdint>
#include <string>
#include <stdexcept>
#include <type_traits>

#include "attention.h"
#include "dropout.cuh"
#include "hopper_maps.cuh"
#include "host/tensor_map.cuh"
#include "pipeline/producer_consumer.cuh"
#include "thread/bulk.cuh"
#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "tk.cuh"
#include "warpgroup/mma.cuh"
#include "warpgroup/sync.cuh"

namespace tk_attn {
namespace {

using namespace tk;

constexpr int HBLOCK_N = 128;                 // keys per tile
constexpr int PANEL_COLS = 64;                // 128 bytes of 16-bit elements: one swizzle row
constexpr int PINGPONG_BAR = 5;               // named barriers 5.. (1..4: each consumer's own, epilogue)
constexpr int DROP_PAIR_BAR = 7;              // dropout: 7 + 2 c + u, the warp pair u of consumer c

// Two consumer warpgroups of 64 query rows each, one producer warpgroup.
constexpr int NC = 2;                          // consumer warpgroups
constexpr int HBLOCK_M = 64 * NC;              // query rows per work item

template <int D>
struct hop_layout {
  static constexpr int PANELS = D / PANEL_COLS;
  static constexpr int Q_PANEL = HBLOCK_M * PANEL_COLS * 2;    // 16 KB
  static constexpr int KV_PANEL = HBLOCK_N * PANEL_COLS * 2;   // 16 KB
  static constexpr int Q_BYTES = PANELS * Q_PANEL;
  static constexpr int KV_BYTES = PANELS * KV_PANEL;           // one K (or V) tile
};

// Where O goes, and the ring depth that leaves (see the header, "Tiling"): D = 128 without dropout stores O from
// registers straight to global memory, so its 32 KB staging buffer becomes room for a third K / V stage (3 x 64 KB
// + Q 32 KB); everything else stages O in shared memory for a TMA store (D = 64: 3 stages; D = 128 with dropout:
// 2, as its 2 KB static keep-bit exchange buffer leaves no room for a third).
constexpr bool hop_direct_o(int D, bool dropout) { return D == 128 && !dropout; }
constexpr int hop_stages(int D, bool dropout) { return D == 64 || hop_direct_o(D, dropout) ? 3 : 2; }
// Q blocks in shared memory: D = 64 double-buffers them (144 KB), so the producer loads the next item's Q and first
// K / V tile while the consumers still work on this item; D = 128 has no room for a second 32 KB block (224 KB with
// three stages; with dropout 192 KB + the 2 KB static exchange buffer).
constexpr int hop_q_stages(int D) { return D == 64 ? 2 : 1; }

// Shared memory, 128B-swizzled 64-column panels: the ring's slot is one key tile's K and V (a full
// barrier each), the per-item buffer is the Q block, the consumers' scratch the O staging buffer
// (Q's layout: consumer c's 64 rows at c * 64 * 128 bytes of each panel; none with hop_direct_o).
template <int D>
struct alignas(1024) KVTile {
  char k[hop_layout<D>::KV_BYTES];
  char v[hop_layout<D>::KV_BYTES];
};
template <int D>
struct alignas(1024) QBlock {
  char q[hop_layout<D>::Q_BYTES];
};
template <int D> using KVSlot = pipeline::slot<KVTile<D>, 2>;

struct hop_args {
  int seq, heads, batch;
  float scale_log2;   // softmax scale * log2(e)
  float *lse;
  void *o;            // (B, H, T, D) output, stride 1 along D (hop_direct_o; the others store through o_map)
  Strides o_s;        // its b, h, t strides, in elements
  int *tile_counter;  // causal D = 64: the walk's item counter, zero at launch, or null (the static walk)
};
// The dropout kernels' arguments: the same plus the dropout's (the p = 0 kernels keep hop_args).
struct hop_dropout_args : hop_args {
  dropout_args drop;
};
template <bool DROPOUT> using hop_args_t = std::conditional_t<DROPOUT, hop_dropout_args, hop_args>;

// Dropout: the keep bits a warp hands its partner warp (dropout_bits_wg_lane), [consumer][tile parity][warp][lane].
// Only the DROPOUT kernels reference it, so only they allocate it.
__shared__ uint32_t hop_keep_xchg[2][2][4][32];

// A work item: query block mb of head (b, h).
struct hop_coord {
  int mb, b, h;
};
// Non-causal: head-major (the CTAs running together share a few heads' K and V in L2). Causal: groups of G heads
// (G n_mblocks ~ 2 x the grid), each group's items by query block, heaviest first in even groups and lightest first
// in odd ones (so a CTA striding through the items alternates heavy and light ones), the G heads in each block.
template <bool CAUSAL>
__device__ __forceinline__ hop_coord hop_block(const hop_args &a, int idx, int grid, bool alternate = true) {
  const int n_mblocks = (a.seq + HBLOCK_M - 1) / HBLOCK_M;
  const int n_heads = a.heads * a.batch;
  int mb, bh;
  if constexpr (CAUSAL) {
    const int G = max(1, min(n_heads, 2 * grid / n_mblocks));
    const int group = idx / (G * n_mblocks), k = idx % (G * n_mblocks);
    const int gs = min(G, n_heads - group * G);  // the last group may be smaller
    const int r = k / gs;
    mb = alternate && (group & 1) ? r : n_mblocks - 1 - r;
    bh = group * G + k % gs;
  } else {
    mb = idx % n_mblocks;
    bh = idx / n_mblocks;
  }
  return {mb, bh / a.heads, bh % a.heads};
}
// Key tiles query block mb sees (causal: up to the diagonal tile).
template <bool CAUSAL>
__device__ __forceinline__ int hop_tiles(const hop_args &a, int mb) {
  const int rows_seen = CAUSAL ? min(mb * HBLOCK_M + HBLOCK_M, a.seq) : a.seq;
  return (rows_seen + HBLOCK_N - 1) / HBLOCK_N;
}

// Max / sum over the 4 lanes (one quad) that hold the columns of one accumulator row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ------------------------------------------------------------------------------------------------
// the kernel: a tk::pipeline description (pipeline/producer_consumer.cuh), read top to bottom

template <bool DROPOUT>
struct HopGlobals {
  const CUtensorMap &q_map, &k_map, &v_map, &o_map;
  const hop_args_t<DROPOUT> &a;
};

// The persistent walk: CTA i takes work items i, i + gridDim.x, ... in hop_block order (non-causal: the items are
// all alike).
template <bool CAUSAL, bool DYNAMIC_WALK>
struct ItemWalk {
  const hop_args &a;
  int item, n_items;
  __device__ ItemWalk(const hop_args &a)
      : a(a), item(blockIdx.x), n_items(((a.seq + HBLOCK_M - 1) / HBLOCK_M) * a.heads * a.batch) {}
  template <bool DROPOUT>
  __device__ ItemWalk(const HopGlobals<DROPOUT> &g) : ItemWalk(static_cast<const hop_args &>(g.a)) {}
  __device__ bool next(hop_coord &w) {
    if (item >= n_items) return false;
    w = hop_block<CAUSAL>(a, item, gridDim.x);
    item += gridDim.x;
    return true;
  }
};
// Causal D = 64: CTA i takes item i, then whichever is next when it is done (a counter in global memory, zero at
// launch, one atomicAdd per item), in hop_block's order with the heaviest query blocks first in every group; only the
// producer walks (DYNAMIC: the pipeline hands each item to the consumers). The static walk's load model put its
// busiest CTA at 1.03-1.09x the mean; the counter gained 5.8% / 6.9% / 4.5% at causal (16,12,1024,64) /
// (8,16,2048,64) / (4,16,4096,64) (session 17; see the header). Without a counter (tile_counter null: the caller's choice, see
// hopper_fwd_dynamic_walk) the producer walks the static order (heavy and light blocks alternating).
template <>
struct ItemWalk<true, true> {
  static constexpr bool DYNAMIC = true;
  const hop_args &a;
  int n_items, idx = -1;
  template <bool DROPOUT>
  __device__ ItemWalk(const HopGlobals<DROPOUT> &g)
      : a(g.a), n_items(((g.a.seq + HBLOCK_M - 1) / HBLOCK_M) * g.a.heads * g.a.batch) {}
  __device__ bool next(hop_coord &w) {
    idx = pipeline::next_item(idx, a.tile_counter);
    if (idx >= n_items) return false;
    w = hop_block<true>(a, idx, gridDim.x, a.tile_counter == nullptr);
    return true;
  }
};

// One consumer warpgroup: 64 query rows of every item, key tile by key tile (compute), the last P V
// (drain), then O and lse (finish). Its registers live across items: S / P (s, p), O (o), the running
// max and sum. The P V of a tile runs one step late, on the slot the pipeline passes as prev (drain: the
// item's last slot), so the consumer keeps no pointers into the ring.
template <typename T, int D, bool CAUSAL, bool DROPOUT>
struct HopConsumer {
  using L = hop_layout<D>;
  using acc_s = wg::accumulator<HBLOCK_N>;
  using acc_o = wg::accumulator<D>;
  static constexpr bool DIRECT_O = hop_direct_o(D, DROPOUT);
  static constexpr bool PEEL_FIRST = true;  // compute(.., 0) has no P V: its own code, no runtime branch on j
  const HopGlobals<DROPOUT> &g;
  const int c, me;
  char *const ctx_scratch;    // the O staging buffer (scratch; not DIRECT_O), consumer c's rows at c * 64 * 128
  uint64_t dq[L::PANELS];     // its 64 rows of the Q block
  // S = Q K^T takes Q from registers (wgmma_rs; loaded in compute(.., 0), the item's Q block having landed): its
  // m64n128k16 then reads 4 KB of K from shared memory instead of 6 KB of Q and K (see the header). Not D = 128 with
  // dropout: 32 more registers a thread there spilled (52 bytes in the non-causal instance).
  static constexpr bool Q_REGS = D == 64 || !DROPOUT;
  wg::a_fragment<T> qf[D / 16];
  // With Q in registers, compute(.., 0) is the Q block's last reader: with one Q buffer (D = 128) the pipeline then
  // frees it after the first key tile, not the last, so the producer loads the next item's Q during this item.
  // D = 64 has two Q buffers already; there the extra barrier measured 1-2% slower (session 36).
  static constexpr bool ITEM_AFTER_FIRST = Q_REGS && hop_q_stages(D) == 1;
  const char *q_rows = nullptr;  // Q_REGS: the item's Q block, this consumer's rows
  acc_s s;
  acc_o o;
  wg::a_fragment<T> p[HBLOCK_N / 16];
  // This thread's two rows: acc row(0) (values 4j, 4j+1) and row(0) + 8 (values 4j+2, 4j+3).
  float m_run[2], l_run[2];   // l: this thread's columns only (summed over the quad at the end)
  float alpha[2];             // the rescale factors of O for the last softmax'ed tile
  int r0 = 0, bh = 0;         // the item's first query row of this warpgroup, its head b H + h
  // Dropout (DROPOUT kernels only): keep[0] / keep[1] hold this lane's keep bits of the current key tile,
  // bit i of keep[i >> 5] for register i of s (dropout_bits_wg_lane: warp pair u = w / 2 shares the
  // Philox groups of rows 32 u.., warp w draws those of keys 64 (w & 1).. of the tile and swaps the
  // other rows' bits with its partner through hop_keep_xchg, double-buffered by tile parity).
  uint32_t keep[2] = {0u, 0u};
  dropout_key dkey{};
  uint32_t thr16 = 0;

  __device__ HopConsumer(const HopGlobals<DROPOUT> &g, const pipeline::consumer_ctx<QBlock<D>> &ctx)
      : g(g), c(ctx.id), me(wg::warpgroup_thread()), ctx_scratch(ctx.scratch) {
    if (TURN_ACROSS_ITEMS && c == NC - 1) their_turn();  // consumer 0's first turn
    if constexpr (DROPOUT) {
      uint64_t seed, offset;
      dkey = load_dropout_key(g.a.drop.rng, g.a.drop.threshold, seed, offset);
      thr16 = g.a.drop.threshold << 16;
      if (blockIdx.x == 0 && c == 0 && me == 0 && g.a.drop.rng_out != nullptr) {
        g.a.drop.rng_out[0] = int64_t(seed);
        g.a.drop.rng_out[1] = int64_t(offset);
      }
    }
  }

  // Ping-pong: the consumers take turns issuing their wgmmas (named barriers PINGPONG_BAR + c), so one's
  // softmax runs while the other's GEMMs occupy the tensor cores. Consumer 0 goes first in every item.
  // D = 64 (TURN_ACROSS_ITEMS): the turn runs on across items: consumer 1's drain hands it to consumer 0, which
  // starts the next item while consumer 1 still drains and finishes this one (consumer 1 hands consumer 0 the
  // very first turn when it is made; consumer 0 takes the last hand-off, which no item uses, in last(), so that
  // arrivals and syncs balance). D = 128: consumer 1 hands consumer 0 the first turn of each item in start()
  // and skips its last hand-off (drain), so consumer 0 waits for consumer 1's finish (carrying the turn over
  // made the causal dropout instance spill 60 bytes).
  static constexpr bool TURN_ACROSS_ITEMS = D == 64;
  __device__ void my_turn() { wg::named_sync(PINGPONG_BAR + c, 2 * wg::WARPGROUP_THREADS); }
  __device__ void their_turn() { wg::named_arrive(PINGPONG_BAR + (c + 1) % NC, 2 * wg::WARPGROUP_THREADS); }

  // A new item, its Q block in q (one of the hop_q_stages buffers).
  __device__ void start(const hop_coord &w, const QBlock<D> &q) {
#pragma unroll
    for (int pn = 0; pn < L::PANELS; pn++) dq[pn] = wg::desc_k128(q.q + pn * L::Q_PANEL + c * 64 * 128);
    q_rows = q.q + c * 64 * 128;
#pragma unroll
    for (int i = 0; i < acc_o::REGS; i++) o.v[i] = 0.f;
    m_run[0] = m_run[1] = neg_infty();
    l_run[0] = l_run[1] = 0.f;
    r0 = w.mb * HBLOCK_M + 64 * c;
    bh = w.b * g.a.heads + w.h;
    if (!TURN_ACROSS_ITEMS && c == NC - 1) their_turn();
  }

  // Key tile j (the pipeline has waited for its K; the hand-written kernel waited for it after my_turn):
  // S_j = Q K_j^T, then O += P_{j-1} V_{j-1} with the previous tile's P (j > 0), the softmax of S_j into
  // p[]. The group of S_j is issued first: the softmax waits only for it.
  __device__ void compute(const KVSlot<D> &sl, const KVSlot<D> &prev, int j) {
    if (j > 0) rescale_o();       // by the factor of tile j-1 (O is not in flight here)
    if (Q_REGS && j == 0) {
      load_q();
      if (ITEM_AFTER_FIRST) wg::sync(1 + c);  // every thread has read the Q block before the leader frees it
    }
    my_turn();
    issue_s(sl.tiles.k);
    if (j > 0) issue_pv(prev);    // reading p[] from registers
    their_turn();
    draw_keep(j);                 // (DROPOUT) while S_j and P_{j-1} V_{j-1} run
    if (j > 0) wg::mma_wait<1>(s.v);  // S_j done (groups complete in order)
    else wg::mma_wait<0>(s.v);
    softmax(j);
    if (j > 0) wg::mma_wait<0>(o.v);  // P_{j-1} V_{j-1} done: slot j-1 (the pipeline frees it) and p[]
    to_p();
  }

  // After the last tile (the pipeline has released Q: every S of the item is done): its P V.
  __device__ void drain(const KVSlot<D> &last) {
    rescale_o();
    my_turn();
    issue_pv(last);
    if (TURN_ACROSS_ITEMS || c != NC - 1) their_turn();
    wg::mma_wait<0>(o.v);
  }

  // O /= l (dropout: times 1 / (1 - p)), lse = (m c + log2 l) ln 2; lse straight from registers (one
  // lane per row), O by store_o (DIRECT_O) or stage_o.
  __device__ void finish(const hop_coord &w) {
    const int T_ = g.a.seq;
    float inv_l[2], lse[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      const float l = quad_sum(l_run[hr]);
      if constexpr (DROPOUT) inv_l[hr] = g.a.drop.keep_scale / l;  // kept values scaled by 1 / (1 - p)
      else inv_l[hr] = 1.f / l;
      lse[hr] = (m_run[hr] * g.a.scale_log2 + fast_log2(l)) * LN2;
    }
    const int row_lo = r0 + acc_s::row(0);
    if ((me & 3) == 0) {
      float *lse_row = g.a.lse + (int64_t(w.b) * g.a.heads + w.h) * T_;
      if (row_lo < T_) lse_row[row_lo] = lse[0];
      if (row_lo + 8 < T_) lse_row[row_lo + 8] = lse[1];
    }
    if constexpr (DIRECT_O) store_o(w, inv_l);
    else stage_o(w, inv_l);
  }

  __device__ void last() {
    if (TURN_ACROSS_ITEMS && c == 0) my_turn();  // consumer 1's last hand-off
    if (!DIRECT_O && me == 0) bulk_wait_group<0>();
  }

 private:
  // O straight from registers, 16 bytes a lane (wg::store_rows: each quad transposes its words first, so a warp
  // instruction writes 8 rows x 64 contiguous bytes), rows >= T skipped.
  __device__ void store_o(const hop_coord &w, const float (&inv_l)[2]) {
    T *o_rows = static_cast<T *>(g.a.o) + w.b * g.a.o_s.b + w.h * g.a.o_s.h + int64_t(r0) * g.a.o_s.t;
    wg::store_rows<T, D>(o_rows, g.a.o_s.t, o.v, inv_l, g.a.seq - r0);
  }
  // O through this warpgroup's rows of the staging buffer, swizzled like the TMA box, then one TMA store per
  // 64-column panel (rows >= T are dropped by TMA).
  __device__ void stage_o(const hop_coord &w, const float (&inv_l)[2]) {
    char *const o_stage = ctx_scratch + c * 64 * 128;
    if (me == 0) bulk_wait_group_read<0>();  // the previous item's store has read the staging buffer
    wg::sync(1 + c);
#pragma unroll
    for (int i = 0; i < acc_o::REGS; i++) o.v[i] *= inv_l[(i >> 1) & 1];  // (start() zeroes O for the next item)
    wg::store_tile<T>(o_stage, o.v, L::Q_PANEL);  // one stmatrix.x4 a warp per 16 columns
    fence_proxy_async_shared();
    wg::sync(1 + c);
    if (me == 0 && r0 < g.a.seq) {     // (a box wholly past T would be dropped anyway)
      for (int pn = 0; pn < L::PANELS; pn++)
        tma::store_async(g.o_map, o_stage + pn * L::Q_PANEL, pn * PANEL_COLS, r0, w.h, w.b);
      bulk_commit_group();
    }
  }
  // Q_REGS: this consumer's 64 query rows as wgmma A fragments, from the Q block (dq[0]'s tile)
  __device__ void load_q() {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) wg::load_a_fragment(qf[kk], q_rows + (kk / 4) * L::Q_PANEL, kk % 4);
  }
  __device__ void issue_s(const char *k_tile) {
    wg::mma_fence(s.v);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const uint64_t dk = wg::desc_k128(k_tile + (kk / 4) * L::KV_PANEL);
      if constexpr (Q_REGS)
        wg::wgmma_rs<T, HBLOCK_N, false>(s.v, qf[kk].r, wg::desc_advance_k(dk, kk % 4), kk > 0);
      else
        wg::wgmma_ss<T, HBLOCK_N>(s.v, wg::desc_advance_k(dq[kk / 4], kk % 4), wg::desc_advance_k(dk, kk % 4), kk > 0);
    }
    wg::mma_commit();
  }
  __device__ void issue_pv(const KVSlot<D> &sl) {
    sl.wait(1);                   // its V has landed
    wg::mma_fence(o.v);
    const uint64_t dv = wg::desc_mn128(sl.tiles.v, L::KV_PANEL);
#pragma unroll
    for (int kk = 0; kk < HBLOCK_N / 16; kk++)
      wg::wgmma_rs<T, D, true>(o.v, p[kk].r, wg::desc_advance_k_mn(dv, kk), 1);
    wg::mma_commit();
  }
  // The keep bits of key tile j of this warpgroup's rows (the exchange buffer alternates with j: items
  // are separated by the finish's warpgroup barriers, so the partner has read the last tile's bits).
  __device__ void draw_keep(int j) {
    if constexpr (DROPOUT) {
      const int w = me >> 5, pw = w & 1, lane = me & 31;
      uint32_t lo, hi;
      dropout_bits_wg_lane(dkey, bh, r0 + 32 * (w >> 1), j * HBLOCK_N + 64 * pw, thr16, lane, lo, hi);
      uint32_t(*xb)[32] = hop_keep_xchg[c][j & 1];
      xb[w][lane] = pw ? lo : hi;                        // the partner's rows
      wg::named_sync(DROP_PAIR_BAR + 2 * c + (w >> 1), 64);
      const uint32_t got = xb[w ^ 1][lane], mine = pw ? hi : lo;
      keep[0] = pw ? got : mine;                         // keys 0..63 of the tile
      keep[1] = pw ? mine : got;                         // keys 64..127
    }
  }
  // Masks S (key tile j), updates m and l, turns S into P in place (fp32); alpha = the O rescale factors.
  __device__ void softmax(int j) {
    const int n0 = j * HBLOCK_N, T_ = g.a.seq;
    const float sc = g.a.scale_log2;
    if (CAUSAL && n0 + HBLOCK_N - 1 > r0) {
#pragma unroll
      for (int i = 0; i < acc_s::REGS; i++)
        if (n0 + acc_s::col(i) > r0 + acc_s::row(i)) s.v[i] = neg_infty();
    }
    if (!CAUSAL && n0 + HBLOCK_N > T_) {
#pragma unroll
      for (int i = 0; i < acc_s::REGS; i++)
        if (n0 + acc_s::col(i) >= T_) s.v[i] = neg_infty();
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      float mx = m_run[hr];
#pragma unroll
      for (int q = 0; q < HBLOCK_N / 8; q++) mx = fmaxf(mx, fmaxf(s.v[4 * q + 2 * hr], s.v[4 * q + 2 * hr + 1]));
      mx = quad_max(mx);
      alpha[hr] = fast_exp2((m_run[hr] - mx) * sc);   // 0 on the first tile (m = -inf)
      m_run[hr] = mx;
      const float mc = mx * sc;
      float sum = 0.f;
#pragma unroll
      for (int q = 0; q < HBLOCK_N / 8; q++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
          float &x = s.v[4 * q + 2 * hr + e];
          x = fast_exp2(fmaf(x, sc, -mc));
          sum += x;
        }
      }
      l_run[hr] = l_run[hr] * alpha[hr] + sum;
    }
    if constexpr (DROPOUT) {  // after the row sums: l (and lse) are those of the undropped P
#pragma unroll
      for (int i = 0; i < acc_s::REGS; i++) s.v[i] = (keep[i >> 5] >> (i & 31)) & 1u ? s.v[i] : 0.f;
    }
  }
  __device__ void rescale_o() {
#pragma unroll
    for (int i = 0; i < acc_o::REGS; i++) o.v[i] *= alpha[(i >> 1) & 1];
  }
  __device__ void to_p() {
#pragma unroll
    for (int kk = 0; kk < HBLOCK_N / 16; kk++) wg::to_a_fragment(p[kk], s.v, kk);
  }
};

// The description: the ring holds key tiles (K and V, FULL_BYTES: S = Q K^T may start before V lands),
// the per-item buffer the Q block, the scratch the O staging buffer.
template <typename T, int D, bool CAUSAL, bool DROPOUT>
struct HopPipe {
  using L = hop_layout<D>;
  using globals = HopGlobals<DROPOUT>;
  using stage = KVTile<D>;
  using item_stage = QBlock<D>;
  using work = hop_coord;
  // causal D = 64: the dynamic walk (its producer needs more than 24 registers: 52 bytes of spill there; the
  // D = 128 consumers cannot give any up, so D = 128 keeps the static walk)
  static constexpr bool DYNAMIC_WALK = CAUSAL && D == 64;
  using scheduler = ItemWalk<CAUSAL, DYNAMIC_WALK>;
  using consumer = HopConsumer<T, D, CAUSAL, DROPOUT>;
  static constexpr int STAGES = hop_stages(D, DROPOUT), CONSUMERS = NC, ITEM_STAGES = hop_q_stages(D);
  // 128 x 24 + 2 x 128 x 240 (or 56 + 2 x 224) <= the 3 x 128 x 168 registers the CTA is launched with
  static constexpr int PRODUCER_REGS = DYNAMIC_WALK ? 56 : 24, CONSUMER_REGS = DYNAMIC_WALK ? 224 : 240;
  static constexpr unsigned FULL_BYTES[2] = {L::KV_BYTES, L::KV_BYTES};
  static constexpr int SCRATCH_BYTES = hop_direct_o(D, DROPOUT) ? 0 : L::Q_BYTES;
  __device__ static int iterations(const globals &g, const hop_coord &w) { return hop_tiles<CAUSAL>(g.a, w.mb); }
  __device__ static void load_item(const pipeline::item_slot<QBlock<D>> &s, const globals &g, const hop_coord &w) {
    for (int p = 0; p < L::PANELS; p++)
      tma::load_async(s.tiles.q + p * L::Q_PANEL, g.q_map, s.full, p * PANEL_COLS, w.mb * HBLOCK_M, w.h, w.b);
  }
  __device__ static void load(const KVSlot<D> &s, const globals &g, const hop_coord &w, int j) {
    for (int p = 0; p < L::PANELS; p++)
      tma::load_async(s.tiles.k + p * L::KV_PANEL, g.k_map, s.full(0), p * PANEL_COLS, j * HBLOCK_N, w.h, w.b);
    for (int p = 0; p < L::PANELS; p++)
      tma::load_async(s.tiles.v + p * L::KV_PANEL, g.v_map, s.full(1), p * PANEL_COLS, j * HBLOCK_N, w.h, w.b);
  }
};
template <typename T, int D, bool CAUSAL, bool DROPOUT>
using HopPipeline = pipeline::kernel<HopPipe<T, D, CAUSAL, DROPOUT>>;

template <typename T, int D, bool CAUSAL, bool DROPOUT>
__global__ void __launch_bounds__(HopPipeline<T, D, CAUSAL, DROPOUT>::THREADS, 1)
attention_fwd_hopper_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                            const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map,
                            const __grid_constant__ hop_args_t<DROPOUT> a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  HopPipeline<T, D, CAUSAL, DROPOUT>::run(HopGlobals<DROPOUT>{q_map, k_map, v_map, o_map, a});
#else
  __trap();
#endif
}

// A persistent grid: one CTA per SM (fewer when there are fewer work items) walking the work items.
template <typename T, int D, bool CAUSAL, bool DROPOUT>
cudaError_t launch_hopper(const FwdParams &p, cudaStream_t stream, const char **why) {
  CUtensorMap qm, km, vm, om;
  try {
    qm = bhtd_map<T>(p.q, p.q_s, p.B, p.H, p.T, D, HBLOCK_M);
    km = bhtd_map<T>(p.k, p.k_s, p.B, p.H, p.T, D, HBLOCK_N);
    vm = bhtd_map<T>(p.v, p.v_s, p.B, p.H, p.T, D, HBLOCK_N);
    om = bhtd_map<T>(p.o, p.o_s, p.B, p.H, p.T, D, 64);
  } catch (const std::exception &e) {  // a tensor map the driver rejects (alignment, strides)
    static thread_local std::string reason;
    reason = std::string("tensor map: ") + e.what();
    if (why) *why = reason.c_str();
    return cudaErrorInvalidValue;
  }
  hop_args_t<DROPOUT> a{};
  a.seq = p.T;
  a.heads = p.H;
  a.batch = p.B;
  a.scale_log2 = p.scale * LOG2E;
  a.lse = p.lse;
  a.o = p.o;
  a.o_s = p.o_s;
  a.tile_counter = p.tile_counter;
  if constexpr (DROPOUT) {
    a.drop.rng = p.rng;
    a.drop.threshold = dropout_threshold(p.dropout_p);
    a.drop.keep_scale = 1.f / (1.f - p.dropout_p);
    a.drop.rng_out = p.rng_state;
  }
  using pipe = HopPipeline<T, D, CAUSAL, DROPOUT>;
  constexpr int smem = pipe::SHARED_BYTES;
  auto kernel = attention_fwd_hopper_kernel<T, D, CAUSAL, DROPOUT>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  int64_t n_blocks = int64_t((p.T + HBLOCK_M - 1) / HBLOCK_M) * p.H * p.B;
  if (n_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if ((err = persistent_blocks(n_blocks, n_blocks)) != cudaSuccess) return err;
  kernel<<<unsigned(n_blocks), pipe::THREADS, smem, stream>>>(qm, km, vm, om, a);
  return cudaGetLastError();
}

template <typename T, bool DROPOUT>
cudaError_t dispatch_hopper(const FwdParams &p, cudaStream_t stream, const char **why) {
  if (p.D == 64)
    return p.causal ? launch_hopper<T, 64, true, DROPOUT>(p, stream, why)
                    : launch_hopper<T, 64, false, DROPOUT>(p, stream, why);
  if (p.D == 128)
    return p.causal ? launch_hopper<T, 128, true, DROPOUT>(p, stream, why)
                    : launch_hopper<T, 128, false, DROPOUT>(p, stream, why);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t attention_forward_hopper(const FwdParams &p, cudaStream_t stream, const char **why) {
  if (p.B < 1 || p.H < 1 || p.T < 1) return cudaErrorInvalidValue;
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return cudaErrorInvalidValue;
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f)) return cudaErrorInvalidValue;
  const bool drop = p.dropout_p > 0.f;
  if (drop && p.rng_state == nullptr) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16)
    return drop ? dispatch_hopper<bf16, true>(p, stream, why) : dispatch_hopper<bf16, false>(p, stream, why);
  if (p.dtype == DType::fp16)
    return drop ? dispatch_hopper<half, true>(p, stream, why) : dispatch_hopper<half, false>(p, stream, why);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
