"""Compile tests of tk_kernels/include/pipeline/producer_consumer.cuh (nvcc, sm_90a, no GPU needed).

A toy description uses every optional hook the MLP GEMM does not (two full barriers per slot, a
per-item buffer, start(), compute with the previous slot, drain with the last one, a rolled deferred
epilogue, or PEEL_FIRST without one), so that they compile, stay spill-free and trap-free (a host
constant read in device code is undefined: ptxas turned the producer into a trap once); bad
descriptions must stop at the template's static_assert with its readable message."""

from __future__ import annotations

import os
import subprocess

import pytest

from tk_kernels import build as tkb

TOY = r"""
#include <cuda.h>
#include "pipeline/producer_consumer.cuh"
#include "thread/tma.cuh"
#include "thread/bulk.cuh"

struct alignas(1024) KV { char k[8192]; char v[8192]; };   // two tiles, one full barrier each
struct alignas(1024) Q { char q[16384]; };
struct G { const CUtensorMap &k_map, &v_map, &q_map; int items, tiles; float *out; };
using Slot = tk::pipeline::slot<KV, 2>;
struct Walk {
  int item, items;
  __device__ Walk(const G &g) : item(blockIdx.x), items(g.items) {}
  __device__ bool next(int &w) { if (item >= items) return false; w = item; item += gridDim.x; return true; }
};
struct Consumer {
  static constexpr int DEFERRED_PIECES = PIECES_;
  static constexpr bool PEEL_FIRST = PIECES_ == 0;
  const G &g;
  int id;
  float acc = 0.f;
  KV *prev = nullptr;
  __device__ Consumer(const G &g, const tk::pipeline::consumer_ctx<Q> &ctx) : g(g), id(ctx.id) {}
  __device__ void start(const int &) { acc = 0.f; }
  __device__ void compute(const Slot &s, const Slot &prev, int i) {
    s.wait(1);  // the V tile of this slot (and of prev: waited on in the step before)
    acc += float(s.tiles.k[threadIdx.x]) * float(s.tiles.v[threadIdx.x]) + float(i);
    if (i > 0) acc += float(prev.tiles.v[threadIdx.x]);
  }
  __device__ void drain(const Slot &last) { acc += float(last.tiles.v[threadIdx.x]); }
  __device__ void finish(const int &w) { g.out[w * 256 + threadIdx.x - 128] = acc; }
  __device__ void deferred(int piece) { acc += float(piece); }
  __device__ void last() { if (tk::wg::warpgroup_thread() == 0) tk::bulk_wait_group<0>(); }
};
struct Toy {
  using globals = G;
  using stage = KV;
  using work = int;
  using scheduler = Walk;
  using consumer = Consumer;
  using item_stage = Q;
  static constexpr int STAGES = STAGES_, CONSUMERS = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static constexpr unsigned FULL_BYTES[2] = {8192, 8192};
  static constexpr int SCRATCH_BYTES = 2048;
  __device__ static int iterations(const G &g, const int &) { return g.tiles; }
  __device__ static void load(const Slot &s, const G &g, const int &w, int i) {
    tk::tma::load_async(s.tiles.k, g.k_map, s.full(0), 0, w * 64 + i);
    tk::tma::load_async(s.tiles.v, g.v_map, s.full(1), 0, w * 64 + i);
  }
  __device__ static void load_item(const tk::pipeline::item_slot<Q> &s, const G &g, const int &w) {
    tk::tma::load_async(s.tiles.q, g.q_map, s.full, 0, w * 128);
  }
};
__global__ void __launch_bounds__(tk::pipeline::kernel<Toy>::THREADS, 1)
toy(const __grid_constant__ CUtensorMap k, const __grid_constant__ CUtensorMap v,
    const __grid_constant__ CUtensorMap q, int items, int tiles, float *out) {
  tk::pipeline::kernel<Toy>::run(G{k, v, q, items, tiles, out});
}
static_assert(tk::pipeline::kernel<Toy>::SHARED_BYTES == STAGES_ * 16384 + 16384 + 2048 + 1024);
"""


