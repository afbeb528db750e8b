// Flash attention backward for Hopper (sm_90a: wgmma, TMA, mbarriers, setmaxnreg), written with the
// DSL's warpgroup / thread / host layers. Same inputs, outputs and semantics as backward.cu, dropout
// included, without the deterministic dQ mode (ops.py keeps that on the portable backward):
//
//   P = exp(scale Q K^T [+ causal mask] - lse)   dV = P^T dO   dP = dO V^T   dS = P o (dP - Delta)
//   dQ = scale dS K      dK = scale dS^T Q       Delta_i = rowsum(dO_i o O_i)
//   Q, K, V, O, dO, dQ, dK, dV: (B, H, T, D), D in {64, 128}, stride 1 along D, b/h/t strides multiples
//   of 16 bytes (the TMA-read ones nonzero: ops.py's tma_ready); lse: (B, H, T) fp32 natural log, the
//   forward's (hopper_forward.cu or forward.cu).
//
// Launches:
//   1. hbwd_prep_kernel: Delta = rowsum(dO o O) and lse2 = lse log2(e) into two (B H, Tp) fp32 workspaces,
//      and zeros into dq_accum (D floats per row: the workspace's size, whatever its layout; as cuDNN's dot(dO, O)
//      kernel does. H100, session 37: ATen's fill 40.2 us + prep 56.7 -> prep 91.0 at (8,16,2048,128) non-causal;
//      backward TFLOP/s at GPT-2's causal (16,12,1024,64) 241.2, 243.0 -> 247.3, 245.6, GPT-2's step 30.95, 30.79 ->
//      30.80, 30.64 ms, alternated processes), Tp = dq_accum_rows(T) (a multiple of 128), padded with Delta = 0, lse2 =
//      +inf: a padded query row then gets P = 2^(s c - inf) = 0 and dS = 0 without any mask, and every 64-entry block
//      of a row is 16-byte aligned, so the main kernel reads them with TMA. With BwdParams::dbias (a fused projection's
//      bias handed over, no dropout) it also sums dO by column (d b_v, qkv_bias_grad.cuh), as the dQ convert (launch 3)
//      sums dq (d b_q), and qkv_bias_grad_finish_kernel adds up their per-CTA partials (launch 4): GPT-2's layer on an
//      H100, backward + c_attn's column sums of dqkv 343.5 us -> 325.0 us (session 32).
//   2. attention_bwd_hopper_kernel (FlashAttention-3's scheme): a work item is a (128-key block, b, h), 3
//      warpgroups. D = 128: one CTA per item. D = 64: a persistent grid, one CTA per SM walking the items in
//      the same order, with two K / V buffers (the pipeline's ITEM_STAGES = 2), so the next item's K, V and
//      first Q / dO blocks load while the CTA still works on this one (see "Persistent" below). The CTA walks
//      the query blocks (64 queries each) that see its keys and accumulates dK, dV in registers; dQ partials
//      are added into the fp32 workspace dq_accum: one consumer computes the block's whole dQ, by block parity
//      (D = 128 staged in shared memory, one tensor reduce-add a warp; D = 64 vector reductions from registers).
//      It is written on the DSL's producer / consumer template (pipeline/producer_consumer.cuh; the
//      description HbPipe at the end of the kernel section, read top to bottom: globals, the walk over
//      the items (one per CTA at D = 128, ONE_ITEM; persistent at D = 64), the consumer, the description):
//      the template owns the ring, its barriers and parities, setmaxnreg and the producer's loop; the K / V tiles are its
//      per-item buffer, Q / dO a slot's stage, lse2 / Delta the slot's side buffer (side_stage), dS^T
//      the scratch. The consumer waits for and frees its slots itself (SELF_PACED: the
//      pipelined loop frees block j's slot before it waits for block j + 1's, as the hand-written kernel
//      did); the pipelined loop is compute(.., 0) = prologue, compute(.., i) = the rest of block i - 1 and
//      S^T(i), drain = the last block (PEEL_FIRST: no runtime branch around wgmmas).
//      * Warpgroup 0, the producer, shrinks to 24 registers; one thread loads the CTA's K and V tiles
//        once (TMA, rank-4 maps over (D, T, H, B) with the tensors' own strides, as in the forward) and
//        streams Q, dO (64 x D each) and the block's 64 lse2 and Delta entries through a STAGES-deep ring
//        (one "full" barrier with a byte count per slot, one "empty" barrier both consumers arrive on).
//      * Warpgroups 1 and 2, the consumers (240 registers), own 64 keys each (consumer c: keys
//        n0 + 64c ..). Per query block, in the transposed orientation (rows = keys), so that P^T and
//        dS^T come out of the accumulators directly as the register A operand of the dV / dK GEMMs:
//          S^T  = K_c Q^T       wgmma m64n64k16, B = Q K-major in shared memory; A = K_c from shared memory
//                               at D = 128, from registers at D = 64 (loaded once per item)
//          dP^T = V_c dO^T      the same with V_c, dO (its own commit group, after S^T's)
//                               Why registers at D = 64: with both operands in shared memory each m64n64k16
//                               reads 4 KB in 32 tensor cycles, the shared memory's whole 128 B a cycle, and
//                               the loop's TMA and dS^T traffic comes on top; from registers it
//                               reads 2 KB. Measured (H100, session 35, bench_attention.py --graphs --rounds 2,
//                               both builds in one call, backward TFLOP/s before / after, cuDNN): causal
//                               (16,12,1024,64) 225.9 / 233.2 (217.6), (8,16,2048,64) 307.4 / 320.7 (302.6),
//                               (4,16,4096,64) 345.2 / 370.9 (361.2), (64,6,256,64) 75.2 / 75.6 (76.5);
//                               non-causal 314.2 / 335.3 (327.1), 374.0 / 394.2 (393.6), 397.0 / 422.9
//                               (413.2), 143.7 / 144.6 (148.5); dK, dV bitwise the same. (At D = 128, K_c and V_c
//                               would need 64 more registers a thread beside the 192 of the dK, dV, S^T and
//                               dP^T accumulators: more than the consumers' 240.)
//          P^T = 2^(S^T c - lse2_q) (masked: causal key > query, key >= T), dS^T = P^T o (dP^T - Delta_q)
//                               (lse2 read from the slot before dP^T's issue, Delta before the dP^T wait at
//                               D = 64 and right after it at D = 128, where it spilled 32 B before the wait)
//          dV_c += P^T dO       wgmma m64nDk16, A = P^T from registers (wg::to_a_fragment), B = dO
//                               MN-major (wg::desc_mn128), as O += P V in the forward
//          dK_c += dS^T Q       the same with dS^T, Q
//          dS^T -> shared memory (16-bit, 128B-swizzled [128 keys x 64 queries], double-buffered by
//                               block parity), then
//          dQ = dS K            ONE consumer, c = g % 2 for the CTA's g-th query block (the other hands its
//                               dS^T rows over: below): wgmma m64nDk16 over the 128 keys, A = dS (dS^T's
//                               buffer read MN-major), B = K (MN-major, its D / 64 panels): the block's 64
//                               queries x D dims, so every dq_accum element gets one reduction per key block.
//                               (Until session 40 each consumer computed half of dQ^T = K^T dS^T after a
//                               named barrier of both: at D = 128 the head dims 64c.. (m64n64k16), at D = 64
//                               the queries 32c.. (m64n32k16); until session 33, D = 64 had each consumer add
//                               all 64 x 64 over its own 64 keys: twice the reductions, ~2.3 TB/s of L2 reduce
//                               traffic at (4,16,4096,64) non-causal; session 34, H100, backward TFLOP/s before /
//                               after: causal (16,12,1024,64) 211.7 / 227.7, (64,6,256,64) 70.2 / 75.3,
//                               non-causal 131.4 / 143.1 at (64,6,256,64), level elsewhere.)
//        The partial goes into dq_accum, whose 64-query, 64-dim blocks are in the "frag64" layout
//        (dq_accum.cuh: the accumulator in register order, 16 KB contiguous a block, (queries, dims));
//        bwd_dq_convert_kernel turns dq_accum into dq (times scale) afterwards.
//        D = 128: each warp of the block's dQ consumer stores its share (16 runs of 512 B, 2 KB apart, over
//        the block's two frag64 blocks) densely into the CTA's 32 KB of shared staging (16 x 16-byte stores a
//        thread), and its lane 0, after a proxy fence and __syncwarp, adds it by ONE tensor reduce-add
//        (cp.reduce.async.bulk.tensor over the map dq_map: dq_accum as 128 floats x 4 warps x rows of 2 KB,
//        box 128 x 1 x 16): no barrier between the warps. The staging alternates between the consumers with
//        the blocks: the other consumer's lanes 0 wait for their previous reduce-adds to have read it before
//        it arrives on the block's dS^T barrier (hand_over). cuDNN's kernel stages its dQ too (s38a: STS.128
//        as many as our reductions then, 8 UTMAREDG a block). D = 64: each thread adds its registers with
//        red.global.add.v4.f32
//        (4 a thread; 512 contiguous bytes a warp instruction; add_frag64). dS^T goes to shared memory with
//        stmatrix (4 per thread, wg::store_a_fragment).
//        Why one consumer's dQ (session 40, tried at D = 128 in session 39; cuDNN's kernel computes dQ with
//        N = 128 too, s37): at D = 128 the two m64n64 SS chains of dQ^T (each reading 4 KB of shared memory in
//        32 tensor cycles, the shared memory's whole 128 B a cycle) become one m64n128 chain (6 KB in 64
//        cycles: 48 KB a block instead of 64), at D = 64 the two m64n32 chains one m64n64 (32 KB instead of 48,
//        where the D = 64 loop moves ~144 KB a block in ~1,280 tensor cycles), and only the block's dQ consumer
//        waits for the other's dS^T rows (the named barrier both waited at was 5.7% of the stall samples at
//        D = 128, s38e): the other arrives on an mbarrier (hb_ds_ready, phase g for the CTA's block g). dS^T's
//        buffers and the staging are safe by the same order: a consumer arrives for block g only after its dQ
//        of block g - 1 is done and (D = 128) its reduce-adds have read the staging. (The first form,
//        bar.arrive / bar.sync on two named barriers by block parity, measured below, made racecheck report
//        the two consumers' staging stores as unordered.) The runtime branch between the two block bodies holds no
//        wgmma in flight (no C75xx; the two bodies make the kernel ~4.2K SASS instructions instead of
//        ~2.9K at D = 128). bench_attention.py --graphs --rounds 2 --impls tk,cudnn, main / this in
//        alternated processes (H100, session 40, two processes each; backward TFLOP/s, ours / cuDNN after):
//        causal (16,12,1024,64) 246.4, 247.7 / 251.3, 252.5 (1.16x); (8,16,2048,64) 338.5, 337.4 / 345.1,
//        345.2 (1.15x); (4,16,4096,64) 384.0, 376.4 / 384.6, 410.5 (1.10x); (64,6,256,64) 77.7, 77.2 / 78.5,
//        79.2 (1.03x); (8,16,2048,128) 344.9, 350.4 / 352.7, 353.6 (0.93x); (4,16,4096,128) 423.3, 410.4 /
//        430.4, 438.7 (1.00x); (2,16,8192,128) 496.9, 469.8 / 518.2, 511.9 (1.06x); (1,16,16384,128) 543.8,
//        540.9 / 571.6, 563.8 (1.08x); non-causal, same order: 355.1, 354.3 / 367.1, 368.9 (1.13x); 418.4,
//        413.4 / 426.2, 427.9 (1.09x); 414.1, 433.6 / 444.2, 441.8 (1.05x); 147.0, 147.1 / 149.8, 150.0
//        (1.02x); 427.8, 428.4 / 458.5, 453.5 (0.97x); 492.7, 489.8 / 501.4, 507.3 (0.99x); 525.6, 540.1 /
//        555.9, 553.0 (1.04x); 512.6, 521.0 / 535.1, 543.7 (0.99x): +1.6% to +6.6% at every shape. The
//        named-barrier form at D = 128 alone had measured +2.9-6.4% (s39d).
//        Why staged at D = 128 (session 38): Nsight Compute at (8,16,2048,128) non-causal (H100) put the
//        largest consumer stall at the loop head (8.2% of all samples, long_sb): the next block's registers
//        waited for the 8 red.global.add.v4 of the previous one to read them, under the lg queue's throttle
//        (4.2% more); cuDNN's kernel 1.070x ours in cycles. With the staging, and lse2 / Delta read before
//        the GEMM that precedes their use (the short_sb stalls on them were 5.2% + 1.9%), 2,212,911 ->
//        2,157,310 cycles (cuDNN 2,067,835). bench_attention.py --graphs --rounds 2, main and this in
//        alternated processes (H100, s38d), backward TFLOP/s main / staged: D = 128 causal (8,16,2048,128)
//        340.6, 345.9 / 349.4, 343.5; (4,16,4096,128) 390.1, 408.5 / 418.0, 409.1; (2,16,8192,128) 476.3,
//        478.6 / 484.4, 486.3; (1,16,16384,128) 511.8, 509.6 / 537.1, 534.1; non-causal 418.9, 425.8 /
//        425.1, 415.6; 481.8, 488.8 / 485.0, 483.6; 526.4, 527.0 / 527.3, 532.4; 512.1, 512.2 / 523.3,
//        523.7. (The early lse2 / Delta loads alone, D = 64 non-causal: (16,12,1024,64) 348.4, 348.7 /
//        355.5, 354.5; (4,16,4096,64) 405.0, 410.0 / 425.7, 422.3; causal level.) Not at D = 64: its causal
//        dropout instance spilled 8 bytes staged. Other forms compiled, not timed: 8 plain bulk reductions a
//        warp (each in a ptxas ELECT loop: 3320 SASS instructions against 3112) and a writer warp in the
//        producer warpgroup (FlashAttention-3's: the producer thread then spilled 64 bytes at 24 registers);
//        git show 17566d8:dev/patches/attention_bwd_dq_warp_bulk.patch (and _writer_warp.patch).
//        Until session 37 the partial was staged in shared memory in frag64 order (8 x 16-byte stores a
//        thread, a proxy fence, two warpgroup barriers) and added by one thread's 8 KB TMA bulk reductions
//        (cp.reduce.async.bulk): 32 KB of shared-memory writes and 32 KB of TMA reads a block at D = 128,
//        in a loop bound by shared-memory bandwidth; then, until session 38, red.global.add.v4 at both D.
//        Measured (H100, session 37, bench_attention.py
//        --graphs --rounds 2, both builds in one call, two processes each, backward TFLOP/s staged / direct):
//        causal (16,12,1024,64) 232.4, 232.0 / 243.2, 243.4; (8,16,2048,64) 318.6, 318.3 / 334.2, 332.1;
//        (4,16,4096,64) 361.4, 351.9 / 377.3, 366.5; non-causal (16,12,1024,64) 334.9, 334.8 / 344.8, 344.4;
//        D = 128 non-causal (8,16,2048,128) 411.8, 405.1 / 432.3, 425.5, the other D = 128 shapes within
//        -2.5 .. +1 % (run to run +-2 %); GPT-2's train step 31.05, 31.08 -> 30.79, 30.84 ms (alternated).
//        (In the portable backward it is the other way round: bulk reductions beat its red.global.add.v2
//        bursts, session 3.) The frag64 staging and stmatrix had replaced per-element 4-byte stores (xor32
//        staging: 32 stores and ~100 integer instructions for their addresses per block; dS^T: 16 stores with
//        16 address registers): the query-block loop
//        went from 741 to 584 SASS instructions (D = 64 causal), 566 -> 418 (D = 64 non-causal), 807 ->
//        641 / 751 -> 566 (D = 128), 1040 -> 890 (D = 64 causal dropout). Nsight Compute (H200, causal
//        (16,12,1024,64), before the change) had put the gap to cuDNN there: 90.1M executed instructions
//        against cuDNN's 69.2M at the same issue rate (IPC 1.56 vs 1.52), 342 vs 276 us.
//      * The query-block loop is rotated ("pipelined"): S^T of block j + 1 is issued at the end of block
//        j (a prologue issues S^T(0)): at D = 64 right after dQ(j), which the block's dQ consumer waits for
//        alone and adds into dq_accum while S^T(j + 1) runs; at D = 128 after dQ(j)'s reduce-add (registers:
//        below); the other consumer issues it right after its hand-over. Each waits for S^T(j + 1) last; block
//        j + 1 starts with dP^T's issue and the exponentials straight away. The Q / dO slot is freed once dV
//        and dK retire (dQ reads only K and dS^T). Two ptxas constraints shaped it (both -Xptxas -v warnings,
//        both serialize every wgmma of the kernel): no wgmma may be in flight across the loop's back edge (C7514: a first
//        version carried dQ^T(j) into block j + 1), and no wgmma may be issued under a runtime branch
//        (C7520). Hence nothing is pending at the back edge (S^T(j + 1) is waited for at the end of block
//        j), and the last block is a second instance of the loop body (HbConsumer::block<LAST>, LAST =
//        true in drain: no S^T(j + 1)) instead of an if. (Until session 8 non-causal D = 64 ran a "plain"
//        loop that waited for everything, staged dQ^T and only then issued S^T(j + 1); with the cheaper
//        frag64 staging the rotated loop was faster there too: table below; the plain form: git show
//        3efcd3e:tk_kernels/families/attention/csrc/hopper_backward.cu.)
//      * Launch order. Non-causal: head-major; the CTAs of one head start their walk at a query block
//        proportional to kb and wrap around (as the portable backward does), so they do not add into the
//        same dq_accum rows at the same time. Causal (top-left aligned: key block kb visits query blocks
//        2 kb .., earlier ones see none of its keys): the grid is cut into groups of heads whose Q, dO
//        (16-bit) and dq_accum (fp32) rows, 8 T D bytes a head, fill about a quarter of the L2 (the launcher
//        reads the L2 size: 50 MB, T = 1024, D = 64: 25 heads), key-block-major inside a group (the longest
//        walks first) and group after group, so the ~132 resident CTAs share a few heads' rows in L2.
//        A quarter, not half (sessions 12-23): H100, session 24, backward us old / new rule, CUDA-graph
//        replays, A/B/A/B: (16,12,1024,64) 309.9 / 303.6 (1.021x), (16,16,1024,64) 416.6 / 400.1 (1.041x),
//        (8,16,2048,64) 604.9 / 584.3 (1.035x), (64,6,256,64) 1.017x; the longer causal shapes within their
//        run-to-run spread (0.977-1.010x, up to 15% apart between repeats at (4,16,4096,128)). A sweep at T =
//        1024 had 8-32 heads about equally good (394-398 us at 16 heads), 64 worse, all B H heads 1.4x worse.
//        One key-block-major order over all B H heads (what this kernel did before, = one group) has
//        ~132 different heads resident: at (8,16,2048,128) ~260 MB of Q / dO / dq_accum traffic in
//        flight against the 50 MB L2.
//      * Finish: dV and scale * dK go through shared memory (stmatrix into 64-column 128B-swizzled panels)
//        and out by TMA stores, D / 64 panels of 64 keys each a consumer (rows >= T dropped by TMA). D = 128:
//        over the dS^T / dQ scratch, after a named barrier of both consumers (HB_FINISH_BAR: the other's last
//        dQ GEMM has read dS^T, the reduce-adds the staging); D = 64: in 32 KB of the consumer's own, so that the
//        stores run on under the persistent walk's next item. Until session 42 each thread stored its registers
//        with 64 (D = 128) / 32 (D = 64) 4-byte stores, each warp instruction touching 8 rows. Measured (H100,
//        session 42, bench_attention.py --graphs --rounds 2 --impls tk,cudnn, main / this in alternated processes,
//        two each, backward TFLOP/s): causal (16,12,1024,64) 252.3, 251.5 / 280.2, 280.0; (8,16,2048,64) 347.4,
//        347.4 / 369.0, 368.7; (4,16,4096,64) 390.8, 394.2 / 412.4, 405.5; (64,6,256,64) 78.0, 78.1 / 87.6,
//        87.7; (8,16,2048,128) 371.5, 364.0 / 368.1, 390.5; (4,16,4096,128) 435.2, 444.8 / 451.3, 455.2;
//        (2,16,8192,128) 516.6, 519.1 / 530.7, 518.2; (1,16,16384,128) 565.8, 578.6 / 571.8, 567.1;
//        non-causal, same order: 370.3, 369.2 / 386.6, 388.4; 438.0, 440.5 / 451.1, 439.1; 458.4, 457.3 /
//        446.2, 465.3; 150.1, 149.9 / 167.4, 167.2; 455.6, 447.2 / 469.3, 460.2; 516.5, 517.7 / 530.5, 522.2;
//        559.8, 560.6 / 566.6, 557.7; 542.1, 545.2 / 556.7, 547.3. D = 64 +3-12%, D = 128 level to +4%; dK, dV
//        bitwise the same; GPT-2's tk step (bench_train.py --compile graphs) 30.42, 30.53 -> 30.20, 30.05 ms.
//        Phase stamps before the change (H100, s42, D = 128 non-causal, one item a CTA): the finish took
//        ~8,800-10,100 cycles of a CTA's 42,800-927,000, ~2.6 query blocks of 3,600 cycles.
//   3. bwd_dq_convert_kernel (backward_dq.cu), frag64 layout, rows Tp.
//
// Tiling and limits:
//   * Shared memory (128B swizzle, 64-column panels), in the template's order: STAGES x (Q, dO 64 x D);
//     K, V 128 x D (two of them at D = 64); 2 x dS^T (16 KB); D = 128: the dQ staging (32 KB), which with dS^T's
//     buffers holds the dK / dV epilogue at the end; D = 64: the epilogue's 2 x 16 KB;
//     STAGES x 512 B of lse2 / Delta (side buffers: inside a 1024-aligned stage they would pad it by 512 B);
//     + 1 KB alignment slack. D = 64: 4 stages, 195 KB (163 KB before session 42's epilogue buffers); D = 128:
//     3 stages, 226.5 KB of the 227 (194.5 KB in session 37 without the staging; with 2 stages the pipelined
//     loop spilled 8-28 bytes of scalars at D = 128).
//     One CTA per SM.
//   * Registers (D = 128, the tight case): dK, dV 2 x 64 fp32 + S^T, dP^T 2 x 32 + the 16-bit P^T / dS^T
//     fragments 2 x 16. The block's dQ consumer holds dK, dV and the 64 registers of dQ: it lets dV and dK
//     retire before it issues dQ, and issues S^T(j + 1) after the reduce-add (dQ beside the fragments or
//     beside S^T(j + 1): C7512, every wgmma serialised); the other consumer issues S^T(j + 1) right after
//     it hands over. (D = 64: dQ(j) and S^T(j + 1) live together, the 16-bit fragments dead by then.)
//     ptxas -v (CUDA 13, every instantiation): 168 registers at launch (65536 / 384; setmaxnreg then
//     gives 24 / 240), no spills, no stack, no C75xx warnings.
//   * Causal: the mask is applied only where a consumer's keys reach past the block's first query.
//   * Ragged T: T is its own tensor-map dimension: TMA zero-fills rows >= T of a Q / dO / K / V box;
//     padded queries have lse2 = +inf (P = 0); keys >= T are masked (non-causal; causal masks them
//     already) and their dK / dV rows are not stored.
//
// Measured, the reason for each choice (H200, bf16, contiguous q/k/v, backward alone, TFLOP/s counting
// 2.5x the forward's FLOPs; bench/RESULTS.md session 4 call 3). These numbers are of the two forms and
// orders as dev variants beside the plain kernel (dev/hopper/attention_bwd_variants.cuh, moved here
// verbatim; in git at 5c060de; the integrated kernel then passed its 47 float64 cases in session 5). The variants gave the plain
// kernel's gradients on 14 cases (rel-L2 <= 3e-5: nanoGPT strided views, ragged T, D 64 / 128, causal and
// not, causal T = 1000 with 33 and 65 heads: 2 launch groups), and the plain kernel passed the 42 cases of
// dev/hopper/check_attention_bwd.py. plain / pipelined / pipelined + grouped / cuDNN:
//     (16,12,1024,64)   causal 191 / 188 / 199 / 232    full 288 / 276 / 276 / 351
//     (8,16,2048,64)    causal 237 / 237 / 265 / 313    full 347 / 325 / 326 / 415
//     (8,16,2048,128)   causal 283 / 285 / 384 / 414    full 432 / 474 / 464 / 524
//     (4,16,4096,128)   causal 417 / 421 / 414 / 484    full 453 / 510 / 502 / 566
//     (64,6,256,64)     causal  73 /  73 /  75 /  52    full 134 / 135 / 135 / 124
//   (non-causal "grouped" is the same kernel and order as "pipelined": its column shows the run-to-run
//   spread, about 2%.)
//   * D = 128: pipelined (non-causal +10% / +13%; causal +1% / +1% alone, the grouped order adds the rest).
//   * Causal: grouped, at both D (best at 4 of the 5 shapes: +35% at (8,16,2048,128), +12% at
//     (8,16,2048,64); at (4,16,4096,128) 414 vs 421 ungrouped, -2%, about the spread).
//   * D = 64 non-causal: plain then (the pipelined loop lost 4-6% there: 276 vs 288, 325 vs 347); after
//     the frag64 / stmatrix stores (session 8, bench/bench_attention.py --impls tk,cudnn, one call, the two
//     builds side by side) plain / pipelined / cuDNN: (16,12,1024,64) 284 / 304 / 344, (8,16,2048,64)
//     335 / 362 / 399-414, (4,16,4096,64) 365 / 380 / 418-437: the pipelined loop everywhere since.
//   * D = 64 causal: pipelined + grouped. The loop alone is neutral there (188 vs 191, 237 vs 237, 73 vs
//     73), so plain + grouped would likely time about the same, but it never ran; pipelined + grouped is
//     the measured (199, 265, 75: +4%, +12%, +3%) and GPU-checked (65 heads, 2 groups) code.
//   So, per shape, 0.82-0.93x cuDNN at the long sequences (0.86 / 0.82, 0.85 / 0.84, 0.93 / 0.90,
//   0.86 / 0.90 causal / full) and ahead of it at (64,6,256,64) (1.44 / 1.08). The integrated kernel in
//   session 5 (bench/bench_attention.py, call 2): 0.83-0.86x cuDNN at D = 64, 0.93-0.99x at D = 128; at
//   (64,6,256,64), timed directly (dev/hopper/check_attention_bwd.py), 0.89x / 1.06x.
//   Session 8 (frag64 dQ^T staging, stmatrix dS^T, the pipelined loop everywhere; bench_attention.py):
//   D = 64 causal 215 / 298 / 348 vs cuDNN 231 / 314 / 370 (0.93-0.95x), non-causal 304 / 362 / 380 vs
//   344 / 414 / 437 (0.87-0.88x); D = 128 0.94-1.01x (e.g. (1,16,16384,128) 527 vs 522 causal). Nsight
//   Compute at (16,12,1024,64) causal: 72.5M instructions (was 90.1M; cuDNN 69.2M), 302 us (342; cuDNN 276).
//
// Persistent (D = 64, session 16). With one CTA per key block, every CTA started by loading its K / V tile and its
// first Q / dO blocks from DRAM and ended by storing dK / dV, and the next CTA on that SM could start only after it
// exited: at (64,6,256,64) a CTA walks just 4 query blocks, so this was a large share of its life. Now one CTA per
// SM walks the key blocks in the same order (HbWalk<.., true>), the K / V tile is a per-item buffer with two slots
// (ITEM_STAGES = 2; ITEM_IN_DRAIN: the last query block still reads it, so it is freed after drain), and the
// producer loads the next key block's K, V and first Q / dO blocks while the consumers finish this one. Non-causal
// CTA i takes items i, i + gridDim.x, ...; causal walks shorten along the order, and since session 17 a causal CTA
// takes the next item from a counter in global memory when it is done (the pipeline's DYNAMIC scheduler; the prep
// kernel zeroes the counter; producer 56 / consumers 224 registers). D = 128 stays one CTA per key block (no room for a second 64 KB K / V buffer; its consumers
// also share dS^T rows, which a next item's first block would overwrite). dK / dV are zeroed per item in start().
// A persistent D = 128 non-causal grid with its one K / V buffer (the next block's K, V loaded during the dK / dV
// stores; dS^T's parity carried across items as here) measured level: H100, session 36, backward TFLOP/s, two
// alternated runs each, one CTA per key block / persistent: (8,16,2048,128) 450.0, 456.3 / 451.3, 456.5;
// (1,16,16384,128) 507.2, 511.9 / 508.5, 519.0 (git 7d26bfc^: dev/patches/attention_bwd_d128_persistent.patch).
// Measured (H200, bench_attention.py --graphs, backward TFLOP/s, one CTA per key block -> persistent, two builds in
// back-to-back processes, bench/RESULTS.md session 16): (64,6,256,64) causal 76.3 -> 80.6, non-causal 141.8 ->
// 154.4; (16,12,1024,64) 215.4 -> 217.7, 306.4 -> 321.7; (8,16,2048,64) 299.1 -> 299.2, 359.2 -> 368.6;
// (4,16,4096,64) causal 349.5 -> 341.1 (-2.4%: the one shape that loses; plain strides lost the same there, and
// 1.3% at T = 2048), non-causal 381.5 -> 389.0. SASS +72 to +152 instructions (the item loop), no spills.
// Session 16 walked causal items in windows of gridDim.x, every other one from the other end (boustrophedon); the
// counter against that walk (session 17, causal, TFLOP/s): (16,12,1024,64) 217.8 -> 230.9, (8,16,2048,64) 296.6 ->
// 308.5, (4,16,4096,64) 347.3 -> 352.2, (64,6,256,64) 80.6 -> 82.2 (the DYNAMIC records' own barriers, merged since,
// measured 228.5 / 307.6 / 350.4 / 81.6). Non-causal on the counter: 0.3-1.5% slower than plain strides.
//
// Dropout (the DROPOUT = true instances; p = 0 runs the kernels above, SASS unchanged: normalized cuobjdump
// diff against the kernel before dropout, 0 lines in all 8 instances and the 4 prep kernels):
//   FlashAttention-2's dropout backward with the forward's mask regenerated (dropout.cuh, the same keep
//   function as every other kernel of the family; rng_state read as a captured dropout_rng), as backward.cu:
//     dV = (P o Z)^T dO     dP~ = Z o dP     dS = P o (dP~ - Delta)     Z = keep / (1 - p)
//   with P the undropped softmax (from lse) and Delta = rowsum(dO o O) of the dropped output O (the prep
//   kernel, unchanged). Per element of S^T: P~ = keep ? P : 0 packed into dV's A fragments (dV times
//   1 / (1 - p) at the end), dS = P ((keep ? dP keep_scale : 0) - Delta) (keep_scale, a kernel parameter, is
//   a constant operand: no register), dK and dQ as without dropout.
//   Random bits: a lane's S^T elements are 2 key rows (key0 + 16 w + g + {0, 8}) x 16 queries of the 64-query
//   block, exactly 4 Philox calls with every word used (the key is the call's fixed part: rounds 0-2 mostly
//   hoisted into a per-row prefix, dropout_prefix_k, recomputed per block from the key in static shared
//   memory, hb_drop); dropout_bits_k_prefix_lane packs them into one 32-bit word, bit i for accumulator
//   register i. The loop draws block
//   j + 1's at the end of block j (after the dQ^T reductions, with only dK, dV and S^T(j + 1) live) and parks
//   the word in the 4 bytes of block j + 1's dS^T buffer that this thread's first dS^T store overwrites later
//   (read back twice before that store): with the word in a register through the exponentials, or drawn at
//   the start of the block, the D = 128 instances spilled ~200 bytes.
//   The consumer index c is taken through a warp reduction in these instances (__reduce_max_sync: REDUX,
//   whose result is a uniform register), so ptxas keeps c and what derives from it (the K / V / dQ^T
//   descriptors, the K tile, dS^T and keep-word offsets) in uniform registers instead of 64-bit pairs of
//   vector registers: with c from threadIdx the D = 128 instances spilled 16 B (causal) / 24 B (non-causal) of
//   those loop invariants (the pad of the 1024-aligned base, the K tile offset, a K descriptor, 2 dS^T
//   offsets; 7-9 LDL per CTA, ~5 per query block), now none. (The p = 0 kernels keep c from threadIdx, their
//   SASS unchanged; the same change there gives 4-6 % fewer instructions, 3456 -> 3264 at D = 128
//   non-causal, not timed.)
//   ptxas -v (CUDA 13.0): every instance spill-free, no stack, no C75xx warnings. SASS per kernel (bf16;
//   p = 0 in parentheses): D = 64 plain 2368 (1920), D = 64 pipelined 3408 (2600), D = 128 4352 / 4400
//   non-causal / causal (3456 / 3520); with c from threadIdx they were 2432, 3544, 4576 / 4624.
//   The dropout backward before the uniform-register change (16-24 B of spill at D = 128) passed the dropout
//   GPU matrix in session 5 (call 3; fwd + bwd +38.1% at (16,12,1024,64) with the Hopper forward, +0.1% at
//   (64,6,256,64)); the spill-free version passed it in sessions 6-8 (tests/attention/test_attention_dropout_gpu.py).
//   (The instruction counts in this paragraph and the next are those of their sessions; session 8's frag64 /
//   stmatrix stores and the pipelined loop everywhere changed them: header, "Session 8".)
//
// On the pipeline template (session 5), against the hand-written kernel before it (cuobjdump, CUDA 13.0,
// bf16 = fp16): every instance 168 registers, 0 stack, no LDL / STL, no C75xx warnings, the same HGMMA,
// UTMALDG, UBLKRED (bulk reductions), SYNCS, WARPGROUP.ARRIVE / DEPBAR counts; instructions p = 0:
// D = 64 plain 1920 -> 1920, D = 64 pipelined 2600 -> 2656, D = 128 3456 -> 3512 / 3520 -> 3560 (non-causal
// / causal); dropout: 2368 -> 2328, 3408 -> 3464, 4352 -> 4304 / 4400 -> 4416. The dropout instances have
// one CTA barrier fewer (BAR 8 -> 7, 5 -> 4): the template's setup() hook writes the dropout key and the
// head (hb_drop) before its one CTA barrier, where the hand-written kernel wrote the head after a first
// barrier and synced again. The prep kernels are unchanged (0 lines of normalized diff). The template
// version HAS NOT RUN ON A GPU YET (dev/hopper/check_attention_bwd.py, check_attention_dropout.py).
//
// Built for every architecture of the family; the kernel body exists only for sm_90a and traps elsewhere;
// ops.py calls this only on sm_90 with an extension built for sm_90a (ops.backward_path).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <stdexcept>
#include <type_traits>

