// Producer / consumer pipeline of a persistent Hopper kernel (sm_90a): one producer warpgroup feeds a
// ring of shared-memory stages by TMA, CONSUMERS warpgroups compute on them, and every CTA walks its
// share of the work items. The kernel says what a stage holds, how one stage is loaded and what a
// consumer does with it; this template owns the rest: the ring and its mbarriers, phase parities,
// register reallocation (setmaxnreg), the producer's issue loop and the consumers' item loop.
//
//   template <...> __global__ void __launch_bounds__(tk::pipeline::kernel<P>::THREADS, 1)
//   my_kernel(const __grid_constant__ CUtensorMap a, ..., const Shape s) { tk::pipeline::kernel<P>::run(P::globals{a, ..., s}); }
//   launch with kernel<P>::THREADS threads and kernel<P>::SHARED_BYTES of dynamic shared memory
//
// Zero overhead is the point: everything inlines into the kernel, phases are the same arithmetic a
// hand-written kernel does, optional hooks cost nothing when absent. The MLP GEMMs ported onto it kept
// their registers, HGMMA / TMA counts and no spills (families/mlp/csrc/gemm.cu), and so did the Hopper
// attention forward (families/attention/csrc/hopper_forward.cu: FULL_BYTES, item_stage, PEEL_FIRST,
// compute with the previous slot, drain with the last) and, within 1-2% of its instructions, the
// attention backward (hopper_backward.cu: ONE_ITEM, side_stage, setup, SELF_PACED). Keep tensor maps as
// references to the kernel's __grid_constant__ parameters in `globals` (the GEMM with one by-value
// __grid_constant__ struct of maps and shapes instead spilled twice as much in an intermediate version).
//
// The description P (a struct of types, constants and static functions):
//
//   using globals = ...;       the kernel's arguments (tensor maps by reference, shapes); const& everywhere
//   using stage = ...;         one ring slot's shared tiles, a struct (alignas(1024) for 128B-swizzled tiles)
//   using work = ...;          one work item (e.g. an output tile and its K range)
//   STAGES, CONSUMERS          ring depth, consumer warpgroups (threads: 128 x (1 + CONSUMERS))
//   PRODUCER_REGS, CONSUMER_REGS   registers per thread after setmaxnreg
//   struct scheduler           the persistent walk: scheduler(const globals &); bool next(work &) gives
//                              this CTA's next item, false when none is left. Producer and consumers each
//                              run their own copy, so it must be deterministic (unless DYNAMIC).
//   optional scheduler::DYNAMIC = true: only the producer runs the scheduler (its next() may take items from a
//                              global counter by atomicAdd, so CTAs that finish early take more); the template
//                              hands each item to the consumers through a shared-memory record per item buffer
//                              (needs P::item_stage, not ONE_ITEM)
//   int iterations(const globals &, const work &)     ring slots the item uses, >= 1 (assumed: the
//                              compiler is told so, which kept the plain-store GEMM free of spills)
//   void load(const slot &, const globals &, const work &, int i)
//                              producer, one thread: issue the TMA loads of the item's i-th slot. The
//                              template has waited for the slot to be free and announced its bytes
//                              (sizeof(stage) + sizeof(side_stage), or FULL_BYTES) on all its full
//                              barriers before any load.
//   struct consumer            one per consumer warpgroup, its registers live across items:
//     consumer(const globals &, const consumer_ctx &)   once, after setmaxnreg (ctx: id, scratch, item)
//     void compute(const slot &, int i)    the item's i-th slot has landed (full barrier 0): issue its work
//       or compute(const slot &s, const slot &prev, int i)   the same, with the item's slot i - 1 (prev
//                                is s when i == 0): for work that reads a slot one step late (attention's
//                                P V of the previous key tile). The template derives it from its slot
//                                count, so a consumer keeps no pointers into the ring across slots.
//   optional (detected; absent = nothing to do):
//     P::FULL_BYTES[F]           F full barriers per slot and the bytes each completes on (e.g. K and V
//                                tiles of attention, so that S = Q K^T may start before V lands); the
//                                template waits on barrier 0 before compute, the consumer on the others
//                                (slot::wait(j)); default: one barrier, the stage's (and side's) bytes
//     P::side_stage              a small per-slot buffer outside the 1024-aligned stage (slot::side()), for
//                                data that would pad a stage (attention backward: 512 B of lse / Delta next
//                                to 32 KB of tiles); STAGES of them, sizeof apart, after the scratch (which
//                                ends 1024-aligned); loaded by load() like the stage, on the same barriers
//     P::ONE_ITEM                true: every CTA has exactly one work item (a grid of one CTA per item):
//                                run() makes the scheduler once, before the barrier setup and the role
//                                split, both roles take their copy of it, the item loop runs once and the
//                                per-item buffer has no empty barrier (nothing reuses it)
//     P::setup(const globals &)  thread 0, after the barrier initialisation, before the one CTA barrier
//                                (e.g. values every warpgroup then reads from static shared memory)
//     P::SCRATCH_BYTES           shared bytes after the ring for the consumers (ctx.scratch, 1024-aligned)
//     P::item_stage, P::load_item(item_slot, globals, work)   a per-item buffer (e.g. attention's Q tile)
//                                with its own full / empty barriers: loaded before the item's first slot,
//                                waited on before compute(.., 0), released once the last slot's retire()
//                                has returned (before drain())
//     P::ITEM_STAGES             per-item buffers in a ring of their own (default 1): with 2 the producer
//                                loads the next item's buffer while the consumers still work on this item,
//                                instead of after its last slot (so its load latency is not exposed between
//                                items). The consumer then takes the item's buffer in start(work, item_stage &)
//                                (ctx.item is null): every consumer of an item_stage may take it there
//     consumer::start(work)      per item, before its first slot (or start(work, item_stage &): above)
//     consumer::ITEM_IN_DRAIN    true: drain() still reads the per-item buffer, so the template frees it after
//                                drain() instead of before (the attention backward's last query block reads K, V)
//     consumer::ITEM_AFTER_FIRST true: compute(.., 0) is the last to read the per-item buffer (it copied what it
//                                needs into registers, and every thread of the warpgroup has finished reading
//                                when it returns), so the template frees it after the first slot instead of
//                                after the last: the producer can load the next item's buffer during the whole
//                                item. Needs PEEL_FIRST, no deferred pieces, not ITEM_IN_DRAIN.
//     consumer::retire()         after compute(i): every slot but the newest has been read (wgmma: wait<1>);
//                                the template then frees slot i - 1
//     consumer::drain()          after the item's last slot: every slot has been read (wgmma: wait<0>);
//                                the template then frees the last slot
//       or drain(const slot &last)   the same, with the item's last slot (the late work's final step)
//     consumer::finish(work)     per item, after drain (the epilogue, or staging it for the deferred pieces)
//     consumer::DEFERRED_PIECES, deferred(int piece), UNROLL_PIECES
//                                a deferred epilogue: the previous item's finish continues in PIECES pieces,
//                                piece p right after the first slot of the p-th of PIECES equal runs of the
//                                next item's slots had been issued (so it runs under that slot's MMAs), and
//                                after the last item all pieces in a row. UNROLL_PIECES = true unrolls the
//                                piece loop (compile-time piece indices, e.g. registers picked by piece); a
//                                rolled loop retires the piece's slot before the piece, an unrolled one after.
//     consumer::last()           after the last item (e.g. wait for outstanding TMA stores)
//     P::epilogue, P::EPILOGUE_REGS   (optional) a fourth warpgroup that runs beside the consumers: constructed
//                                from (const globals &, const epilogue_ctx &) after setmaxnreg<EPILOGUE_REGS>,
//                                then run(scheduler &) with its own copy of the static walk (not DYNAMIC, not
//                                ONE_ITEM). The kernel hands it work through its own barriers in the scratch
//                                (the MLP GEMM: each finished tile, so that the consumers never run its GELU)
//     P::CLUSTER                 CTAs per cluster (default 1; 2 supported): launched as clusters of CLUSTER CTAs
//                                along x, whose schedulers walk items in lockstep (the same number of items and
//                                of slots each). A slot of every CTA of the cluster is freed together: each
//                                consumer frees it in all of them (empty barriers count CONSUMERS x CLUSTER
//                                arrivals), so one CTA's load() may multicast a tile into the same slot of all
//                                (tma::load_async_multicast; each CTA's full barrier still expects the whole
//                                stage). The barriers are initialised before a cluster-wide sync, and each
//                                producer waits for its slots' last releases before it exits, so that no CTA
//                                leaves while another may still arrive on its barriers. Not with an item_stage,
//                                DYNAMIC, ONE_ITEM or SELF_PACED.
//     consumer::SELF_PACED       true: the consumer waits for every slot (slot::wait(0)) and frees it
//                                (slot::release(), thread 0 of the warpgroup) itself, where it chooses (the
//                                attention backward frees slot i - 1 inside compute(i), before it waits for
//                                slot i); the template then neither waits nor frees (retire() still runs)
//     consumer::PEEL_FIRST       true: the item's first slot is issued apart from the slot loop, so
//                                compute(.., 0) and compute(.., i > 0) compile separately (the loop is
//                                told i > 0) and a consumer whose first slot differs (attention: no P V
//                                yet) branches on i at compile time only. ptxas serialises wgmmas whose
//                                accumulators cross a runtime branch (C7518 / C7515). Not with DEFERRED_PIECES.
//     consumer::PAIRED_SLOTS     true: the slot loop is unrolled by two and the slot's parity is a compile-time
//                                argument: template <int PARITY> void compute(const slot &, int i), PARITY = i % 2.
//                                For a consumer whose wgmmas read registers it fills per slot (A from registers): it
//                                keeps two register sets and fills set PARITY, so that slot i's loads never overwrite
//                                the set slot i - 1's wgmmas read, still in flight until retire(). ptxas does not
//                                guard that hazard: a rolled loop with one set compiles without a warning, its next
//                                ldmatrix writing the in-flight HGMMA's registers (dev/README, session 26). The
//                                consumer keeps both sets live (pin_registers) after retire()'s wait and after
//                                drain()'s, or the compiler may reuse the last slot's before its wgmmas are done. Not
//                                with DEFERRED_PIECES, PEEL_FIRST or compute with the previous slot.
//
// Slot i of an item is ring slot g % STAGES of the CTA-wide slot count g, used for the (g / STAGES)-th
// time: its full barrier completes phase (g / STAGES) & 1. Barriers: full[s][f] one arrival (the
// producer's expect_bytes) plus the bytes; empty[s] CONSUMERS x CLUSTER arrivals (thread 0 of each consumer).
// The template uses no named barriers (ids 1..15 are the kernel's) and syncs the CTA once, after
// initialising the barriers.
#pragma once
#include <concepts>
#include <cstdint>
#include <type_traits>
#include "../common/util.cuh"
#include "../thread/cluster.cuh"
#include "../thread/mbarrier.cuh"
#include "../warpgroup/mma.cuh"