# The hooks of a non-persistent, consumer-paced kernel (the attention backward's): one work item per CTA
# (ONE_ITEM), a side buffer per slot (side_stage), thread 0's setup() before the CTA barrier, and a
# consumer that waits for and frees its slots itself (SELF_PACED), one step late (PEEL_FIRST).
TOY_PACED = r"""
#include <cuda.h>
#include "pipeline/producer_consumer.cuh"
#include "thread/tma.cuh"

struct alignas(1024) QS { char q[8192]; };
struct Vec { float v[64]; };
struct alignas(1024) KV { char k[16384]; };
struct G { const CUtensorMap &q_map, &v_map, &k_map; int blocks; float *out; };
using Slot = tk::pipeline::slot<QS, 1, Vec>;
__shared__ int toy_head;
struct One {
  int w;
  bool done = false;
  __device__ One(const G &) : w(blockIdx.x) {}
  __device__ bool next(int &out) { if (done) return false; out = w; done = true; return true; }
};
struct Consumer {
  static constexpr bool SELF_PACED = true, PEEL_FIRST = true;
  const G &g;
  float acc = 0.f;
  int w = 0;
  __device__ Consumer(const G &g, const tk::pipeline::consumer_ctx<KV> &) : g(g) {}
  __device__ void start(const int &item) { w = item; }
  __device__ void compute(const Slot &s, const Slot &prev, int i) {
    s.wait(0);
    acc += float(s.tiles.q[threadIdx.x]) * s.side().v[threadIdx.x % 64] + float(toy_head);
    if (i > 0) {
      acc += prev.side().v[threadIdx.x % 64];
      if (tk::wg::warpgroup_thread() == 0) prev.release();
    }
  }
  __device__ void drain(const Slot &last) {
    acc += last.side().v[0];
    if (tk::wg::warpgroup_thread() == 0) last.release();
  }
  __device__ void finish(const int &) { g.out[w * 256 + threadIdx.x - 128] = acc; }
};
struct Toy {
  using globals = G;
  using stage = QS;
  using side_stage = Vec;
  using item_stage = KV;
  using work = int;
  using scheduler = One;
  using consumer = Consumer;
  static constexpr bool ONE_ITEM = true;
  static constexpr int STAGES = STAGES_, CONSUMERS = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  __device__ static void setup(const G &) { toy_head = int(blockIdx.x) * 3; }
  __device__ static int iterations(const G &g, const int &) { return g.blocks; }
  __device__ static void load(const Slot &s, const G &g, const int &w, int i) {
    tk::tma::load_async(s.tiles.q, g.q_map, s.full(), 0, w * 64 + i);
    tk::tma::load_async(s.side().v, g.v_map, s.full(), w * 64 + i, 0);
  }
  __device__ static void load_item(const tk::pipeline::item_slot<KV> &s, const G &g, const int &w) {
    tk::tma::load_async(s.tiles.k, g.k_map, s.full, 0, w * 128);
  }
};
__global__ void __launch_bounds__(tk::pipeline::kernel<Toy>::THREADS, 1)
toy(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap v,
    const __grid_constant__ CUtensorMap k, int blocks, float *out) {
  tk::pipeline::kernel<Toy>::run(G{q, v, k, blocks, out});
}
// ring, item, no scratch, then STAGES side buffers of 256 bytes, + the alignment slack
static_assert(tk::pipeline::kernel<Toy>::SHARED_BYTES == STAGES_ * 8192 + 16384 + STAGES_ * 256 + 1024);
"""