#include "attention.h"
#include "backward.cuh"
#include "hopper_maps.cuh"
#include "qkv_bias_grad.cuh"
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

constexpr int HB_N = 128;          // keys per CTA (64 per consumer warpgroup)
constexpr int HB_M = 64;           // queries per block
constexpr int HB_PANEL = 64;       // 16-bit columns per 128-byte swizzle row
constexpr int HB_PRODUCER_REGS = 24;
constexpr int HB_CONSUMER_REGS = 240;  // 128 x 24 + 2 x 128 x 240 <= 64K registers
constexpr int HB_FINISH_BAR = 3;       // named barrier of both consumers (1, 2: each consumer's own)

// D = 64: a persistent grid (one CTA per SM walks the key blocks) with two K / V buffers, so that the next key
// block's K and V (and its first Q / dO blocks) load while the CTA still works on this one: see the header.
// D = 128: one CTA per key block (no room for a second 64 KB K / V buffer; its consumers also share dS^T).
constexpr bool hb_persistent(int D) { return D == 64; }

template <int D>
struct hb_layout {
  static constexpr int PANELS = D / HB_PANEL;
  static constexpr int STAGES = D == 64 ? 4 : 3;
  static constexpr int KV_PANEL = HB_N * 128;              // [128 keys x 64] 16 KB
  static constexpr int Q_PANEL = HB_M * 128;               // [64 queries x 64] 8 KB
  static constexpr int KV_BYTES = PANELS * KV_PANEL;
  static constexpr int Q_BYTES = PANELS * Q_PANEL;
  static constexpr int DS_BYTES = HB_N * 128;              // dS^T [128 keys x 64 queries] 16-bit
  // ONE consumer computes the block's whole dQ = dS K (m64nDk16 over the 128 keys: 64 queries x D head dims),
  // consumer g % 2 for the CTA's g-th query block; the accumulator's N is the head dims
  static constexpr int DQ_N = D;
  // D = 128: the block's dQ goes through shared memory (32 KB, the block's dQ consumer's), each warp adding its part
  // into dq_accum by one tensor reduce-add (dq_map); D = 64: red.global.add straight from registers (staged, the
  // causal dropout instance spilled 8 bytes)
  static constexpr bool STAGED_DQ = D == 128;
  // the consumers' scratch: 2 x dS^T (by block parity), then (STAGED_DQ) the dQ staging
  static constexpr int DS_OFF = 0;
  static constexpr int DQ_OFF = DS_OFF + 2 * DS_BYTES;
  static constexpr int DQ_BYTES = 64 * DQ_N * 4;
  // dK, dV (16-bit, 64 keys x D each, 64-column 128B-swizzled panels) staged for their TMA stores, a consumer's
  // EP_BYTES at EP_OFF + c EP_BYTES: D = 128 (one item a CTA) over the dS^T buffers and the dQ staging, free by then;
  // D = 64 (persistent) a buffer of their own, so that the stores run on while the next item starts
  static constexpr int EP_BYTES = 2 * PANELS * HB_M * 128;
  static constexpr int EP_OFF = D == 128 ? 0 : DQ_OFF + (STAGED_DQ ? DQ_BYTES : 0);
  static constexpr int SCRATCH_BYTES = D == 128 ? DQ_OFF + (STAGED_DQ ? DQ_BYTES : 0) : EP_OFF + 2 * EP_BYTES;
  static_assert(D != 128 || 2 * EP_BYTES <= SCRATCH_BYTES, "the D = 128 epilogue reuses the dS^T / dQ scratch");
};

