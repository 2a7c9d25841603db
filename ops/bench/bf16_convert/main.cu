// ops/bench/bf16_convert: softmax block_row at 4096x32000, one dtype and conversion a build (run.sh)
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
extern "C" __global__ void ak_kernel(ak_cuda_args_t a);
int main() {
    const long rows = 4096, cols = 32000;
    size_t bytes = rows * cols * sizeof(ak_t);
    void *x, *y; CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&y, bytes));
    std::vector<unsigned short> h(rows * cols);
    unsigned s = 1; for (auto &v : h) { s = s * 1664525u + 1013904223u; float f = ((s >> 8) / 16777216.0f) * 8 - 4;
        unsigned u; memcpy(&u, &f, 4);
#if defined(AK_DTYPE_FLOAT16)
        __half hv = __float2half(f); memcpy(&v, &hv, 2);
#else
        v = (unsigned short)(u >> 16);
#endif
    }
    CK(cudaMemcpy(x, h.data(), bytes, cudaMemcpyHostToDevice));
    ak_cuda_args_t a = {}; a.dims[0] = rows; a.dims[1] = cols; a.ndims = 2; a.in[0] = x; a.nin = 1; a.out[0] = y; a.nout = 1;
    void *flush; size_t fb = 256u << 20; CK(cudaMalloc(&flush, fb));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int i = 0; i < 40; i++) {
        CK(cudaMemsetAsync(flush, i, fb));
        CK(cudaEventRecord(e0)); ak_kernel<<<rows, THREADS>>>(a); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 5) ts.push_back(ms * 1000);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    double med = ts[ts.size() / 2];
    printf("%-12s THREADS=%d VEC=%d median %.1f us  %.0f GB/s\n", VARIANT, THREADS, VEC, med, 2.0 * bytes / med / 1e3);
    return 0;
}