# PAIRED_SLOTS: a GEMM-like consumer whose wgmmas take A from registers (ldmatrix of its 64 rows of the slot's
# 128B-swizzled A tile), filled per slot into the register set of the slot's parity: the set the previous slot's
# wgmmas read stays untouched until retire() has waited for them.
TOY_PAIRED = r"""
#include <cuda.h>
#include <cuda_bf16.h>
#include "pipeline/producer_consumer.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"

struct alignas(1024) AB { char a[128 * 64 * 2]; char b[128 * 64 * 2]; };
struct G { const CUtensorMap &a_map, &b_map; int tiles, k_tiles; float *out; };
using Slot = tk::pipeline::slot<AB>;
struct Walk {
  int item, items;
  __device__ Walk(const G &g) : item(blockIdx.x), items(g.tiles) {}
  __device__ bool next(int &w) { if (item >= items) return false; w = item; item += gridDim.x; return true; }
};
struct Consumer {
  static constexpr bool PAIRED_SLOTS = @PAIRED@;
  const G &g;
  int id;
  tk::wg::accumulator<128> acc;
  tk::wg::a_fragment<__nv_bfloat16> f[2][4];  // a register set per slot parity
  __device__ Consumer(const G &g, const tk::pipeline::consumer_ctx<> &ctx) : g(g), id(ctx.id) {}
  template <int PARITY>
  __device__ void compute(const Slot &s, int i) {
#pragma unroll
    for (int k = 0; k < 4; k++) tk::wg::load_a_fragment(f[PARITY][k], s.tiles.a + id * 64 * 128, k);
    tk::wg::mma_fence(acc.v);
    const uint64_t db = tk::wg::desc_k128(s.tiles.b);
#pragma unroll
    for (int k = 0; k < 4; k++)
      tk::wg::wgmma_rs<__nv_bfloat16, 128>(acc.v, f[PARITY][k].r, tk::wg::desc_advance_k(db, k), i > 0 || k > 0);
    tk::wg::mma_commit();
  }
  __device__ void retire() {
    tk::wg::mma_wait<1>(acc.v);
#pragma unroll
    for (int k = 0; k < 4; k++) {  // both sets live up to here: the one just issued, and the one it retired
      tk::wg::pin_registers(f[0][k].r);
      tk::wg::pin_registers(f[1][k].r);
    }
  }
  __device__ void drain() {
    tk::wg::mma_wait<0>(acc.v);
#pragma unroll
    for (int k = 0; k < 4; k++) {  // the last slot's set is read until this wait: live to here
      tk::wg::pin_registers(f[0][k].r);
      tk::wg::pin_registers(f[1][k].r);
    }
  }
  __device__ void finish(const int &w) {
#pragma unroll
    for (int j = 0; j < acc.REGS; j++) g.out[(w * 2 + id) * 8192 + j * 128 + tk::wg::warpgroup_thread()] = acc.v[j];
  }
};
struct Toy {
  using globals = G;
  using stage = AB;
  using work = int;
  using scheduler = Walk;
  using consumer = Consumer;
  static constexpr int STAGES = STAGES_, CONSUMERS = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  __device__ static int iterations(const G &g, const int &) { return g.k_tiles; }
  __device__ static void load(const Slot &s, const G &g, const int &w, int i) {
    tk::tma::load_async(s.tiles.a, g.a_map, s.full(), i * 64, w * 128);
    tk::tma::load_async(s.tiles.b, g.b_map, s.full(), i * 64, 0);
  }
};
__global__ void __launch_bounds__(tk::pipeline::kernel<Toy>::THREADS, 1)
toy(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b, int tiles, int k_tiles, float *out) {
  tk::pipeline::kernel<Toy>::run(G{a, b, tiles, k_tiles, out});
}
"""


def test_paired_slots_compile_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, TOY_PAIRED.replace("@PAIRED@", "true"))
    # the slot loop unrolled by two: each parity's compute is its own code (4 register-A wgmmas each), plus the odd
    # tail slot's (even parity)
    assert ptx.count("wgmma.mma_async") == 3 * 4, ptx.count("wgmma.mma_async")


def test_paired_slots_need_the_parity_template(tmp_path):
    toy = TOY_PAIRED.replace("@PAIRED@", "true").replace("  template <int PARITY>\n  __device__ void compute(const Slot &s, int i) {",
                                                          "  static constexpr int PARITY = 0;\n  __device__ void compute(const Slot &s, int i) {")
    assert "static constexpr int PARITY = 0;" in toy, "the toy changed: update this test"
    r = _compile(tmp_path, pieces=0, toy=toy)
    assert r.returncode != 0
    assert "a consumer with PAIRED_SLOTS needs template <int PARITY> void compute" in r.stderr, r.stderr[-4000:]


def test_paired_slots_refuse_peel_first(tmp_path):
    toy = TOY_PAIRED.replace("@PAIRED@", "true").replace("static constexpr bool PAIRED_SLOTS = true;",
                                                        "static constexpr bool PAIRED_SLOTS = true, PEEL_FIRST = true;")
    r = _compile(tmp_path, pieces=0, toy=toy)
    assert r.returncode != 0
    assert "PAIRED_SLOTS with DEFERRED_PIECES, PEEL_FIRST or compute with the previous slot" in r.stderr, r.stderr[-4000:]