// Shared memory (128B swizzle, 64-column panels), in the pipeline's order: the ring of Q / dO slots
// (a stage each, lse2 / Delta as the slot's side buffer: 512 bytes that would pad a 1024-aligned stage
// to 33 KB, 1.5 KB over the 227 KB at D = 128), the K / V tiles as the per-item buffer, the scratch.
template <int D>
struct alignas(1024) HbStage {
  char q[hb_layout<D>::Q_BYTES];
  char dout[hb_layout<D>::Q_BYTES];
};
struct HbVec {
  float lse2[HB_M];
  float delta[HB_M];
};
template <int D>
struct alignas(1024) HbKV {
  char k[hb_layout<D>::KV_BYTES];
  char v[hb_layout<D>::KV_BYTES];
};
template <int D> using HbSlot = pipeline::slot<HbStage<D>, 1, HbVec>;

struct hb_args {
  int seq, heads, batch;
  int padded_rows;     // Tp = dq_accum_rows(T): rows per head of lse2 / Delta / dq_accum
  float scale;         // softmax scale (dK's factor)
  float scale_log2;    // scale * log2(e)
  float *dq_accum;     // (B H, Tp, D) fp32, frag64 blocks, zero-filled by the caller
  int *tile_counter;   // the persistent walk's counter (D = 64), zeroed by the prep kernel
  void *dk, *dv;
  Strides dk_s, dv_s;
};
// The dropout kernels' arguments: the same plus the dropout's (the p = 0 kernels keep hb_args); rng is
// the forward's rng_state read as a captured dropout_rng (dropout.cuh).
struct hb_dropout_args : hb_args {
  dropout_args drop;
};
template <bool DROPOUT> using hb_args_t = std::conditional_t<DROPOUT, hb_dropout_args, hb_args>;

