/* ops/bench/bf16_convert: bfloat16 -> float as the CUDA library does it
   (__bfloat162float), what ak_to_acc did before 2026-12-03. */
#define ak_to_acc ak_to_acc_library
__device__ __forceinline__ float ak_to_acc_library (ak_t v) { return __bfloat162float (v); }
