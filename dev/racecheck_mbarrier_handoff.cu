// Does compute-sanitizer's racecheck model mbarrier arrive / wait? (session 17)
//
// The pipeline's DYNAMIC schedulers hand each item to the consumers through shared memory: the producer thread
// stores the item's record, then arrives on the item buffer's full mbarrier (arrive has release semantics); the
// consumers wait on that barrier (try_wait: acquire) and read the record, then arrive on the buffer's empty barrier,
// which the producer waits on before it overwrites the record. racecheck reported hazards between those stores and
// loads (s17b). This program runs the same hand-off alone, with two controls, so the tool's verdict can be read:
//   mbarrier     the pipeline's hand-off (correct under the PTX memory model)
//   syncthreads  the same data passed with __syncthreads (correct; racecheck knows this barrier)
//   none         no waits at all (a real race: racecheck must report it)
// Build and run (sm_90):
//   nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I tk_kernels/include dev/racecheck_mbarrier_handoff.cu -o /tmp/handoff
//   for m in mbarrier syncthreads none; do compute-sanitizer --tool racecheck /tmp/handoff $m; done
#include <cstdio>
#include <cstring>
#include "thread/mbarrier.cuh"

constexpr int SLOTS = 2, ROUNDS = 64, READERS = 256;  // two consumer warpgroups read each record

template <int MODE>  // 0 mbarrier, 1 syncthreads, 2 none
__global__ void handoff(int *out) {
  __shared__ tk::barrier full[SLOTS], empty[SLOTS];
  __shared__ int record[SLOTS][2];
  if (threadIdx.x == 0) {
    for (int k = 0; k < SLOTS; k++) {
      tk::init(full[k], 1);
      tk::init(empty[k], READERS);
    }
    tk::fence_barrier_init();
  }
  __syncthreads();
  const bool producer = threadIdx.x < 32;
  int sum = 0;
  for (int r = 0; r < ROUNDS; r++) {
    const int k = r % SLOTS, use = r / SLOTS;
    if constexpr (MODE == 1) {
      if (threadIdx.x == 0) { record[k][0] = r; record[k][1] = 2 * r; }
      __syncthreads();
      if (!producer) sum += record[k][0] + record[k][1];
      __syncthreads();
    } else if (producer) {
      if (threadIdx.x == 0) {
        if (MODE == 0) tk::wait(empty[k], (use & 1) ^ 1);
        record[k][0] = r;
        record[k][1] = 2 * r;
        tk::arrive(full[k]);
      }
    } else {
      if (MODE == 0) tk::wait(full[k], use & 1);
      sum += record[k][0] + record[k][1];
      tk::arrive(empty[k]);
    }
  }
  if (!producer) atomicAdd(out, sum);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "mbarrier";
  int *out;
  cudaMalloc(&out, sizeof(int));
  cudaMemset(out, 0, sizeof(int));
  if (!strcmp(mode, "mbarrier")) handoff<0><<<1, 32 + READERS>>>(out);
  else if (!strcmp(mode, "syncthreads")) handoff<1><<<1, 32 + READERS>>>(out);
  else handoff<2><<<1, 32 + READERS>>>(out);
  int got = 0;
  cudaError_t err = cudaMemcpy(&got, out, sizeof(int), cudaMemcpyDeviceToHost);
  if (err == cudaSuccess) err = cudaGetLastError();
  const int want = READERS * 3 * (ROUNDS * (ROUNDS - 1) / 2);
  printf("%s: %s, sum %d (expected %d%s)\n", mode, cudaGetErrorString(err), got, want,
         strcmp(mode, "none") ? "" : "; a racy run may differ");
  return err == cudaSuccess ? 0 : 1;
}