// The dropout of a DROPOUT kernel's CTA, in (static) shared memory: written by thread 0 before the CTA
// barrier (HbPipe::setup: the key and the head), re-read per query block, so neither has to stay
// live in the consumers' registers across the loop (the D = 128 consumers hold 224 accumulator registers
// of their 240). Only the DROPOUT kernels reference it, so only they allocate it (20 bytes: D = 128
// pipelined uses 226.5 KB of dynamic shared memory, 512 bytes below the 227 KB limit).
struct hb_dropout {
  dropout_key key;
  int bh;           // the CTA's head
};
__shared__ hb_dropout hb_drop;
// Query block g's dS^T hand-over (the CTA's g-th block), phase g of this barrier. The consumer without the block's
// dQ arrives with all its 128 threads once its dS^T rows are stored (and, D = 128, its last reduce-adds have read the
// staging: hand_over); the block's dQ consumer waits for the phase (parity g % 2, issue_dq). An mbarrier, not a
// named barrier's arrive / sync: the same order, and one that compute-sanitizer's racecheck follows.
__shared__ barrier hb_ds_ready;

// ------------------------------------------------------------------------------------------------
// the kernel: a tk::pipeline description (pipeline/producer_consumer.cuh), read top to bottom

template <bool DROPOUT>
struct HbGlobals {
  const CUtensorMap &q_map, &k_map, &v_map, &do_map, &lse_map, &delta_map, &dq_map, &dk_map, &dv_map;
  const hb_args_t<DROPOUT> &a;
  int group;  // causal: heads per launch group (see the header)
};

