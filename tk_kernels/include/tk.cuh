// ThunderKittens-style tile DSL (header-only, C++20 CUDA, sm_80+). Include this one header.
//
//   common/            dtypes, packing, small utilities, Philox4x32-R and the dropout keep test shared by the families
//   types/             rt (register tiles), rv (col_vec / row_vec), st (swizzled shared tiles), sv, gl (global layouts)
//   warp/memory/       one warp (or NT cooperating threads): global<->shared (cp.async), shared<->register (ldmatrix)
//   warp/register/     one warp: mma_AB/ABt/AtB/AtBt, element-wise maps, reductions, masks, layout changes
//   thread/            issued by one thread: TMA bulk operations (sm_90+), 16-byte vectors of 8 elements (vec8)
//   block/             the whole CTA: fixed-order sums over slices of a workspace (sum_slices)
// Hopper warpgroup ops (wgmma) go in warpgroup/ next to warp/; pipeline/ holds the producer / consumer
// template of persistent TMA + wgmma kernels (pipeline/producer_consumer.cuh). Neither is included here:
// their users include them.
#pragma once
#include "common/base_types.cuh"
#include "common/util.cuh"
#include "common/philox.cuh"
#include "common/dropout.cuh"
#include "types/register/rt.cuh"
#include "types/register/rv.cuh"
#include "types/shared/st.cuh"
#include "types/shared/sv.cuh"
#include "types/global/gl.cuh"
#include "warp/memory/async.cuh"
#include "warp/memory/global_to_shared.cuh"
#include "warp/memory/shared_to_register.cuh"
#include "warp/memory/register_to_shared.cuh"
#include "warp/memory/shared_to_global.cuh"
#include "warp/memory/register_to_global.cuh"
#include "warp/memory/vec.cuh"
#include "warp/register/mma.cuh"
#include "warp/register/maps.cuh"
#include "warp/register/reductions.cuh"
#include "warp/register/masks.cuh"
#include "warp/register/layout.cuh"
#include "thread/bulk.cuh"
#include "thread/vec8.cuh"
#include "block/reduce.cuh"