namespace tk::pipeline {

struct no_side {};

// What P::epilogue (the optional epilogue warpgroup) gets: the scratch the consumers get too.
struct epilogue_ctx {
  char *scratch;
};

// A ring slot as the producer and the consumers see it: its tiles, its full barrier(s), this use's parity,
// its empty barrier and its side buffer (P::side_stage).
template <typename Stage, int FULL = 1, typename Side = no_side>
struct slot {
  Stage &tiles;
  barrier *full_bars;  // FULL barriers
  int parity;
  barrier *empty_bar;
  Side *side_ptr;      // nullptr without P::side_stage
  __device__ barrier &full(int j = 0) const { return full_bars[j]; }
  __device__ void wait(int j) const { tk::wait(full_bars[j], parity); }  // consumers: barrier j of this slot
  __device__ void release() const { arrive(*empty_bar); }  // SELF_PACED consumers, thread 0: slot read
  __device__ Side &side() const { return *side_ptr; }
};

// The per-item buffer (P::item_stage) and its full barrier.
template <typename Item>
struct item_slot {
  Item &tiles;
  barrier &full;
};

struct no_item {};

template <typename Item = no_item>
struct consumer_ctx {
  int id;         // 0 .. CONSUMERS - 1
  char *scratch;  // P::SCRATCH_BYTES of shared memory after the ring (and item stage), 1024-aligned
  Item *item;     // the per-item buffer (P::item_stage), or nullptr
};

// A persistent walk's next item index (idx: the previous one, -1 before the first): item blockIdx.x first, then
// with a counter (global memory, zero at launch) the next one nobody has taken, gridDim.x + atomicAdd(counter, 1)
// (a DYNAMIC scheduler: only the producer may call this), without one (nullptr) every gridDim.x-th.
__device__ __forceinline__ int next_item(int idx, int *counter) {
  if (idx < 0) return int(blockIdx.x);
  return counter ? int(gridDim.x) + atomicAdd(counter, 1) : idx + int(gridDim.x);
}

namespace detail {
template <typename P> constexpr int full_count() {
  if constexpr (requires { P::FULL_BYTES; }) return int(sizeof(P::FULL_BYTES) / sizeof(P::FULL_BYTES[0]));
  else return 1;
}
template <typename P> struct side_of { using type = no_side; static constexpr int bytes = 0; };
template <typename P> requires requires { typename P::side_stage; }
struct side_of<P> { using type = typename P::side_stage; static constexpr int bytes = int(sizeof(type)); };
template <typename P> constexpr uint32_t full_bytes(int j) {
  if constexpr (requires { P::FULL_BYTES; }) return uint32_t(P::FULL_BYTES[j]);
  else return uint32_t(sizeof(typename P::stage) + side_of<P>::bytes);
}
template <typename P> constexpr bool one_item() {
  if constexpr (requires { P::ONE_ITEM; }) return bool(P::ONE_ITEM);
  else return false;
}
template <typename P, typename G> __device__ __forceinline__ void setup(const G &g) {
  if constexpr (requires { P::setup(g); }) P::setup(g);
}
template <typename P> constexpr int scratch_bytes() {
  if constexpr (requires { P::SCRATCH_BYTES; }) return int(P::SCRATCH_BYTES);
  else return 0;
}
template <typename P> struct item_of { using type = no_item; static constexpr int bytes = 0; };
template <typename P> requires requires { typename P::item_stage; }
struct item_of<P> { using type = typename P::item_stage; static constexpr int bytes = int(sizeof(type)); };
template <typename S> constexpr bool dynamic() {
  if constexpr (requires { S::DYNAMIC; }) return bool(S::DYNAMIC);
  else return false;
}
// DYNAMIC schedulers: the items the producer hands the consumers, one record per per-item buffer, each with its
// own barriers: full (the producer's arrive publishes the record), empty (EVERY consumer thread arrives once it has
// read the record, so that all the reads come before the producer's next write: with the item buffer's empty
// barrier, where only each consumer's leader arrives, racecheck reported those reads and writes as hazards)
template <typename W, int N> struct item_records {
  barrier full[N], empty[N];
  W work[N];
  int live[N];  // 0: no item left (the consumers stop)
};
struct no_records {};
template <typename P> constexpr int item_stages() {
  if constexpr (requires { P::ITEM_STAGES; }) return int(P::ITEM_STAGES);
  else return 1;
}
template <typename P> constexpr int cluster() {
  if constexpr (requires { P::CLUSTER; }) return int(P::CLUSTER);
  else return 1;
}
template <typename P> struct epilogue_of { using type = void; static constexpr int regs = 0; };
template <typename P>
  requires requires { typename P::epilogue; P::EPILOGUE_REGS; }
struct epilogue_of<P> { using type = typename P::epilogue; static constexpr int regs = int(P::EPILOGUE_REGS); };
template <typename C> constexpr int deferred_pieces() {
  if constexpr (requires { C::DEFERRED_PIECES; }) return int(C::DEFERRED_PIECES);
  else return 0;
}
template <typename C> constexpr bool peel_first() {
  if constexpr (requires { C::PEEL_FIRST; }) return bool(C::PEEL_FIRST);
  else return false;
}
template <typename C> constexpr bool self_paced() {
  if constexpr (requires { C::SELF_PACED; }) return bool(C::SELF_PACED);
  else return false;
}
template <typename C> constexpr bool item_in_drain() {
  if constexpr (requires { C::ITEM_IN_DRAIN; }) return bool(C::ITEM_IN_DRAIN);
  else return false;
}
template <typename C> constexpr bool item_after_first() {
  if constexpr (requires { C::ITEM_AFTER_FIRST; }) return bool(C::ITEM_AFTER_FIRST);
  else return false;
}
template <typename C> constexpr bool paired_slots() {
  if constexpr (requires { C::PAIRED_SLOTS; }) return bool(C::PAIRED_SLOTS);
  else return false;
}
template <typename C> constexpr bool unroll_pieces() {
  if constexpr (requires { C::UNROLL_PIECES; }) return bool(C::UNROLL_PIECES);
  else return false;
}
// the consumer's optional hooks: called when the consumer has them
template <typename C, typename W, typename I> __device__ __forceinline__ void start(C &c, const W &w, I *item) {
  if constexpr (requires { c.start(w, *item); }) c.start(w, *item);
  else if constexpr (requires { c.start(w); }) c.start(w);
}
template <typename C> __device__ __forceinline__ void retire(C &c) {
  if constexpr (requires { c.retire(); }) c.retire();
}
template <typename C, typename S> __device__ __forceinline__ void drain(C &c, const S &last) {
  if constexpr (requires { c.drain(last); }) c.drain(last);
  else if constexpr (requires { c.drain(); }) c.drain();
}
template <typename C, typename W> __device__ __forceinline__ void finish(C &c, const W &w) {
  if constexpr (requires { c.finish(w); }) c.finish(w);
}
template <typename C> __device__ __forceinline__ void deferred(C &c, int piece) {
  if constexpr (requires { c.deferred(piece); }) c.deferred(piece);
}
template <typename C> __device__ __forceinline__ void last(C &c) {
  if constexpr (requires { c.last(); }) c.last();
}
}  // namespace detail

template <typename P>
struct kernel {
  using globals = typename P::globals;
  using stage = typename P::stage;
  using work = typename P::work;
  using consumer = typename P::consumer;
  using item_stage = typename detail::item_of<P>::type;
  using side_stage = typename detail::side_of<P>::type;
  static constexpr bool HAS_ITEM = detail::item_of<P>::bytes > 0;
  static constexpr bool HAS_SIDE = detail::side_of<P>::bytes > 0;
  static constexpr bool ONE = detail::one_item<P>();
  static constexpr int STAGES = P::STAGES, CONSUMERS = P::CONSUMERS;
  static constexpr int ITEM_STAGES = detail::item_stages<P>();
  static constexpr int FULL = detail::full_count<P>();
  static constexpr int CLUSTER = detail::cluster<P>();
  using epilogue_t = typename detail::epilogue_of<P>::type;
  static constexpr bool HAS_EPILOGUE = !std::is_void_v<epilogue_t>;
  static constexpr int EPILOGUE_REGS = HAS_EPILOGUE ? detail::epilogue_of<P>::regs : 0;
  static constexpr int WARPGROUPS = 1 + CONSUMERS + (HAS_EPILOGUE ? 1 : 0);
  static constexpr int THREADS = 128 * WARPGROUPS;
  static constexpr int RING_BYTES = STAGES * int(sizeof(stage));
  static constexpr int ITEM_OFFSET = RING_BYTES;
  static constexpr int SCRATCH_OFFSET = RING_BYTES + ITEM_STAGES * detail::item_of<P>::bytes;
  static constexpr int SIDE_OFFSET = SCRATCH_OFFSET + detail::scratch_bytes<P>();
  static constexpr int SHARED_BYTES = SIDE_OFFSET + STAGES * detail::side_of<P>::bytes + 1024;  // + alignment slack
  static constexpr int PIECES = detail::deferred_pieces<consumer>();
  static constexpr bool UNROLL = detail::unroll_pieces<consumer>();
  static constexpr bool PEEL = detail::peel_first<consumer>();
  static constexpr bool PAIRED = detail::paired_slots<consumer>();
  static constexpr bool SELF_PACED = detail::self_paced<consumer>();
  static constexpr bool ITEM_IN_DRAIN = detail::item_in_drain<consumer>();
  static constexpr bool ITEM_AFTER_FIRST = detail::item_after_first<consumer>();
  static constexpr bool DYN = detail::dynamic<typename P::scheduler>();
  using records_t = std::conditional_t<DYN, detail::item_records<work, ITEM_STAGES>, detail::no_records>;
  using slot_t = slot<stage, FULL, side_stage>;