// The CTA's one work item: key block kb of head bh = b H + h, and its walk over the query blocks.
struct hb_item {
  int n0;        // first key
  int b, h, bh;
  int mb_first;  // first query block that sees the keys
  int count;     // query blocks walked (>= 1: n0 < T)
  int rot;       // non-causal: the walk starts at mb_first + rot and wraps around
};
// Causal (the launcher passes group >= 1): the grid is cut into groups of `group` heads (the last one may
// have fewer), key-block-major inside a group (longest walks first) and group after group, so the CTAs
// resident at one time share the Q / dO blocks and the dq_accum rows of a few heads in L2 (group = B H is
// one key-block-major order over all heads). Non-causal: head-major.
template <bool CAUSAL>
__device__ __forceinline__ hb_item hb_item_of(const hb_args &a, int group, int idx) {
  const int T_ = a.seq;
  const int n_kb = (T_ + HB_N - 1) / HB_N;
  const int n_bh = a.heads * a.batch;
  int kb, bh;
  if (CAUSAL && group > 0) {
    const int per = group * n_kb;
    const int g0 = idx / per;
    const int within = idx - g0 * per;
    const int gl = min(group, n_bh - g0 * group);
    kb = within / gl;
    bh = g0 * group + within % gl;
  } else {
    kb = CAUSAL ? idx / n_bh : idx % n_kb;
    bh = CAUSAL ? idx % n_bh : idx / n_kb;
  }
  hb_item w;
  w.n0 = kb * HB_N;
  w.b = bh / a.heads;
  w.h = bh % a.heads;
  w.bh = bh;
  const int n_mb = (T_ + HB_M - 1) / HB_M;
  w.mb_first = CAUSAL ? w.n0 / HB_M : 0;
  w.count = n_mb - w.mb_first;
  w.rot = CAUSAL ? 0 : int(int64_t(kb) * w.count / n_kb);
  return w;
}
// query block of the walk's step j
__device__ __forceinline__ int hb_block_of(const hb_item &w, int j) {
  const int r = w.rot + j;
  return w.mb_first + (r >= w.count ? r - w.count : r);
}

// The items. D = 128: one CTA per key block (P::ONE_ITEM: the pipeline derives it once, before the role split).
// D = 64 (persistent): CTA i takes the key blocks i, i + gridDim.x, ... of the same order; producer and consumers
// each walk them.
template <bool CAUSAL, bool PERSISTENT>
struct HbWalk {
  hb_item w;
  bool done = false;
  template <bool DROPOUT>
  __device__ HbWalk(const HbGlobals<DROPOUT> &g) : w(hb_item_of<CAUSAL>(g.a, g.group, blockIdx.x)) {}
  __device__ bool next(hb_item &out) {
    if (done) return false;
    out = w;
    done = true;
    return true;
  }
};
// Persistent. Causal: CTA i takes item i first, then whichever item is next in the order when it is done (a
// counter in global memory, one atomicAdd per item by the producer, zeroed by the prep kernel before this launch;
// the pipeline hands each item to the consumers: DYNAMIC). The causal walks shorten along the order (longest
// first): static walks (plain strides, or alternating directions per window) lost 2.4% at causal (4,16,4096,64)
// against one CTA per item placed by the hardware (session 16); the counter gained 5.8% at (16,12,1024,64) and
// 0.6% at (4,16,4096,64) over the alternating walk (session 17). Non-causal items are all equally long: CTA i
// takes items i, i + gridDim.x, ... (producer and consumers each walk them; the counter measured 0.3-1.5% slower).
template <bool CAUSAL>
struct HbWalk<CAUSAL, true> {
  static constexpr bool DYNAMIC = CAUSAL;
  const hb_args &a;
  int group, n_items, idx = -1;
  template <bool DROPOUT>
  __device__ HbWalk(const HbGlobals<DROPOUT> &g)
      : a(g.a), group(g.group), n_items(((g.a.seq + HB_N - 1) / HB_N) * g.a.heads * g.a.batch) {}
  __device__ bool next(hb_item &out) {
    if constexpr (CAUSAL) __builtin_assume(a.tile_counter != nullptr);  // (the launcher checks it)
    idx = pipeline::next_item(idx, CAUSAL ? a.tile_counter : nullptr);
    if (idx >= n_items) return false;
    out = hb_item_of<CAUSAL>(a, group, idx);
    return true;
  }
};

// One consumer warpgroup: keys key0 = n0 + 64 c .. + 63, dK and dV accumulated across the query blocks
// (the ring's slots), every other query block's dQ reduced into dq_accum. It waits for and frees its slots
// itself (SELF_PACED): the pipelined loop frees block j's slot before it waits for block j + 1's.
template <typename T, int D, bool CAUSAL, bool DROPOUT>
struct HbConsumer {
  using L = hb_layout<D>;
  using Slot = HbSlot<D>;
  using acc64 = wg::accumulator<64>;
  using acc_d = wg::accumulator<D>;
  using acc_dq = wg::accumulator<L::DQ_N>;
  static constexpr bool SELF_PACED = true;
  // pipelined: compute(.., 0) is the prologue (S^T of block 0), compute(.., i) the rest of block i - 1 and
  // S^T of block i, drain the last block (no S^T after it): no wgmma under a runtime branch (C7520)
  static constexpr bool PEEL_FIRST = true;
  // the last block (drain) still reads K and V: the pipeline frees their buffer after it
  static constexpr bool ITEM_IN_DRAIN = true;
  // dQ = dS K over all 128 keys of the block (both consumers' dS^T rows)
  static constexpr int DQ_SLICES = HB_N / 16;
  // D = 64: S^T = K_c Q^T and dP^T = V_c dO^T take K_c and V_c from registers (wgmma_rs), loaded once per item:
  // an m64n64k16 with both operands in shared memory reads 4 KB in 32 tensor cycles, the shared memory's whole
  // 128 bytes a cycle, and the loop's other shared traffic (TMA, dS^T) comes on top (see the header).
  static constexpr bool KV_REGS = D == 64;

  const HbGlobals<DROPOUT> &g;
  const hb_args_t<DROPOUT> &a;
  // c through a warp reduction, a uniform register for ptxas (REDUX), so that c's descriptors and offsets stay in
  // the uniform datapath (the D = 128 dropout instances spilled them otherwise, and with the one-consumer dQ the
  // causal p = 0 ones 16 bytes; header).
  const int c, me;
  char *k_tile = nullptr, *v_tile = nullptr;  // the item's K / V buffer (start)
  char *const scratch;
  hb_item w;
  int key0 = 0;               // this warpgroup's first key
  // Blocks of the CTA's earlier items (persistent D = 64): dS^T's buffer alternates with the CTA's running block count,
  // not the item's, so that an item's first block never writes the buffer of the previous item's last block, which the
  // other consumer's dQ may still be reading (see issue_dq); the block's dQ consumer alternates with it too
  int blocks_before = 0;
  acc_d dv, dk;
  acc64 st;                   // pipelined: S^T of the next block, complete between compute calls
  wg::a_fragment<T> kf[4], vf[4];  // KV_REGS: this consumer's K_c, V_c rows as wgmma A fragments (the item's)

  __device__ HbConsumer(const HbGlobals<DROPOUT> &g, const pipeline::consumer_ctx<HbKV<D>> &ctx)
      : g(g), a(g.a),
        c(int(__reduce_max_sync(0xffffffffu, unsigned(wg::warpgroupid() - 1)))),
        me(wg::warpgroup_thread()), scratch(ctx.scratch) {}

  // A new key block, its K and V in kv (one of the pipeline's ITEM_STAGES buffers)
  __device__ void start(const hb_item &item, HbKV<D> &kv) {
    k_tile = kv.k;
    v_tile = kv.v;
#pragma unroll
    for (int i = 0; i < acc_d::REGS; i++) dv.v[i] = dk.v[i] = 0.f;
    w = item;
    key0 = w.n0 + 64 * c;
  }

  // The CTA's g-th query block (g = gblock(j)) is consumer g % 2's dQ; the other one hands its dS^T rows over by
  // completing phase g of hb_ds_ready. Each consumer arrives for block g + 1 only after it has waited for phase g (and
  // the other for block g + 2 only after phase g + 1), so no arrival ever lands in the phase before its own; and a warp
  // waits for phase g only after S^T(g) has completed, a wgmma that all four warps of its warpgroup issue after
  // arriving for block g - 1, so phase g - 1 is complete by then (a parity wait during the phase before would return
  // at once).
  __device__ int gblock(int j) const { return (hb_persistent(D) ? blocks_before : 0) + j; }
  __device__ bool my_dq(int j) const { return ((gblock(j) ^ c) & 1) == 0; }
  __device__ char *ds_buf(int j) const {
    return scratch + L::DS_OFF + (gblock(j) & 1) * L::DS_BYTES;
  }

  // Dropout (DROPOUT kernels only): the keep bits of this lane's 32 S^T elements of query block m0, bit i for
  // register i of the accumulator (dropout_bits_k_prefix_lane: the lane's key row key0 + 16 w + g is fixed,
  // so its Philox prefix is computed per block from the key in shared memory, then 4 groups), drawn while
  // the block's GEMMs run.
  __device__ uint32_t draw_keep(int m0) const {
    if constexpr (DROPOUT) {
      const dropout_key d = hb_drop.key;
      const int lane = me & 31;
      const int bh_ = hb_persistent(D) ? w.bh : hb_drop.bh;
      keep_bits<rt<float, 16, 64>> kb;
      const int wkey = key0 + 16 * (me >> 5);  // causal: the query groups wholly before the warp's keys are skipped
      dropout_bits_k_prefix_lane(kb, d, dropout_prefix_k(d, bh_, wkey + (lane >> 2)), m0, d.threshold << 16, lane,
                                 CAUSAL ? wkey : INT_MIN);
      return kb.w[0];
    } else {
      return 0u;
    }
  }
  // The pipelined loop's keep bits wait in the block's dS^T buffer, in the 4 bytes this thread's first dS^T
  // store of the block overwrites later (no other thread writes them; read back twice before that store),
  // not in a register: one register live through the exponentials made the D = 128 kernels spill (~200 bytes).
  __device__ uint32_t *keep_slot(int j) const {
    return reinterpret_cast<uint32_t *>(ds_buf(j) + 64 * c * 128 + wg::swizzle128_offset(acc64::row(0), acc64::col(0)));
  }
  __device__ void stash_keep(int j, uint32_t k) const {
    if constexpr (DROPOUT) *keep_slot(j) = k;
  }
  __device__ uint32_t stashed_keep(int j) const {
    if constexpr (DROPOUT) return *keep_slot(j);
    else return 0u;
  }

