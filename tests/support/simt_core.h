// simt_core.h: a SIMT emulator that runs kernels of kernels_src on the host: the quant kernels
// (simt_host.cpp, tests/test_kernels_host.py) and the generic GEMMs (simt_gemm_host.cpp, tests/test_grouped_gemm_host.py).
//
// Every GPU thread of a block is a fiber (ucontext) on one OS thread. mxrt_sync() parks a fiber until every
// thread of the block has arrived; a warp shuffle parks it until the 32 lanes of its warp have posted their
// values (and again until they have all read). A shuffle that not all 32 lanes reach, a barrier some thread
// never reaches, or a barrier after a thread has exited is reported as an error instead of hanging. Fibers run
// forward, backward or in a scrambled order between synchronisation points, so a shared-memory read that is
// not ordered by a barrier sees a different value in some order. __shared__ becomes `static`: blocks run one
// after another. Grids are 3-D (blockIdx.z via MXRT_BID_Z).
#pragma once
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define MXRT_HOST_TEST 1
#define MXRT_HOST_SIMT 1
#include "../../kernels_src/common/prelude.h"
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace simt {
enum State { RUN, WAIT_WARP, WAIT_CTA, DONE };
struct Fiber {
  ucontext_t ctx;
  State state;
};
static std::vector<Fiber> fibers;
static std::vector<std::vector<char>> stacks;
static std::vector<u32> slots;
static ucontext_t sched_ctx;
static u32 cur = 0, nthreads = 0;
static u32 bid_x = 0, bid_y = 0, bid_z = 0, nbid_x = 1, nbid_y = 1;
static void (*body)() = nullptr;
static char error[512] = "";
static bool failed = false;

static void park(State s) {
  fibers[cur].state = s;
  swapcontext(&fibers[cur].ctx, &sched_ctx);
}
static void entry() {
  body();
  fibers[cur].state = DONE;  // uc_link returns to the scheduler
}
static void fail(const char* msg) {
  if (!failed) std::snprintf(error, sizeof error, "block (%u, %u, %u): %s", bid_x, bid_y, bid_z, msg);
  failed = true;
}

// Run one block of `threads` fibers to completion; false on a synchronisation error.
static bool run_block(u32 threads, int order, u32 seed) {
  nthreads = threads;
  fibers.assign(threads, Fiber{});
  if (stacks.size() < threads) stacks.resize(threads, std::vector<char>(1 << 17));
  slots.assign(threads, 0u);
  for (u32 t = 0; t < threads; ++t) {
    getcontext(&fibers[t].ctx);
    fibers[t].ctx.uc_stack.ss_sp = stacks[t].data();
    fibers[t].ctx.uc_stack.ss_size = stacks[t].size();
    fibers[t].ctx.uc_link = &sched_ctx;
    makecontext(&fibers[t].ctx, entry, 0);
    fibers[t].state = RUN;
  }
  std::vector<u32> perm(threads);
  for (u32 round = 0;; ++round) {
    for (u32 i = 0; i < threads; ++i) {
      u32 t = order == 0 ? i : (order == 1 ? threads - 1 - i : (i * 97u + seed + round * 31u) % threads);
      if (order == 2 && threads % 97u == 0) t = i;  // 97 must be coprime with the block size
      perm[i] = t;
    }
    for (u32 i = 0; i < threads; ++i) {
      const u32 t = perm[i];
      if (fibers[t].state != RUN) continue;
      cur = t;
      swapcontext(&sched_ctx, &fibers[t].ctx);
    }
    // nobody runs: release complete warps, else a complete block barrier
    bool released = false, all_done = true;
    for (u32 w = 0; w * 32 < threads; ++w) {
      u32 waiting = 0, lanes = 0;
      for (u32 t = w * 32; t < threads && t < w * 32 + 32; ++t, ++lanes) waiting += fibers[t].state == WAIT_WARP;
      if (waiting == lanes) {
        for (u32 t = w * 32; t < w * 32 + lanes; ++t) fibers[t].state = RUN;
        released = true;
      } else if (waiting) {
        fail("a warp shuffle that not all 32 lanes of the warp reach (divergent shuffle)");
        return false;
      }
    }
    if (released) continue;
    u32 at_barrier = 0, done = 0;
    for (u32 t = 0; t < threads; ++t) {
      at_barrier += fibers[t].state == WAIT_CTA;
      done += fibers[t].state == DONE;
    }
    all_done = done == threads;
    if (all_done) return true;
    if (at_barrier == threads) {
      for (u32 t = 0; t < threads; ++t) fibers[t].state = RUN;
      continue;
    }
    fail("a block barrier that some threads never reach (or reach after others exited)");
    return false;
  }
}
}  // namespace simt

#define MXRT_TID_X (simt::cur)
#define MXRT_BID_X (simt::bid_x)
#define MXRT_BID_Y (simt::bid_y)
#define MXRT_BID_Z (simt::bid_z)
#define MXRT_NBID_X (simt::nbid_x)
#define MXRT_NBID_Y (simt::nbid_y)
inline void mxrt_sync() { simt::park(simt::WAIT_CTA); }
u32 mxrt_host_shfl(u32 v, u32 src_lane) {
  const u32 me = simt::cur;
  simt::slots[me] = v;
  simt::park(simt::WAIT_WARP);
  const u32 r = simt::slots[(me & ~31u) + src_lane];
  simt::park(simt::WAIT_WARP);
  return r;
}