# The toy with two per-item buffers (ITEM_STAGES = 2: the next item's buffer loads while this item runs), the
# consumer taking its item's buffer in start(w, buffer) and still reading it in drain() (ITEM_IN_DRAIN: the template
# frees the buffer after drain), as the attention forward (Q) and the persistent backward (K / V) do.
def _two_item_buffers(toy: str, start_takes_buffer: bool = True) -> str:
    start = ("  static constexpr bool ITEM_IN_DRAIN = true;\n  Q *qb = nullptr;\n"
             "  __device__ void start(const int &, Q &q) { qb = &q; acc = float(q.q[threadIdx.x]); }"
             if start_takes_buffer else "  __device__ void start(const int &) { acc = 0.f; }")
    out = (toy.replace("  __device__ void start(const int &) { acc = 0.f; }", start)
           .replace("  __device__ void drain(const Slot &last) { acc += float(last.tiles.v[threadIdx.x]); }",
                    "  __device__ void drain(const Slot &last) { acc += float(last.tiles.v[threadIdx.x])"
                    + (" + float(qb->q[threadIdx.x]); }" if start_takes_buffer else "; }"))
           .replace("  using item_stage = Q;\n", "  using item_stage = Q;\n  static constexpr int ITEM_STAGES = 2;\n")
           .replace("SHARED_BYTES == STAGES_ * 16384 + 16384 + 2048 + 1024", "SHARED_BYTES == STAGES_ * 16384 + 2 * 16384 + 2048 + 1024"))
    assert out.count("ITEM_STAGES = 2") == 1 and "2 * 16384" in out, "the toy changed: update _two_item_buffers"
    return out


# The two-buffer toy on a DYNAMIC scheduler (the producer alone walks, taking items from a global counter, and hands
# each item to the consumers in a shared-memory record per item buffer), as the causal attention kernels do.
DYNAMIC_WALK = """__device__ int toy_counter;
struct Walk {
  static constexpr bool DYNAMIC = true;
  int item = -1, items;
  __device__ Walk(const G &g) : items(g.items) {}
  __device__ bool next(int &w) {
    item = tk::pipeline::next_item(item, &toy_counter);
    if (item >= items) return false;
    w = item;
    return true;
  }
};
"""


def _dynamic(toy: str) -> str:
    i, j = toy.index("struct Walk {"), toy.index("struct Consumer {")
    return toy[:i] + DYNAMIC_WALK + toy[j:]


def _compile(tmp_path, stages: int = 3, pieces: int = 4, ptx: bool = False,
             toy: str = TOY) -> subprocess.CompletedProcess:
    cuda_home = tkb.find_cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit (nvcc) found: set CUDA_HOME or put nvcc on PATH to run build tests")
    src = tmp_path / "toy.cu"
    src.write_text(toy)
    out = tmp_path / ("toy.ptx" if ptx else "toy.cubin")
    cmd = [os.path.join(cuda_home, "bin", "nvcc"), "-ptx" if ptx else "-cubin", "-O3", "-std=c++20", "--expt-relaxed-constexpr",
           "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas=-v", f"-I{tkb.INCLUDE_DIR}",
           f"-DSTAGES_={stages}", f"-DPIECES_={pieces}", str(src), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("pieces", [4, 0])  # a deferred epilogue; PEEL_FIRST
def test_every_hook_compiles_without_spills(tmp_path, pieces):
    r = _compile(tmp_path, pieces=pieces)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in r.stderr, r.stderr[-4000:]
    assert "Performance Loss" not in r.stderr, r.stderr[-4000:]


def test_every_hook_compiles_without_traps(tmp_path):
    r = _compile(tmp_path, ptx=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "trap;" not in (tmp_path / "toy.ptx").read_text()


def test_bad_description_stops_at_a_readable_message(tmp_path):
    r = _compile(tmp_path, stages=0)
    assert r.returncode != 0
    assert "pipeline: STAGES (ring depth) must be 1..16" in r.stderr, r.stderr[-4000:]
    r = _compile(tmp_path, stages=14)  # 14 x 16 KB ring + 16 KB Q + scratch: more than 227 KB
    assert r.returncode != 0
    assert "exceed the 227 KB of shared memory" in r.stderr, r.stderr[-4000:]


def _compiles_clean(tmp_path, toy: str) -> str:
    """Compile toy (PEEL_FIRST) to a cubin, spill-free and without ptxas performance warnings, and to PTX without
    traps; return the PTX."""
    r = _compile(tmp_path, pieces=0, toy=toy)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in r.stderr, r.stderr[-4000:]
    assert "Performance Loss" not in r.stderr, r.stderr[-4000:]
    r = _compile(tmp_path, pieces=0, toy=toy, ptx=True)
    assert r.returncode == 0, r.stderr[-4000:]
    ptx = (tmp_path / "toy.ptx").read_text()
    assert "trap;" not in ptx
    return ptx


def test_paced_one_item_hooks_compile_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, TOY_PACED)
    # ONE_ITEM: a full and an empty barrier per slot and the item's full barrier, no item-empty barrier
    assert ptx.count("mbarrier.init") == 3 * 2 + 1, ptx.count("mbarrier.init")


def test_two_item_buffers_compile_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, _two_item_buffers(TOY))
    # 3 stages x (2 full + 1 empty) and 2 item buffers x (full + empty)
    assert ptx.count("mbarrier.init") == 3 * 3 + 2 * 2, ptx.count("mbarrier.init")