  // the description's readable compile-time checks
  static_assert(STAGES >= 1 && STAGES <= 16, "pipeline: STAGES (ring depth) must be 1..16");
  static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "pipeline: 1..3 consumer warpgroups (4 warpgroups per CTA at most)");
  static_assert(WARPGROUPS <= 4, "pipeline: a producer, the consumers and an epilogue warpgroup: 4 warpgroups at most");
  static_assert(!HAS_EPILOGUE || (!DYN && !ONE), "pipeline: P::epilogue walks its own copy of a static scheduler");
  static_assert(alignof(stage) <= 1024 && sizeof(stage) % 1024 == 0,
                "pipeline: a stage is a whole number of 1024-byte blocks (128B-swizzled tiles start on 1024 bytes)");
  static_assert(!HAS_ITEM || sizeof(item_stage) % 1024 == 0, "pipeline: item_stage must be a multiple of 1024 bytes");
  static_assert(ITEM_STAGES == 1 || ITEM_STAGES == 2, "pipeline: ITEM_STAGES (per-item buffers) must be 1 or 2");
  static_assert(!ITEM_AFTER_FIRST || (HAS_ITEM && PEEL && PIECES == 0 && !ITEM_IN_DRAIN),
                "pipeline: ITEM_AFTER_FIRST needs an item_stage, PEEL_FIRST, no deferred pieces and not ITEM_IN_DRAIN");
  static_assert(!DYN || (HAS_ITEM && !ONE), "pipeline: a DYNAMIC scheduler needs an item_stage (one item record per item buffer) and more than one item per CTA (not ONE_ITEM)");
  static_assert(ITEM_STAGES == 1 || (HAS_ITEM && !ONE), "pipeline: ITEM_STAGES = 2 needs an item_stage and more than one item per CTA");
  static_assert(ITEM_STAGES == 1 || requires(consumer &c, const work &w, item_stage &b) { c.start(w, b); },
                "pipeline: with ITEM_STAGES = 2 the consumer takes the item's buffer in start(const work &, item_stage &)");
  static_assert(FULL >= 1 && FULL <= 4, "pipeline: 1..4 full barriers per slot");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "pipeline: CLUSTER (CTAs per cluster) must be 1 or 2");
  static_assert(CLUSTER == 1 || (!HAS_ITEM && !DYN && !ONE && !SELF_PACED),
                "pipeline: CLUSTER > 1 with an item_stage, DYNAMIC, ONE_ITEM or SELF_PACED is not supported");
  static_assert(SHARED_BYTES <= 227 * 1024,
                "pipeline: ring + item stage + scratch + 1 KB alignment exceed the 227 KB of shared memory of an sm_90 CTA");
  // setmaxnreg only moves registers between the CTA's warps: the CTA keeps what it was launched with,
  // LAUNCH_REGS per thread (__launch_bounds__(THREADS, 1): 65536 / THREADS in steps of 8, 168 for three
  // warpgroups; ptxas -v reports that count for every kernel that uses setmaxnreg). A consumer increase beyond
  // what the producer gave back waits forever (session 10: producer 64 + 2 x 224 = 512 > 3 x 168 hung the GPU).
  static constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8 < 256 ? 65536 / THREADS / 8 * 8 : 256;
  static_assert(P::PRODUCER_REGS + CONSUMERS * P::CONSUMER_REGS + EPILOGUE_REGS <= WARPGROUPS * LAUNCH_REGS,
                "pipeline: PRODUCER_REGS + CONSUMERS x CONSUMER_REGS (+ EPILOGUE_REGS) exceed the registers the CTA "
                "is launched with (warpgroups x LAUNCH_REGS): the consumers' setmaxnreg would wait forever");
  static_assert(!HAS_EPILOGUE || (EPILOGUE_REGS % 8 == 0 && EPILOGUE_REGS >= 24 && EPILOGUE_REGS <= 256),
                "pipeline: EPILOGUE_REGS is a multiple of 8 in [24, 256]");
  static_assert(P::PRODUCER_REGS <= P::CONSUMER_REGS, "pipeline: the producer gives registers to the consumers");
  static_assert(PIECES >= 0 && PIECES <= 64, "pipeline: DEFERRED_PIECES must be 0..64");
  static_assert(!UNROLL || PIECES > 0, "pipeline: UNROLL_PIECES without DEFERRED_PIECES");
  static_assert(!PEEL || PIECES == 0, "pipeline: PEEL_FIRST with DEFERRED_PIECES (the pieces' runs separate the first slot already)");
  static_assert(requires(typename P::scheduler s, work w) { { s.next(w) } -> std::same_as<bool>; },
                "pipeline: P::scheduler needs bool next(work &)");
  static_assert(requires(const globals &g, const work &w) { { P::iterations(g, w) } -> std::convertible_to<int>; },
                "pipeline: P needs static int iterations(const globals &, const work &)");
  static_assert(requires(const slot_t &s, const globals &g, const work &w) { P::load(s, g, w, 0); },
                "pipeline: P needs static void load(const slot &, const globals &, const work &, int i)");
  static constexpr bool WITH_PREV = requires(consumer &c, const slot_t &s) { c.compute(s, s, 0); };
  static_assert(PAIRED || WITH_PREV || requires(consumer &c, const slot_t &s) { c.compute(s, 0); },
                "pipeline: P::consumer needs void compute(const slot &, int i) or compute(const slot &, const slot &prev, int i)");
  static_assert(!PAIRED || requires(consumer &c, const slot_t &s) { c.template compute<0>(s, 0); c.template compute<1>(s, 1); },
                "pipeline: a consumer with PAIRED_SLOTS needs template <int PARITY> void compute(const slot &, int i)");
  static_assert(!PAIRED || (PIECES == 0 && !PEEL && !WITH_PREV),
                "pipeline: PAIRED_SLOTS with DEFERRED_PIECES, PEEL_FIRST or compute with the previous slot is not supported");
  static_assert(PIECES == 0 || requires(consumer &c) { c.deferred(0); },
                "pipeline: a consumer with DEFERRED_PIECES needs void deferred(int piece)");
  static_assert(!HAS_ITEM || requires(const item_slot<item_stage> &s, const globals &g, const work &w) {
                  P::load_item(s, g, w); }, "pipeline: P::item_stage needs static void load_item(const item_slot &, const globals &, const work &)");

  __device__ static void run(const globals &g) {
    if constexpr (ONE) {
      const sched_t one(g);  // the CTA's one item, derived once by every thread before the role split
      run_with(g, one);
    } else {
      run_with(g, 0);
    }
  }

 private:
  using sched_t = typename P::scheduler;
  // the walk a role runs: its own copy of the scheduler, or (ONE_ITEM) the one run() made
  template <typename One>
  __device__ static __forceinline__ sched_t walk(const globals &g, const One &one) {
    if constexpr (ONE) return one;
    else return sched_t(g);
  }

  template <typename One>
  __device__ static __forceinline__ void run_with(const globals &g, const One &one) {
    extern __shared__ char smem_raw[];
    char *base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    stage *ring = reinterpret_cast<stage *>(base);
    __shared__ barrier full[STAGES * FULL], empty[STAGES];
    __shared__ barrier item_bar[HAS_ITEM ? 2 * ITEM_STAGES : 1];  // item full [ITEM_STAGES], item empty [ITEM_STAGES]
    __shared__ records_t records;                                  // (DYN) the items handed to the consumers
    if (threadIdx.x == 0) {
      for (int i = 0; i < STAGES; i++) {
        for (int f = 0; f < FULL; f++) init(full[i * FULL + f], 1);
        init(empty[i], CONSUMERS * CLUSTER);  // every consumer of the cluster frees the slot
      }
      if constexpr (HAS_ITEM) {
        for (int k = 0; k < ITEM_STAGES; k++) {
          init(item_bar[k], 1);
          if constexpr (!ONE) init(item_bar[ITEM_STAGES + k], CONSUMERS);
        }
      }
      if constexpr (DYN) {
        for (int k = 0; k < ITEM_STAGES; k++) {
          init(records.full[k], 1);
          init(records.empty[k], CONSUMERS * wg::WARPGROUP_THREADS);
        }
      }
      fence_barrier_init();
      detail::setup<P>(g);
    }
    if constexpr (CLUSTER > 1) cluster_sync();  // the partner's barriers are live before anyone arrives on them
    else __syncthreads();

    if (wg::warpgroupid() == 0) {
      wg::set_max_registers_from<P::PRODUCER_REGS, LAUNCH_REGS>();
      if (wg::warpgroup_thread() == 0) produce(g, ring, full, empty, item_bar, base, one, records);
      return;
    }
    if constexpr (HAS_EPILOGUE) {
      if (wg::warpgroupid() == 1 + CONSUMERS) {
        wg::set_max_registers_from<EPILOGUE_REGS, LAUNCH_REGS>();
        epilogue_t e(g, epilogue_ctx{base + SCRATCH_OFFSET});
        sched_t sched(g);
        e.run(sched);
        return;
      }
    }
    wg::set_max_registers_from<P::CONSUMER_REGS, LAUNCH_REGS>();
    consume(g, ring, full, empty, item_bar, base, one, records);
  }
  // item `it`'s per-item buffer (item ring slot it % ITEM_STAGES, used for the (it / ITEM_STAGES)-th time)
  __device__ static __forceinline__ item_stage *item_at(char *base, int it) {
    return reinterpret_cast<item_stage *>(base + ITEM_OFFSET) + it % ITEM_STAGES;
  }
  __device__ static __forceinline__ slot_t slot_at(stage *ring, barrier *full, barrier *empty, int n) {
    side_stage *side = nullptr;
    if constexpr (HAS_SIDE)
      side = reinterpret_cast<side_stage *>(reinterpret_cast<char *>(ring) + SIDE_OFFSET) + n % STAGES;
    return slot_t{ring[n % STAGES], full + (n % STAGES) * FULL, (n / STAGES) & 1, empty + n % STAGES, side};
  }

  // a consumer's leader frees ring slot b: in every CTA of the cluster (its own by a local arrival)
  __device__ static __forceinline__ void free_slot(barrier &b) {
    arrive(b);
    if constexpr (CLUSTER > 1) {
      const int me = cluster_rank();
#pragma unroll
      for (int r = 0; r < CLUSTER; r++)
        if (r != me) arrive_cluster(b, r);
    }
  }

  // the bytes of full barriers F.. of a slot, as compile-time constants (P::FULL_BYTES is a host
  // constant: read at a runtime index in device code it is undefined, and the compiler made the
  // producer trap)
  template <int F = 0>
  __device__ static __forceinline__ void announce(const slot_t &s) {
    if constexpr (F < FULL) {
      constexpr uint32_t bytes = detail::full_bytes<P>(F);
      expect_bytes(s.full(F), bytes);
      announce<F + 1>(s);
    }
  }

  // one thread: keep the ring full across all of this CTA's items
  template <typename One>
  __device__ static __forceinline__ void produce(const globals &g, stage *ring, barrier *full, barrier *empty,
                                                 barrier *item_bar, char *base, const One &one, records_t &records) {
    sched_t sched = walk(g, one);
    int n = 0;   // slots issued so far
    int it = 0;  // items so far
    // DYN: each item (and after the last one, a record without an item) goes to the consumers in the record
    // of its item buffer, once every consumer thread has read the record's previous use
    auto fetch = [&](work &w) {
      const bool more = sched.next(w);
      if constexpr (DYN) {
        const int k = it % ITEM_STAGES, use = it / ITEM_STAGES;
        wait(records.empty[k], (use & 1) ^ 1);
        if (more) records.work[k] = w;
        records.live[k] = more ? 1 : 0;
        arrive(records.full[k]);
      }
      return more;
    };
    for (work w; fetch(w); it++) {
      if constexpr (HAS_ITEM) {
        const int k = it % ITEM_STAGES, use = it / ITEM_STAGES;
        // every consumer is done with the buffer's previous item (the first use finds it free: parity 1)
        if constexpr (!ONE) wait(item_bar[ITEM_STAGES + k], (use & 1) ^ 1);
        expect_bytes(item_bar[k], uint32_t(sizeof(item_stage)));
        P::load_item(item_slot<item_stage>{*item_at(base, it), item_bar[k]}, g, w);
      }
      const int iters = P::iterations(g, w);
      for (int i = 0; i < iters; i++, n++) {
        const slot_t s = slot_at(ring, full, empty, n);
        wait(empty[n % STAGES], s.parity ^ 1);  // the first pass finds every slot free (parity 1)
        announce(s);
        P::load(s, g, w, i);
      }
      if constexpr (ONE) break;
    }
    if constexpr (CLUSTER > 1) {  // every consumer of the cluster has freed every slot: no arrival is on its way here
      for (int k = 0; k < STAGES; k++, n++) wait(empty[n % STAGES], ((n / STAGES) & 1) ^ 1);
    }
  }

  template <typename One>
  __device__ static __forceinline__ void consume(const globals &g, stage *ring, barrier *full, barrier *empty,
                                                 barrier *item_bar, char *base, const One &one, records_t &records) {
    const int id = wg::warpgroupid() - 1;
    const bool leader = wg::warpgroup_thread() == 0;
    consumer c(g, consumer_ctx<item_stage>{id, base + SCRATCH_OFFSET,
                                           HAS_ITEM && ITEM_STAGES == 1 ? item_at(base, 0) : nullptr});
    // slot n of the CTA: wait until it has landed, hand it to the consumer; then let it retire all but
    // the newest slot and free the one before (not the previous item's last: drain freed that)
    // (PAIRED: parity is std::integral_constant<int, i % 2>)
    auto issue = [&](int n, int i, auto parity) {
      const slot_t s = slot_at(ring, full, empty, n);
      if constexpr (!SELF_PACED) wait(s.full(0), s.parity);
      if constexpr (PAIRED) c.template compute<decltype(parity)::value>(s, i);
      else if constexpr (WITH_PREV) c.compute(s, i > 0 ? slot_at(ring, full, empty, n - 1) : s, i);
      else c.compute(s, i);
    };
    constexpr std::integral_constant<int, 0> even{};
    constexpr std::integral_constant<int, 1> odd{};
    auto retire = [&](int n, int i) {
      detail::retire(c);
      if constexpr (!SELF_PACED) {
        if (i > 0 && leader) free_slot(empty[(n - 1) % STAGES]);
      }
    };
    sched_t sched = walk(g, one);
    int n = 0;             // slots consumed so far
    int it = 0;            // items so far
    bool pending = false;  // a finished item whose deferred pieces have not run yet
    // the next item: the consumers' own scheduler copy, or (DYN) the producer's record (every thread reads it,
    // then arrives on its empty barrier)
    auto fetch = [&](work &w) {
      if constexpr (DYN) {
        const int k = it % ITEM_STAGES, use = it / ITEM_STAGES;
        wait(records.full[k], use & 1);
        const bool live = records.live[k] != 0;
        if (live) w = records.work[k];
        arrive(records.empty[k]);
        return live;
      } else {
        return sched.next(w);
      }
    };
    for (work w; fetch(w); it++) {
      const int iters = P::iterations(g, w);
      __builtin_assume(iters >= 1);
      if constexpr (HAS_ITEM) {
        detail::start(c, w, item_at(base, it));
        wait(item_bar[it % ITEM_STAGES], (it / ITEM_STAGES) & 1);
      } else {
        detail::start(c, w, static_cast<item_stage *>(nullptr));
      }
      int i = 0;
      if constexpr (PIECES > 0) {
        const int step = max(1, iters / PIECES);  // slots per piece (the last run takes the rest)
        auto piece_run = [&](int piece) {
          const bool more = i < iters;
          if (more) issue(n, i, even);
          // A rolled piece loop (long pieces) retires the slot before the piece rather than after it, so the producer
          // can load into that slot while the piece runs (measured with the MLP GEMM's GELU epilogues when they were
          // pieces on a 3-stage ring, session 21, H100: GELU GEMM 171 -> 169 us, GELU' 187.5 -> 186.5 us at (16384,
          // 3072, 768), bitwise the same). The unrolled short pieces (the plain store, 4 stages) keep the order they
          // were measured with.
          constexpr bool EARLY = !UNROLL;
          if (EARLY && more) retire(n, i);
          if (pending) detail::deferred(c, piece);
          if (more) {
            if (!EARLY) retire(n, i);
            i++, n++;
          }
          for (int j = 1; j < step && i < iters; j++, i++, n++) {
            __builtin_assume(i > 0);  // (not the item's first slot: lets the consumer's i == 0 fold)
            issue(n, i, even);
            retire(n, i);
          }
        };
        if constexpr (UNROLL) {
#pragma unroll
          for (int piece = 0; piece < PIECES; piece++) piece_run(piece);
        } else {
#pragma unroll 1
          for (int piece = 0; piece < PIECES; piece++) piece_run(piece);
        }
      }
      if constexpr (PEEL) {
        issue(n, 0, even);
        retire(n, 0);
        i++, n++;
        if constexpr (ITEM_AFTER_FIRST && !ONE) {  // compute(.., 0) was the item buffer's last reader
          if (leader) arrive(item_bar[ITEM_STAGES + it % ITEM_STAGES]);
        }
      }
      if constexpr (PAIRED) {  // slots in pairs: the parity of slot i is known at compile time (i starts at 0)
        for (; i + 1 < iters; i += 2, n += 2) {
          issue(n, i, even);
          retire(n, i);
          issue(n + 1, i + 1, odd);
          retire(n + 1, i + 1);
        }
        if (i < iters) {
          issue(n, i, even);
          retire(n, i);
          i++, n++;
        }
      } else {
        for (; i < iters; i++, n++) {
          if constexpr (PEEL) __builtin_assume(i > 0);
          issue(n, i, even);
          retire(n, i);
        }
      }
      if constexpr (HAS_ITEM && !ONE && !ITEM_IN_DRAIN && !ITEM_AFTER_FIRST) {
        if (leader) arrive(item_bar[ITEM_STAGES + it % ITEM_STAGES]);
      }
      detail::drain(c, slot_at(ring, full, empty, n - 1));
      if constexpr (!SELF_PACED) {
        if (leader) free_slot(empty[(n - 1) % STAGES]);
      }
      if constexpr (HAS_ITEM && !ONE && ITEM_IN_DRAIN) {
        if (leader) arrive(item_bar[ITEM_STAGES + it % ITEM_STAGES]);
      }
      detail::finish(c, w);
      pending = true;
      if constexpr (ONE) break;
    }
    if constexpr (PIECES > 0) {
      if (pending) {
        if constexpr (UNROLL) {
#pragma unroll
          for (int piece = 0; piece < PIECES; piece++) detail::deferred(c, piece);
        } else {
#pragma unroll 1
          for (int piece = 0; piece < PIECES; piece++) detail::deferred(c, piece);
        }
      }
    }
    detail::last(c);
  }
};

}  // namespace tk::pipeline