  // acc = X_c Y^T: this consumer's 64 rows of the item's key-major tile x_tile (K or V; from registers, x_regs, at
  // D = 64) times the slot's 64 x D tile y_tile (Q or dO), both K-major (committed; the caller fences and waits)
  __device__ void issue_rows_t(acc64 &acc, const wg::a_fragment<T> (&x_regs)[4], const char *x_tile,
                               const char *y_tile) {
    if constexpr (KV_REGS) {
      const uint64_t dy = wg::desc_k128(y_tile);
#pragma unroll
      for (int kk = 0; kk < 4; kk++)
        wg::wgmma_rs<T, 64, false>(acc.v, x_regs[kk].r, wg::desc_advance_k(dy, kk), kk > 0);
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        const uint64_t dx = wg::desc_k128(x_tile + (kk / 4) * L::KV_PANEL + c * 64 * 128);
        const uint64_t dy = wg::desc_k128(y_tile + (kk / 4) * L::Q_PANEL);
        wg::wgmma_ss<T, 64>(acc.v, wg::desc_advance_k(dx, kk % 4), wg::desc_advance_k(dy, kk % 4), kk > 0);
      }
    }
    wg::mma_commit();
  }
  // S^T = K_c Q^T of slot s into acc (fenced, committed; the caller waits)
  __device__ void issue_st(acc64 &acc, const Slot &s) {
    wg::mma_fence(acc.v);
    issue_rows_t(acc, kf, k_tile, s.tiles.q);
  }
  // dP^T = V_c dO^T of slot s (its own commit group)
  __device__ void issue_dpt(acc64 &dpt, const Slot &s) { issue_rows_t(dpt, vf, v_tile, s.tiles.dout); }

  // P^T = 2^(S^T c - lse2) in place (rows = keys key0 + row, columns = queries m0 + col; masked: causal
  // key > query, key >= T)
  // The block's lse2 (or Delta) entries of this thread's 16 query columns, read from the slot's side buffer
  // before the GEMM that precedes their use is issued, so that the shared loads' latency hides under its issue
  __device__ void load_columns(float2 (&v)[8], const float *vec) const {
#pragma unroll
    for (int gi = 0; gi < 8; gi++) v[gi] = *reinterpret_cast<const float2 *>(vec + acc64::col(4 * gi));
  }
  __device__ void exponentials(acc64 &sa, const float2 (&l2s)[8], int m0) const {
    const int T_ = a.seq;
    const bool masked = CAUSAL ? key0 + 63 > m0 : key0 + 64 > T_;
#pragma unroll
    for (int gi = 0; gi < 8; gi++) {
      const int col0 = acc64::col(4 * gi);
      const float2 l2 = l2s[gi];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = 4 * gi + e;
        float x = sa.v[i];
        if (masked) {
          const int key = key0 + acc64::row(i), query = m0 + col0 + (e & 1);
          if (CAUSAL ? key > query : key >= T_) x = neg_infty();
        }
        sa.v[i] = fast_exp2(fmaf(x, a.scale_log2, -((e & 1) ? l2.y : l2.x)));
      }
    }
  }
  // P^T (undropped) -> the 16-bit A fragments of dV += P~^T dO: P~ = keep ? P : 0 (DROPOUT; dV is scaled by
  // 1 / (1 - p) at the end), else P itself.
  __device__ void p_fragments(wg::a_fragment<T> (&pf)[4], const acc64 &sa, uint32_t keep) const {
    if constexpr (DROPOUT) {
      float pk[acc64::REGS];
#pragma unroll
      for (int i = 0; i < acc64::REGS; i++) pk[i] = (keep >> i) & 1u ? sa.v[i] : 0.f;
#pragma unroll
      for (int kk = 0; kk < 4; kk++) wg::to_a_fragment(pf[kk], pk, kk);
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) wg::to_a_fragment(pf[kk], sa.v, kk);
    }
  }
  // dS^T in place of dP^T: P o (dP - Delta); DROPOUT: P o (dP~ - Delta), dP~ = keep ? dP / (1 - p) : 0 (dropout_ds's
  // form: one select and one multiply by the kernel parameter keep_scale, read as a constant operand, per
  // element; the (1 - p) dS form of dropout_bwd_k needs 1 - p and the scaled Delta in registers here, where
  // the D = 128 kernels have none to spare: it spilled 4-28 bytes).
  __device__ void ds_in_place(acc64 &dpt, const acc64 &sa, const float2 (&dls)[8], uint32_t keep) const {
#pragma unroll
    for (int gi = 0; gi < 8; gi++) {
      const float2 dl = dls[gi];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = 4 * gi + e;
        if constexpr (DROPOUT) {
          const float dpk = (keep >> i) & 1u ? dpt.v[i] * a.drop.keep_scale : 0.f;
          dpt.v[i] = sa.v[i] * (dpk - ((e & 1) ? dl.y : dl.x));
        } else {
          dpt.v[i] = sa.v[i] * (dpt.v[i] - ((e & 1) ? dl.y : dl.x));
        }
      }
    }
  }
  // dV += P^T dO (A = P^T from registers, B = dO MN-major), one commit group
  __device__ void issue_dv(const wg::a_fragment<T> (&pf)[4], const Slot &s) {
    wg::mma_fence(dv.v);
    const uint64_t ddo = wg::desc_mn128(s.tiles.dout, L::Q_PANEL);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::wgmma_rs<T, D, true>(dv.v, pf[kk].r, wg::desc_advance_k_mn(ddo, kk), 1);
    wg::mma_commit();
  }
  // dS^T's 16-bit fragments and its shared copy (this warpgroup's 64 key rows of buffer j % 2), then
  // dK += dS^T Q, one commit group
  __device__ void issue_dk(wg::a_fragment<T> (&dsf)[4], const acc64 &dst, const Slot &s, int j) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::to_a_fragment(dsf[kk], dst.v, kk);
    char *rows = ds_buf(j) + 64 * c * 128;  // this warpgroup's key rows
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::store_a_fragment(rows, dsf[kk], kk);
    fence_proxy_async_shared();
    wg::mma_fence(dk.v);
    const uint64_t dqm = wg::desc_mn128(s.tiles.q, L::Q_PANEL);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::wgmma_rs<T, D, true>(dk.v, dsf[kk].r, wg::desc_advance_k_mn(dqm, kk), 1);
    wg::mma_commit();
  }
  // The block's dQ = dS K, once the other consumer's dS^T rows are there (phase gblock(j) of hb_ds_ready): A = dS
  // (queries x keys) is dS^T's buffer read MN-major, B = K (keys x D dims) MN-major over its panels
  __device__ void issue_dq(acc_dq &dq, int j) {
    tk::wait(hb_ds_ready, gblock(j) & 1);
    wg::mma_fence(dq.v);
    const uint64_t dsa = wg::desc_mn128(ds_buf(j), L::DS_BYTES);
    const uint64_t kb = wg::desc_mn128(k_tile, L::KV_PANEL);
#pragma unroll
    for (int kk = 0; kk < DQ_SLICES; kk++)
      wg::wgmma_ss<T, L::DQ_N, true, true>(dq.v, wg::desc_advance_k_mn(dsa, kk), wg::desc_advance_k_mn(kb, kk), kk > 0);
    wg::mma_commit();
  }
  // The dQ partial += into dq_accum (frag64, dq_accum.cuh). D = 128 (STAGED_DQ): dQ (rows = queries m0q.., columns =
  // the 128 head dims), the block's two frag64 blocks, through the 32 KB of staging, each warp storing its share
  // densely (store_frag64_warp) and adding it by one tensor reduce-add that its lane 0 issues; no barrier between
  // the warps (the staging's previous reduce-adds, the other consumer's, have read it: hand_over).
  // D = 64: the block's frag64 block straight from the registers with red.global.add.v4.f32 (add_frag64).
  __device__ void reduce_dq(const acc_dq &dq, int m0q) {
    const int64_t block = int64_t(w.bh) * a.padded_rows * D + int64_t((m0q / 64) * (D / 64)) * 4096;
    if constexpr (L::STAGED_DQ) {
      const int warp = me >> 5;
      float *staged = reinterpret_cast<float *>(scratch + L::DQ_OFF) + warp * (L::DQ_BYTES / 16);
      const bool leader = (me & 31) == 0;
      // the staging's previous reduce-adds (the other consumer's, block j - 1) have read it: that consumer waited
      // for them before it arrived on this block's barrier (hand_over)
      store_frag64_warp(staged, dq.v, me);
      fence_proxy_async_shared();
      __syncwarp();
      if (leader) {
        tma::store_add_async(g.dq_map, staged, 0, warp, int(frag64_row(block)), 0);
        bulk_commit_group();
      }
    } else {
      add_frag64(a.dq_accum + block, dq.v, me);
    }
  }

  // The consumer without block j's dQ: (D = 128) its last reduce-adds (block j - 1's) have read the staging, then its
  // dS^T rows (stored and fenced in issue_dk) go to the other consumer
  __device__ void hand_over() const {
    if constexpr (L::STAGED_DQ) {
      if ((me & 31) == 0) bulk_wait_group_read<0>();
      __syncwarp();
    }
    arrive(hb_ds_ready);
  }

  template <bool LAST>
  __device__ __forceinline__ void block(const Slot &cur, const Slot &next, int j) {
    if (my_dq(j)) block_as<LAST, true>(cur, next, j);
    else block_as<LAST, false>(cur, next, j);
  }

  // Pipelined: block j on slot cur, S^T(j) complete in st. dP^T, P^T, dV, dS^T, dK, then (DQ) the block's dQ or (not
  // DQ) the hand-over; cur is freed once dV and dK retire (dQ reads only K and dS^T); then (not LAST)
  // S^T of block j + 1 on slot next, under which the dQ reductions run, and the keep bits of block j + 1 (drawn here,
  // with only dK, dV and S^T(j + 1) live: drawn at the start of the block, with dP^T in flight, the D = 128 kernels
  // spilled). Nothing is in flight when it returns (a wgmma pending across the pipeline's loop edge, C7514, would
  // serialise every wgmma).
  template <bool LAST, bool DQ>
  __device__ __forceinline__ void block_as(const Slot &cur, const Slot &next, int j) {
    const int m0 = hb_block_of(w, j) * HB_M;
    acc64 dpt;
    float2 cols[8];
    load_columns(cols, cur.side().lse2);
    wg::mma_fence(dpt.v);
    issue_dpt(dpt, cur);
    exponentials(st, cols, m0);
    wg::a_fragment<T> pf[4], dsf[4];
    p_fragments(pf, st, stashed_keep(j));
    issue_dv(pf, cur);
    // Delta before the wait where the registers allow it (D = 64; at D = 128 its 16 registers beside dK, dV, P^T,
    // dP^T and the P^T fragments spilled 32 bytes in the non-causal kernels)
    if constexpr (D == 64) load_columns(cols, cur.side().delta);
    wg::mma_wait<1>(dpt.v);  // dP^T done (dV may still run)
    if constexpr (D == 128) load_columns(cols, cur.side().delta);
    ds_in_place(dpt, st, cols, stashed_keep(j));
    issue_dk(dsf, dpt, cur, j);
    if constexpr (DQ) {
      acc_dq dq;
      if constexpr (D == 128) {
        // the whole block's dQ (64 registers) beside dK, dV and the P^T / dS^T fragments, or beside S^T(j + 1), would
        // not fit (C7512): dV and dK retire first, S^T(j + 1) comes after the reduce
        wg::mma_wait<0>(dk.v);  // dV, dK retired: pf, dsf and slot cur are free
        pin_block_fragments(pf, dsf);
        if (me == 0) cur.release();
        issue_dq(dq, j);
        wg::mma_wait<0>(dq.v);
        reduce_dq(dq, m0);
        if constexpr (!LAST) {
          next.wait(0);
          issue_st(st, next);
        }
      } else {
        issue_dq(dq, j);
        wg::mma_wait<1>(dk.v);  // dV, dK retired (dQ may still run): pf, dsf and slot cur are free
        pin_block_fragments(pf, dsf);
        if (me == 0) cur.release();
        if constexpr (!LAST) {
          next.wait(0);
          issue_st(st, next);
          wg::mma_wait<1>(dq.v);  // dQ(j) done (S^T(j + 1) runs on)
        } else {
          wg::mma_wait<0>(dq.v);
        }
        reduce_dq(dq, m0);
      }
    } else {
      hand_over();
      if constexpr (!LAST) {
        next.wait(0);
        issue_st(st, next);
        wg::mma_wait<1>(dk.v);  // dV, dK retired (S^T(j + 1) runs on): pf, dsf and slot cur are free
      } else {
        wg::mma_wait<0>(dk.v);
      }
      pin_block_fragments(pf, dsf);
      if (me == 0) cur.release();
    }
    if constexpr (!LAST) {
      // block j + 1's buffer was last read by the dQ GEMMs of block j - 1, done before their consumer (the other one)
      // arrived on block j's hand-over
      stash_keep(j + 1, draw_keep(hb_block_of(w, j + 1) * HB_M));
      wg::mma_wait<0>(st.v);
    }
  }
  __device__ void pin_block_fragments(wg::a_fragment<T> (&pf)[4], wg::a_fragment<T> (&dsf)[4]) {
    wg::pin_registers(dv.v);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      wg::pin_registers(pf[kk].r);
      wg::pin_registers(dsf[kk].r);
    }
  }

  // Query block step i (slot s; prev: step i - 1's slot): i = 0 is the prologue (S^T(0), block 0's keep
  // bits), i > 0 the rest of block i - 1 on prev and S^T(i) on s.
  __device__ void compute(const Slot &s, const Slot &prev, int i) {
    if (i == 0) {  // (compile time: PEEL_FIRST)
      if constexpr (KV_REGS) {  // the item's K and V have landed (the pipeline waited for them)
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
          wg::load_a_fragment(kf[kk], k_tile + c * 64 * 128, kk);
          wg::load_a_fragment(vf[kk], v_tile + c * 64 * 128, kk);
        }
      }
      s.wait(0);
      issue_st(st, s);
      stash_keep(0, draw_keep(hb_block_of(w, 0) * HB_M));
      wg::mma_wait<0>(st.v);
      // dK, dV's zeros made here, once (else the compiler sank them into both the loop's entry and the
      // path of a one-block walk, 64 - 128 more instructions)
      wg::pin_registers(dv.v);
      wg::pin_registers(dk.v);
    } else {
      block<false>(prev, s, i - 1);
    }
  }
  __device__ void drain(const Slot &last) { block<true>(last, last, w.count - 1); }

  // dV and scale * dK through shared memory (stmatrix into 128B-swizzled panels) and one TMA store per panel (rows
  // >= T dropped by TMA). D = 128: over the dS^T / dQ scratch, once the last dQ GEMMs have read dS^T
  // and the staging's reduce-adds have read it; D = 64: this consumer's own buffer, once its previous item's stores
  // have read it (the stores run on under the next item).
  __device__ void finish(const hb_item &) {
    if constexpr (D == 128) {
      if ((me & 31) == 0) bulk_wait_group_read<0>();
      __syncwarp();
      wg::named_sync(HB_FINISH_BAR, 2 * wg::WARPGROUP_THREADS);
    } else {
      if (me == 0) bulk_wait_group_read<0>();
      wg::sync(1 + c);
    }
    char *const ep = scratch + L::EP_OFF + c * L::EP_BYTES;
    if constexpr (DROPOUT) {  // dV = P~^T dO / (1 - p)
#pragma unroll
      for (int i = 0; i < acc_d::REGS; i++) dv.v[i] *= a.drop.keep_scale;
    }
#pragma unroll
    for (int i = 0; i < acc_d::REGS; i++) dk.v[i] *= a.scale;
    wg::store_tile<T>(ep, dv.v, HB_M * 128);
    wg::store_tile<T>(ep + L::EP_BYTES / 2, dk.v, HB_M * 128);
    fence_proxy_async_shared();
    wg::sync(1 + c);
    if (me == 0) {
      for (int p = 0; p < L::PANELS; p++) {
        tma::store_async(g.dv_map, ep + p * (HB_M * 128), p * HB_PANEL, key0, w.h, w.b);
        tma::store_async(g.dk_map, ep + L::EP_BYTES / 2 + p * (HB_M * 128), p * HB_PANEL, key0, w.h, w.b);
      }
      bulk_commit_group();
    }
    if constexpr (hb_persistent(D)) blocks_before += w.count;
  }
  // after the CTA's last item: the dK / dV stores have read shared memory before the CTA exits
  __device__ void last() {
    if (me == 0) bulk_wait_group_read<0>();
  }
};