def test_two_item_buffers_need_start_with_the_buffer(tmp_path):
    r = _compile(tmp_path, pieces=0, toy=_two_item_buffers(TOY, start_takes_buffer=False))
    assert r.returncode != 0
    assert "with ITEM_STAGES = 2 the consumer takes the item's buffer in start" in r.stderr, r.stderr[-4000:]



def test_dynamic_scheduler_compiles_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, _dynamic(_two_item_buffers(TOY)))
    # as the two-buffer toy, plus a full and an empty barrier for each of the 2 item records
    assert ptx.count("mbarrier.init") == 3 * 3 + 2 * 2 + 2 * 2, ptx.count("mbarrier.init")
    assert "atom.global.add" in ptx or "red.global.add" in ptx


def test_dynamic_scheduler_needs_several_items_per_cta(tmp_path):
    toy = TOY_PACED.replace("struct One {\n", "struct One {\n  static constexpr bool DYNAMIC = true;\n")
    assert "DYNAMIC = true" in toy, "the toy changed: update this test"
    r = _compile(tmp_path, pieces=0, toy=toy)
    assert r.returncode != 0
    assert "a DYNAMIC scheduler needs an item_stage (one item record per item buffer)" in r.stderr, r.stderr[-4000:]


# P::epilogue: a fourth warpgroup with its own copy of the static walk (the MLP GEMM's GELU epilogues)
EPILOGUE = """struct Epi {
  const G &g;
  __device__ Epi(const G &g, const tk::pipeline::epilogue_ctx &) : g(g) {}
  __device__ void run(Walk &walk) {
    for (int w; walk.next(w);) g.out[(1 << 20) + w * 128 + tk::wg::warpgroup_thread()] = float(w) * 5.f;
  }
};
struct Toy {"""


def _with_epilogue(toy: str, regs: str = "PRODUCER_REGS = 24, CONSUMER_REGS = 160", epilogue_regs: int = 96) -> str:
    out = (toy.replace("struct Toy {", EPILOGUE, 1)
           .replace("  using consumer = Consumer;\n",
                    f"  using consumer = Consumer;\n  using epilogue = Epi;\n  static constexpr int EPILOGUE_REGS = {epilogue_regs};\n", 1)
           .replace("PRODUCER_REGS = 40, CONSUMER_REGS = 232", regs, 1))
    assert out.count("using epilogue = Epi;") == 1 and regs in out, "the toy changed: update _with_epilogue"
    return out


def test_epilogue_warpgroup_compiles_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, _with_epilogue(TOY))
    assert ".maxntid 512" in ptx, "a producer, two consumers and the epilogue warpgroup: 512 threads"
    # launched at 128 registers a thread: the producer and the epilogue warpgroup shrink, the consumers grow
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx and "setmaxnreg.dec.sync.aligned.u32 96" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 160" in ptx
    assert "0f40A00000" in ptx  # 5.0: the epilogue warpgroup's own store of w * 5


def test_epilogue_warpgroup_register_budget_is_checked(tmp_path):
    r = _compile(tmp_path, pieces=0, toy=_with_epilogue(TOY, "PRODUCER_REGS = 24, CONSUMER_REGS = 200", 128))
    assert r.returncode != 0
    assert "(+ EPILOGUE_REGS) exceed the registers the CTA" in r.stderr, r.stderr[-4000:]


def test_epilogue_warpgroup_needs_a_static_walk(tmp_path):
    r = _compile(tmp_path, pieces=0, toy=_with_epilogue(_dynamic(_two_item_buffers(TOY))))
    assert r.returncode != 0
    assert "P::epilogue walks its own copy of a static scheduler" in r.stderr, r.stderr[-4000:]


