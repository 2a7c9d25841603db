// ops/bench/row_variants: one build of a catalog row kernel (run.sh): its
// median time over ROWS x COLS with L2 flushed before each sample, as a
// share of this GPU's device-to-device copy measured in the same process.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
extern "C" __global__ void ak_kernel(ak_cuda_args_t a);

static float s_median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char **argv) {
    if (argc != 3) { printf("usage: %s ROWS COLS\n", argv[0]); return 2; }
    const long rows = atol(argv[1]), cols = atol(argv[2]);
    const size_t n = (size_t) rows * cols, bytes = n * sizeof(ak_t);
    void *in[NIN], *y;
    for (int i = 0; i < NIN; i++) CK(cudaMalloc(&in[i], i == 0 ? bytes : cols * sizeof(ak_t)));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMemset(y, 0, bytes));  /* a kernel that writes less (cross_entropy: one loss a row) leaves zeros */
    std::vector<ak_t> h(n);
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = (ak_t) (((s >> 8) / 16777216.0f) * 8 - 4);
    }
    CK(cudaMemcpy(in[0], h.data(), bytes, cudaMemcpyHostToDevice));
    for (int i = 1; i < NIN; i++) CK(cudaMemcpy(in[i], h.data(), cols * sizeof(ak_t), cudaMemcpyHostToDevice));
    ak_cuda_args_t a = {};
#ifdef AK_DIMS
    const long dims[] = {AK_DIMS};
    for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) a.dims[i] = dims[i];
    a.ndims = sizeof dims / sizeof dims[0];
#else
    a.dims[0] = rows; a.dims[1] = cols; a.ndims = 2;
#endif
    for (int i = 0; i < NIN; i++) a.in[i] = in[i];
    a.nin = NIN; a.out[0] = y; a.nout = 1;
    void *flush; const size_t fb = 256u << 20; CK(cudaMalloc(&flush, fb));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    const dim3 grid(GRID), block(BLOCK);
    std::vector<float> tk, tc;
    for (int i = 0; i < 45; i++) {
        float ms;
        CK(cudaMemsetAsync(flush, i, fb));
        CK(cudaEventRecord(e0)); ak_kernel<<<grid, block>>>(a); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 5) tk.push_back(ms * 1000);
        CK(cudaMemsetAsync(flush, i, fb));
        CK(cudaEventRecord(e0)); CK(cudaMemcpyAsync(y, in[0], bytes, cudaMemcpyDeviceToDevice)); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 5) tc.push_back(ms * 1000);
    }
    CK(cudaGetLastError());
    ak_kernel<<<grid, block>>>(a);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), y, bytes, cudaMemcpyDeviceToHost));
    double sum = 0;               /* a digest of the output: variants of one op must agree closely */
    bool finite = true;
    for (size_t i = 0; i < n; i++) { double v = (double) (float) h[i]; sum += v * (double) ((i % 7) + 1); finite &= std::isfinite(v); }
    const float mk = s_median(tk), mc = s_median(tc);
    printf("%-40s %8.1f us  copy %7.1f us  %5.1f%% of copy  digest %.6e%s\n", VARIANT, mk, mc, 100.0 * mc / mk, sum,
           finite ? "" : "  NON-FINITE");
    return 0;
}