// The description: the ring holds the query blocks' Q, dO (stage) and lse2, Delta (side), the per-item
// buffer the CTA's K and V, the scratch dS^T.
template <typename T, int D, bool CAUSAL, bool DROPOUT>
struct HbPipe {
  using L = hb_layout<D>;
  using globals = HbGlobals<DROPOUT>;
  using stage = HbStage<D>;
  using side_stage = HbVec;
  using item_stage = HbKV<D>;
  using work = hb_item;
  using scheduler = HbWalk<CAUSAL, hb_persistent(D)>;
  using consumer = HbConsumer<T, D, CAUSAL, DROPOUT>;
  using Slot = HbSlot<D>;
  static constexpr bool ONE_ITEM = !hb_persistent(D);
  static constexpr int ITEM_STAGES = hb_persistent(D) ? 2 : 1;
  static constexpr int STAGES = L::STAGES, CONSUMERS = 2;
  // the persistent causal (D = 64) producer walks the items (a counter, the item's coordinates, its record for
  // the consumers): 24 registers spilled ~110 bytes there, 40 (consumers 232) 8 bytes; 56 / 224 none
  static constexpr bool DYNAMIC_WALK = hb_persistent(D) && CAUSAL;
  static constexpr int PRODUCER_REGS = DYNAMIC_WALK ? 56 : HB_PRODUCER_REGS;
  static constexpr int CONSUMER_REGS = DYNAMIC_WALK ? 224 : HB_CONSUMER_REGS;
  static constexpr int SCRATCH_BYTES = L::SCRATCH_BYTES;
  // Thread 0: the dS^T hand-over barrier; DROPOUT: the dropout key and the CTA's head into static shared memory
  // (hb_drop)
  __device__ static void setup(const globals &g) {
    init(hb_ds_ready, wg::WARPGROUP_THREADS);  // the dS^T hand-over: the 128 threads of the consumer without the dQ
    fence_barrier_init();
    if constexpr (DROPOUT) {
      uint64_t seed, offset;
      hb_drop.key = load_dropout_key(g.a.drop.rng, g.a.drop.threshold, seed, offset);
      if constexpr (!hb_persistent(D)) hb_drop.bh = hb_item_of<CAUSAL>(g.a, g.group, blockIdx.x).bh;
    }
  }
  __device__ static int iterations(const globals &, const hb_item &w) { return w.count; }
  __device__ static void load_item(const pipeline::item_slot<item_stage> &s, const globals &g, const hb_item &w) {
    for (int p = 0; p < L::PANELS; p++) {
      tma::load_async(s.tiles.k + p * L::KV_PANEL, g.k_map, s.full, p * HB_PANEL, w.n0, w.h, w.b);
      tma::load_async(s.tiles.v + p * L::KV_PANEL, g.v_map, s.full, p * HB_PANEL, w.n0, w.h, w.b);
    }
  }
  __device__ static void load(const Slot &s, const globals &g, const hb_item &w, int j) {
    const int m0 = hb_block_of(w, j) * HB_M;
    for (int p = 0; p < L::PANELS; p++) {
      tma::load_async(s.tiles.q + p * L::Q_PANEL, g.q_map, s.full(), p * HB_PANEL, m0, w.h, w.b);
      tma::load_async(s.tiles.dout + p * L::Q_PANEL, g.do_map, s.full(), p * HB_PANEL, m0, w.h, w.b);
    }
    tma::load_async(s.side().lse2, g.lse_map, s.full(), m0, w.bh);
    tma::load_async(s.side().delta, g.delta_map, s.full(), m0, w.bh);
  }
};
template <typename T, int D, bool CAUSAL, bool DROPOUT>
using HbPipeline = pipeline::kernel<HbPipe<T, D, CAUSAL, DROPOUT>>;
static_assert(HbPipeline<bf16, 128, false, false>::SHARED_BYTES <= 227 * 1024 &&
                  HbPipeline<bf16, 64, true, false>::SHARED_BYTES <= 227 * 1024,
              "Hopper attention backward: shared memory over 227 KB");

template <typename T, int D, bool CAUSAL, bool DROPOUT>
__global__ void __launch_bounds__(HbPipeline<T, D, CAUSAL, DROPOUT>::THREADS, 1)
attention_bwd_hopper_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                            const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap do_map,
                            const __grid_constant__ CUtensorMap lse_map, const __grid_constant__ CUtensorMap delta_map,
                            const __grid_constant__ CUtensorMap dq_map, const __grid_constant__ CUtensorMap dk_map,
                            const __grid_constant__ CUtensorMap dv_map, const __grid_constant__ hb_args_t<DROPOUT> a,
                            const int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  HbPipeline<T, D, CAUSAL, DROPOUT>::run(
      HbGlobals<DROPOUT>{q_map, k_map, v_map, do_map, lse_map, delta_map, dq_map, dk_map, dv_map, a, group});
#else
  __trap();
#endif
}
// Delta = rowsum(dO o O), lse2 = lse log2(e) into (B H, Tp) rows; padding rows t >= T: Delta = 0,
// lse2 = +inf; D zeros per row into dq_accum. D / 8 lanes per row, 16 bytes of O and dO each, combined with
// xor-shuffles, and 32 bytes of zeros each. With dout_partial
// (the qkv bias gradient, qkv_bias_grad.cuh), also the CTA's column sums of dO (its rows lie in one head: Tp is a
// multiple of the CTA's 256 / (D / 8) rows).
constexpr int HB_PREP_THREADS = ROW_PASS_THREADS;

