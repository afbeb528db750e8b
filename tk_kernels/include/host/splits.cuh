// Host side of persistent GEMM scheduling: how many ways to split K so that a small grid of output tiles fills the GPU.
//
//   int splits = tk::host::wave_filling_splits(tiles, k_tiles, sms);
//
// The fewest splits whose units (tiles x splits) fill >= 90% of the waves of `sms` CTAs they take, keeping >= 4 K slices
// a unit and at most 16 splits (else the split with the best fill); 1 when the tiles alone fill the GPU. Users: the MLP
// family's weight-gradient GEMMs (gemm_splits), the fused classifier's dx GEMM.
#pragma once

namespace tk::host {

inline int wave_filling_splits(int tiles, int k_tiles, int sms) {
  if (tiles >= sms) return 1;
  int best = 1;
  double best_fill = 0.0;
  for (int splits = 1; splits <= 16 && splits * 4 <= k_tiles; splits++) {
    const int units = tiles * splits, waves = (units + sms - 1) / sms;
    const double fill = double(units) / (double(waves) * sms);
    if (fill >= 0.9) return splits;
    if (fill > best_fill) best = splits, best_fill = fill;
  }
  return best;
}

}  // namespace tk::host