# P::CLUSTER = 2: pairs of CTAs walk their items in lockstep; each loads its own half of a slot and multicasts the
# other half into both (the MLP GEMM's B tile), and frees every slot in both CTAs
TOY_CLUSTER = r"""
#include <cuda.h>
#include "pipeline/producer_consumer.cuh"
#include "thread/cluster.cuh"
#include "thread/tma.cuh"

struct alignas(1024) AB { char a[8192]; char b[8192]; };  // a: this CTA's; b: the pair's, half from each CTA
struct G { const CUtensorMap &a_map, &b_map; int items, tiles; float *out; };
using Slot = tk::pipeline::slot<AB>;
struct Walk {
  int item, items;
  __device__ Walk(const G &g) : item(blockIdx.x / 2), items(g.items) {}
  __device__ bool next(int &w) { if (item >= items) return false; w = item; item += gridDim.x / 2; return true; }
};
struct Consumer {
  const G &g;
  float acc = 0.f;
  __device__ Consumer(const G &g, const tk::pipeline::consumer_ctx<> &) : g(g) {}
  __device__ void compute(const Slot &s, int i) { acc += float(s.tiles.a[threadIdx.x]) * float(s.tiles.b[threadIdx.x]); }
  __device__ void finish(const int &w) { g.out[(w * 2 + tk::cluster_rank()) * 256 + threadIdx.x - 128] = acc; }
};
struct Toy {
  using globals = G;
  using stage = AB;
  using work = int;
  using scheduler = Walk;
  using consumer = Consumer;
  static constexpr int STAGES = STAGES_, CONSUMERS = 2, CLUSTER = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  __device__ static int iterations(const G &g, const int &) { return g.tiles; }
  __device__ static void load(const Slot &s, const G &g, const int &w, int i) {
    const int rank = tk::cluster_rank();
    tk::tma::load_async(s.tiles.a, g.a_map, s.full(), i * 64, (w * 2 + rank) * 64);
    tk::tma::load_async_multicast(s.tiles.b + rank * 4096, g.b_map, s.full(), i * 64, rank * 32, 0b11);
  }
};
__global__ void __launch_bounds__(tk::pipeline::kernel<Toy>::THREADS, 1)
toy(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b, int items, int tiles, float *out) {
  tk::pipeline::kernel<Toy>::run(G{a, b, items, tiles, out});
}
"""


def test_cluster_pair_compiles_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, TOY_CLUSTER)
    assert "barrier.cluster.arrive" in ptx and "barrier.cluster.wait" in ptx  # the barriers are live cluster-wide
    assert ".multicast::cluster" in ptx
    # a consumer frees a slot in both CTAs: mapa + a remote arrival, without .release.cluster (a GPU-wide fence)
    assert "mapa.shared::cluster" in ptx and "mbarrier.arrive.shared::cluster.b64" in ptx
    assert "mbarrier.arrive.release.cluster" not in ptx


def test_cluster_excludes_item_buffers(tmp_path):
    toy = TOY.replace("  static constexpr int STAGES = STAGES_, CONSUMERS = 2,",
                      "  static constexpr int CLUSTER = 2;\n  static constexpr int STAGES = STAGES_, CONSUMERS = 2,", 1)
    assert "CLUSTER = 2" in toy, "the toy changed: update this test"
    r = _compile(tmp_path, pieces=0, toy=toy)
    assert r.returncode != 0
    assert "pipeline: CLUSTER > 1 with an item_stage, DYNAMIC, ONE_ITEM or SELF_PACED is not supported" in r.stderr, \
        r.stderr[-4000:]


def _item_after_first(toy: str) -> str:
    out = toy.replace("  static constexpr bool PEEL_FIRST = PIECES_ == 0;\n",
                      "  static constexpr bool PEEL_FIRST = PIECES_ == 0;\n  static constexpr bool ITEM_AFTER_FIRST = true;\n")
    assert "ITEM_AFTER_FIRST = true" in out, "the toy changed: update _item_after_first"
    return out


def test_item_after_first_compiles_clean(tmp_path):
    ptx = _compiles_clean(tmp_path, _item_after_first(TOY))
    # the same barriers as the plain toy: 3 stages x (2 full + 1 empty), the item buffer's full and empty
    assert ptx.count("mbarrier.init") == 3 * 3 + 2, ptx.count("mbarrier.init")


@pytest.mark.parametrize("case", ["pieces", "item_in_drain"])
def test_item_after_first_needs_peel_first_and_no_late_reader(tmp_path, case):
    if case == "pieces":  # a deferred epilogue (PEEL_FIRST off)
        r = _compile(tmp_path, pieces=4, toy=_item_after_first(TOY))
    else:  # drain() still reads the item buffer
        r = _compile(tmp_path, pieces=0, toy=_item_after_first(_two_item_buffers(TOY)))
    assert r.returncode != 0
    assert "ITEM_AFTER_FIRST needs an item_stage, PEEL_FIRST" in r.stderr, r.stderr[-4000:]
