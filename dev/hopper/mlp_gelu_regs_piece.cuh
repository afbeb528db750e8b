// dev/mlp_gemm_variants.py's gelu_regs variant inserts this into tk_kernels/families/mlp/csrc/gemm.cu (not a header
// of its own: it uses gemm.cu's definitions).
// GELU from registers: the pending tile is the rounded pre-activation (+ bias); piece p writes its 8 words
// (words 8p .. 8p + 7 of the tile, always pend.word[0..7]: every piece shifts the pending words down by 8,
// so one rolled copy of the piece's code serves all 8) into the pre-activation box and their GELU into
// the output box; after the second half of a box both boxes are TMA-stored as one bulk group.
constexpr int HALF_WORDS = PIECE_WORDS / 2;

template <typename T, bool TANH>
__device__ __forceinline__ void gelu_piece(Pending<T> &pend, const int piece, int consumer, const CUtensorMap &g_map,
                                           const CUtensorMap &pre_map, char *staging, int &stores) {
  using V = vec2<T>;
  const int me = tk::wg::warpgroup_thread(), cb = piece / 2;
  const int row0 = pend.unit.m0 + consumer * 64, col0 = pend.unit.n0 + cb * BOX;
  char *pre_box = staging + (stores & 1) * BOX_BYTES, *g_box = staging + (2 + (stores & 1)) * BOX_BYTES;
  if (piece % 2 == 0) {  // the group that last read these two boxes is done with them
    if (me == 0) tk::bulk_wait_group_read<1>();
    tk::wg::sync(1 + consumer);
  }
  // two halves of 4 words each (a whole piece's 16 GELUs in flight beside the 192 registers of the next tile's
  // accumulator and this pending tile spilled), each shifting the pending words down by 4
#pragma unroll 1
  for (int h = 0; h < 2; h++) {
#pragma unroll
    for (int q = 0; q < HALF_WORDS; q++) {
      const int i = piece_pair(piece, h * HALF_WORDS + q);
      const int r = tk::wg::accumulator<BN>::row(i), c = tk::wg::accumulator<BN>::col(i) - cb * BOX;
      const int off = tk::wg::swizzle128_offset(r, c);
      const uint32_t u = pend.word[q];
      const float2 x = V::unpack_word(u);
      *reinterpret_cast<uint32_t *>(pre_box + off) = u;
      *reinterpret_cast<uint32_t *>(g_box + off) = to_word(V::pack(gelu(x.x, TANH), gelu(x.y, TANH)));
    }
#pragma unroll
    for (int k = 0; k < BN / 4 - HALF_WORDS; k++) pend.word[k] = pend.word[k + HALF_WORDS];
  }
  if (piece % 2 == 1) {
    tk::fence_proxy_async_shared();
    tk::wg::sync(1 + consumer);
    if (me == 0) {
      tk::tma::store_async(pre_map, pre_box, col0, row0);
      tk::tma::store_async(g_map, g_box, col0, row0);
      tk::bulk_commit_group();
    }
    stores++;
  }
}
