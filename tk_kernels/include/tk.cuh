// ThunderKittens-style tile DSL (header-only, C++20 CUDA, sm_80+). Include this one header.
//
//   types/   rt (register tiles), rv (col_vec / row_vec), st (swizzled shared tiles), sv, gl (global layouts)
//   ops/warp/memory/    global<->shared (cp.async), shared<->register (ldmatrix), register->global
//   ops/warp/register/  mma_AB/ABt/AtB/AtBt, element-wise maps, reductions, masks, layout changes
// Hopper extensions (ops/warpgroup/ for wgmma, TMA loads) slot in next to ops/warp/.
#pragma once
#include "common/base_types.cuh"
#include "common/util.cuh"
#include "types/register/rt.cuh"
#include "types/register/rv.cuh"
#include "types/shared/st.cuh"
#include "types/shared/sv.cuh"
#include "types/global/gl.cuh"
#include "ops/warp/memory/async.cuh"
#include "ops/warp/memory/global_to_shared.cuh"
#include "ops/warp/memory/shared_to_register.cuh"
#include "ops/warp/memory/register_to_shared.cuh"
#include "ops/warp/memory/shared_to_global.cuh"
#include "ops/warp/memory/register_to_global.cuh"
#include "ops/warp/memory/vec.cuh"
#include "ops/warp/memory/atomic_add_pitched.cuh"
#include "ops/warp/memory/bulk_reduce.cuh"
#include "ops/warp/register/mma.cuh"
#include "ops/warp/register/maps.cuh"
#include "ops/warp/register/reductions.cuh"
#include "ops/warp/register/masks.cuh"
#include "ops/warp/register/layout.cuh"
