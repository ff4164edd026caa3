// prelude.h: one spelling for HIP (hiprtc, offline clang) and CUDA (NVRTC).
// Kernels use only what is defined here: integer typedefs, MXRT_TID/MXRT_BID, mxrt_sync(), mxrt_clz(),
// MXRT_GLOBAL/MXRT_DEVICE, and 16-byte vector types. No system header is included on either side:
// hiprtc's builtin header, NVRTC's builtins and clang's -nogpuinc all leave us with the compiler alone.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(__NVCC__)
#define MXRT_CUDA 1
#elif defined(__AMDGCN__) || defined(__HIP__) || defined(__HIPCC_RTC__)
#define MXRT_HIP 1
#elif defined(MXRT_HOST_TEST)
// Host C++ build of the codecs for the CPU tests (tests/test_device_codecs.py): no device attributes.
#define __global__
#define __device__
#define __shared__
#define __forceinline__ inline
#else
#error "prelude.h: neither a CUDA nor a HIP device compiler"
#endif

// Function-space attributes. hiprtc and NVRTC predefine these; clang -x hip -nogpuinc does not.
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __launch_bounds__
#if defined(MXRT_HIP)
// clang -x hip ignores CUDA's launch_bounds attribute (the kernel keeps max_flat_workgroup_size 1024, so its
// VGPR budget is that of 1024-thread blocks); hiprtc's header maps it as below, so the offline build matches.
#define MXRT_LB_1(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))
#define MXRT_LB_2(threads, min_blocks) \
  __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_waves_per_eu(min_blocks)))
#define MXRT_LB_SELECT(_1, _2, impl, ...) impl
#define __launch_bounds__(...) MXRT_LB_SELECT(__VA_ARGS__, MXRT_LB_2, MXRT_LB_1, )(__VA_ARGS__)
#else
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#endif
#endif
#define MXRT_DEVICE __device__ __forceinline__
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

// 16 bytes, loaded and stored as one vector access (ld.global.v4 / global_load_dwordx4).
struct __attribute__((aligned(16))) mxrt_u32x4 {
  u32 x, y, z, w;
};

#if defined(MXRT_CUDA)
#define MXRT_TID_X ((u32)threadIdx.x)
#define MXRT_BID_X ((u32)blockIdx.x)
#define MXRT_BID_Y ((u32)blockIdx.y)
#define MXRT_BID_Z ((u32)blockIdx.z)
MXRT_DEVICE void mxrt_sync() { __syncthreads(); }
MXRT_DEVICE i32 mxrt_clz(u32 v) { return __clz((int)v); }  // 32 for v == 0
#elif defined(MXRT_HOST_TEST)
inline i32 mxrt_clz(u32 v) { return v ? __builtin_clz(v) : 32; }
#else
#define MXRT_TID_X ((u32)__builtin_amdgcn_workitem_id_x())
#define MXRT_BID_X ((u32)__builtin_amdgcn_workgroup_id_x())
#define MXRT_BID_Y ((u32)__builtin_amdgcn_workgroup_id_y())
#define MXRT_BID_Z ((u32)__builtin_amdgcn_workgroup_id_z())
MXRT_DEVICE void mxrt_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
MXRT_DEVICE i32 mxrt_clz(u32 v) { return v ? __builtin_clz(v) : 32; }
#endif

#define MXRT_STATIC_ASSERT(cond, msg) static_assert(cond, msg)

// Byte permute, PTX prmt.b32's default mode with selector nibbles 0-7 only: byte i of the result is byte
// (s >> 4i) & 7 of the 8 bytes y:x (x = bytes 0..3). One prmt on NVIDIA, one v_perm_b32 on AMD (its selector has a
// byte per result byte and counts y first: folded at compile time for a constant s).
#if defined(MXRT_CUDA)
MXRT_DEVICE u32 mxrt_prmt(u32 x, u32 y, u32 s) { return __byte_perm(x, y, s); }
#elif defined(MXRT_HIP)
MXRT_DEVICE u32 mxrt_prmt(u32 x, u32 y, u32 s) {
  u32 sel = 0u;
  for (u32 i = 0; i < 4u; ++i) sel |= ((s >> (4u * i)) & 7u) << (8u * i);
  return __builtin_amdgcn_perm(y, x, sel);
}
#else
inline u32 mxrt_prmt(u32 x, u32 y, u32 s) {
  const u64 v = ((u64)y << 32) | x;
  u32 r = 0u;
  for (u32 i = 0; i < 4u; ++i) r |= (u32)((v >> (8u * ((s >> (4u * i)) & 7u))) & 255u) << (8u * i);
  return r;
}
#endif

// Programmatic dependent launch (sm_90+; elsewhere no-ops). A kernel launched `early` (mxrt.runtime.launch) may be
// scheduled before the kernel before it on the stream has finished: it calls mxrt_grid_dependency_wait() before it
// reads anything that kernel wrote (returns once that grid has completed and its memory is visible). The kernel
// before it calls mxrt_grid_dependents_launch() where the next one may be scheduled (here: at its start, so the next
// kernel's CTAs take the SMs its last wave leaves).
#if defined(MXRT_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
MXRT_DEVICE void mxrt_grid_dependents_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
MXRT_DEVICE void mxrt_grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#else
MXRT_DEVICE void mxrt_grid_dependents_launch() {}
MXRT_DEVICE void mxrt_grid_dependency_wait() {}
#endif