template <typename T, int D>
__global__ void __launch_bounds__(HB_PREP_THREADS)
hbwd_prep_kernel(const T *o, Strides o_s, const T *dout, Strides do_s, const float *lse, float *lse2, float *delta,
                 float *dq_accum, int heads, int seq, int padded_rows, int64_t rows, int *tile_counter,
                 float *dout_partial) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *tile_counter = 0;  // the main kernel's walk starts after this launch
  constexpr int LANES = D / 8;
  const int64_t row = int64_t(blockIdx.x) * (HB_PREP_THREADS / LANES) + threadIdx.x / LANES;
  const int col = (threadIdx.x % LANES) * 8;
  const int t = int(row % padded_rows);
  const int64_t bh = row / padded_rows;
  const bool live = row < rows && t < seq;
  float acc = 0.f, dsum[8] = {};
  if (live) {
    const int64_t b = bh / heads, h = bh % heads;
    const int4 ov = *reinterpret_cast<const int4 *>(o + b * o_s.b + h * o_s.h + int64_t(t) * o_s.t + col);
    const int4 dv = *reinterpret_cast<const int4 *>(dout + b * do_s.b + h * do_s.h + int64_t(t) * do_s.t + col);
    const packed_t<T> *o2 = reinterpret_cast<const packed_t<T> *>(&ov);
    const packed_t<T> *d2 = reinterpret_cast<const packed_t<T> *>(&dv);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 x = convert_pair<float2>(o2[i]), y = convert_pair<float2>(d2[i]);
      acc += x.x * y.x + x.y * y.y;
      dsum[2 * i] = y.x, dsum[2 * i + 1] = y.y;
    }
  }
#pragma unroll
  for (int off = LANES / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (row < rows) {
    float4 *z = reinterpret_cast<float4 *>(dq_accum + row * D + col);
    z[0] = z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (row < rows && col == 0) {
    delta[row] = acc;
    lse2[row] = live ? lse[bh * seq + t] * LOG2E : pos_infty();
  }
  if (dout_partial != nullptr) {  // the same for the whole grid
    constexpr int ROWS = HB_PREP_THREADS / LANES;
    const int64_t row0 = int64_t(blockIdx.x) * ROWS, bh0 = row0 / padded_rows;
    cta_column_sums(dsum, D, qkv_bias_partial_row(dout_partial, int(bh0 / heads), int(bh0 % heads),
                                                  int(row0 % padded_rows), heads, D, padded_rows, ROWS));
  }
}

// d(qkv bias) = [the q partials' column sums | 0 | the v partials' column sums] (qkv_bias_grad.cuh): 32 columns and
// 8 row groups a CTA, the groups' sums added in a fixed order.
__global__ void __launch_bounds__(256) qkv_bias_grad_finish_kernel(const float *partial, int partial_rows, int cols,
                                                                   float *dbias) {
  __shared__ float group_sums[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x, which = blockIdx.y;  // which: 0 = q, 1 = v
  const float *src = partial + int64_t(which) * partial_rows * cols;
  float s = 0.f;
  if (c < cols) {
#pragma unroll 8
    for (int r = threadIdx.y; r < partial_rows; r += 8) s += src[int64_t(r) * cols + c];
  }
  group_sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.f;
#pragma unroll
    for (int g = 0; g < 8; g++) total += group_sums[g][threadIdx.x];
    dbias[2 * which * cols + c] = total;
    if (which == 0) dbias[cols + c] = 0.f;  // d b_k
  }
}

template <typename T, int D, bool CAUSAL, bool DROPOUT>
cudaError_t launch_hopper_bwd(const BwdParams &p, cudaStream_t stream, const char **why) {
  const int Tp = int(dq_accum_rows(p.T));
  const int64_t rows = int64_t(p.B) * p.H * Tp;
  {
    constexpr int rows_per_cta = HB_PREP_THREADS / (D / 8);
    hbwd_prep_kernel<T, D><<<unsigned(cdiv64(rows, rows_per_cta)), HB_PREP_THREADS, 0, stream>>>(
        static_cast<const T *>(p.o), p.o_s, static_cast<const T *>(p.dout), p.do_s, p.lse, p.lse_log2, p.delta,
        p.dq_accum, p.H, p.T, Tp, rows, p.tile_counter,
        p.dbias ? p.bias_partial + qkv_bias_partial_rows(p) * p.H * D : nullptr);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  CUtensorMap qm, km, vm, dom, lm, dm, dqm, dkm, dvm;
  try {
    qm = bhtd_map<T>(p.q, p.q_s, p.B, p.H, p.T, D, HB_M);
    km = bhtd_map<T>(p.k, p.k_s, p.B, p.H, p.T, D, HB_N);
    vm = bhtd_map<T>(p.v, p.v_s, p.B, p.H, p.T, D, HB_N);
    dom = bhtd_map<T>(p.dout, p.do_s, p.B, p.H, p.T, D, HB_M);
    dkm = bhtd_map<T>(p.dk, p.dk_s, p.B, p.H, p.T, D, HB_M);  // a consumer's 64 keys, stored
    dvm = bhtd_map<T>(p.dv, p.dv_s, p.B, p.H, p.T, D, HB_M);
    lm = host::matrix_map<float>(p.lse_log2, uint64_t(p.B) * p.H, Tp, Tp, 1, HB_M, 0);
    dm = host::matrix_map<float>(p.delta, uint64_t(p.B) * p.H, Tp, Tp, 1, HB_M, 0);
    // dq_accum as (128 floats, 4 warps, rows of 2 KB): a warp's share of a frag64 block is one box (dq_accum.cuh)
    const uint64_t rows = uint64_t(p.B) * p.H * Tp * D / 512;
    dqm = host::tensor_map_4d<float>(p.dq_accum, {128u, 4u, rows, 1u}, {512u, 2048u, 16u},
                                     {128u, 1u, uint32_t(hb_layout<D>::DQ_N / 8), 1u}, 0);
  } catch (const std::exception &e) {  // a tensor map the driver rejects (alignment, strides)
    static thread_local std::string reason;
    reason = std::string("tensor map: ") + e.what();
    if (why) *why = reason.c_str();
    return cudaErrorInvalidValue;
  }
  hb_args_t<DROPOUT> a{};
  static_cast<hb_args &>(a) =
      hb_args{p.T, p.H, p.B, Tp, p.scale, p.scale * LOG2E, p.dq_accum, p.tile_counter, p.dk, p.dv, p.dk_s, p.dv_s};
  if constexpr (DROPOUT) {
    a.drop.rng = dropout_rng{0, 0, p.rng_state, p.rng_state + 1, 0, true};  // the forward's (seed, offset)
    a.drop.threshold = dropout_threshold(p.dropout_p);
    a.drop.keep_scale = 1.f / (1.f - p.dropout_p);
    a.drop.rng_out = nullptr;
  }
  // Causal: launch groups of heads whose Q, dO and dq_accum rows (8 T D bytes a head) fill about a quarter of
  // the L2 (see the header); non-causal grids ignore it.
  int group = 0;
  if (CAUSAL) {
    int dev = 0, l2 = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    if (err != cudaSuccess) return err;
    const int64_t per_head = 8 * int64_t(p.T) * D;
    group = int(std::max<int64_t>(1, std::min<int64_t>(int64_t(p.B) * p.H, int64_t(l2 / 4) / per_head)));
  }
  constexpr int smem = HbPipeline<T, D, CAUSAL, DROPOUT>::SHARED_BYTES;
  auto kernel = attention_bwd_hopper_kernel<T, D, CAUSAL, DROPOUT>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  int64_t n_blocks = int64_t((p.T + HB_N - 1) / HB_N) * p.H * p.B;
  if (n_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if constexpr (hb_persistent(D)) {
    if ((err = persistent_blocks(n_blocks, n_blocks)) != cudaSuccess) return err;
  }
  kernel<<<unsigned(n_blocks), HbPipeline<T, D, CAUSAL, DROPOUT>::THREADS, smem, stream>>>(qm, km, vm, dom, lm, dm, dqm,
                                                                                          dkm, dvm, a, group);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  // dq = scale * dq_accum (frag64 blocks, Tp rows per head)
  bwd_args<T> ac{};
  ac.dq = make_gl<T>(p, p.dq, p.dq_s);
  ac.dq_accum = gl<float>{p.dq_accum, {p.B, p.H, Tp, p.D}, {int64_t(Tp) * p.D * p.H, int64_t(Tp) * p.D, p.D}};
  ac.dq_rows = Tp;
  ac.dq_frag64 = true;
  ac.seq = p.T;
  ac.heads = p.H;
  ac.scale = p.scale;
  ac.colsum_partial = p.dbias ? p.bias_partial : nullptr;
  if ((err = launch_dq_convert<T>(ac, D, stream)) != cudaSuccess || !p.dbias) return err;

  const int cols = p.H * D;
  qkv_bias_grad_finish_kernel<<<dim3(unsigned((cols + 31) / 32), 2), dim3(32, 8), 0, stream>>>(
      p.bias_partial, int(qkv_bias_partial_rows(p)), cols, p.dbias);
  return cudaGetLastError();
}

template <typename T, bool DROPOUT>
cudaError_t dispatch_hopper_bwd(const BwdParams &p, cudaStream_t stream, const char **why) {
  if (p.D == 64)
    return p.causal ? launch_hopper_bwd<T, 64, true, DROPOUT>(p, stream, why)
                    : launch_hopper_bwd<T, 64, false, DROPOUT>(p, stream, why);
  if (p.D == 128)
    return p.causal ? launch_hopper_bwd<T, 128, true, DROPOUT>(p, stream, why)
                    : launch_hopper_bwd<T, 128, false, DROPOUT>(p, stream, why);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t attention_backward_hopper(const BwdParams &p, cudaStream_t stream, const char **why) {
  if (p.B < 1 || p.H < 1 || p.T < 1) return cudaErrorInvalidValue;
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return cudaErrorInvalidValue;
  if (p.deterministic) return cudaErrorInvalidValue;  // the deterministic mode runs on the portable backward
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f)) return cudaErrorInvalidValue;
  const bool drop = p.dropout_p > 0.f;
  if (drop && p.rng_state == nullptr) return cudaErrorInvalidValue;
  if (!p.q || !p.k || !p.v || !p.o || !p.dout || !p.lse || !p.dq || !p.dk || !p.dv || !p.delta || !p.lse_log2 ||
      !p.dq_accum || !p.tile_counter)
    return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return drop ? dispatch_hopper_bwd<bf16, true>(p, stream, why) : dispatch_hopper_bwd<bf16, false>(p, stream, why);
  if (p.dtype == DType::fp16) return drop ? dispatch_hopper_bwd<half, true>(p, stream, why) : dispatch_hopper_bwd<half, false>(p, stream, why);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
