/* cuda_ops.c - times the CUDA kernels (kernels/cuda/cuda_ops.h) at
 * SmolLM2-135M sizes (hidden 576, intermediate 1536, 9 heads of 64 over 3
 * kv heads, vocab 49152) against a device-to-device cudaMemcpy of the
 * same weight bytes, measured in the same run on the same device.
 *
 * One line per measurement:
 *   op  type  shape  T  variant  us/call  GB/s  %copy
 * GB/s is the bytes the op must read and write (weights once, activations)
 * over the time; %copy compares it with the copy's bandwidth (bytes read +
 * written over its time).  A benchmark: nothing is asserted; exit 0 when
 * everything ran, 2 when something could not (no device, a CUDA error).
 *
 * The DeepSeek section (kernels/cuda/cuda_deepseek.cu, cuda_sample.cu) at
 * DeepSeek-V3/V3.2/V4 sizes: the FP8 block-scaled GEMV/GEMM, MLA's
 * absorption GEMMs and absorbed decode (dense and sparse), the indexer's
 * scores and top-k, the routers, the expert combine, mHC and sampling over
 * a 129280 vocabulary; "bytes" is what the op must read and write once
 * (the latent cache once for MLA, however many heads read it; the bf16
 * weight half for each absorption).  The reference kernels are timed only
 * where they finish in a moment (the sampler's is O(V^2), MLA's recomputes
 * the scores per output element): "-" in the us/call column otherwise.
 * Then kernels/cuda/cuda_ds4.cu at DeepSeek-V4-Flash sizes: the
 * shared-KV attention with sinks (CSA: window + 512 picked entries; HCA:
 * window + every entry), the clamped SwiGLU, the output's inverse RoPE,
 * hc_head, the FP4 expert GEMV/GEMM (UE8M0 scales per 32), the
 * compressor (T = the entries pooled) and V3.2's indexer LayerNorm.
 *
 * BF16 matmul lines also time `tc`, the tensor-core GEMM
 * (ld_cu_matmul_tc, sm_80+).  The GEMM section (engine) then measures the
 * ceiling of that GEMM: cuBLAS's bf16 GEMM (bf16 A and B, fp32 C,
 * CUBLAS_COMPUTE_32F) at the same shapes in the same run, loaded at run
 * time (dlopen: this binary has no link-time dependency on cuBLAS, which
 * the GPU machine may lack), and prints for tc and custom their TFLOP/s
 * and `%cublas`, their rate over cuBLAS's; "cublas: unavailable (why)"
 * when it cannot be loaded.
 *
 * Usage: bench_cuda_ops [--quick] [--only engine|deepseek] */
#include "cuda_ops.h"

int quick;
const char *only;
int tc_ok;

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "engine") || !strcmp(argv[i + 1], "deepseek")))
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cuda_ops [--quick] [--only engine|deepseek]\n");
            return 2;
        }
    }
    int n = 0, e = ld_cu_device_count(&n);
    if (e || !n) {
        printf("bench_cuda_ops: no CUDA device (%s); nothing measured\n", e ? ld_cu_error_string(e) : "0 devices");
        return 2;
    }
    char name[256];
    int major = 0, minor = 0, sms = 0;
    TRY(ld_cu_device_info(0, name, sizeof name, &major, &minor, &sms));
    printf("device: %s (sm_%d%d, %d SMs)\n", name, major, minor, sms);
    tc_ok = major >= 8;

    /* the lm_head's f32 bytes: big enough for a steady copy bandwidth */
    double cp = copy_gbps((size_t)49152 * 576 * 4);
    printf("cudaMemcpy device-to-device, %zu MB: %.1f GB/s (read + write)\n\n", (size_t)49152 * 576 * 4 >> 20, cp);
    printf("%-9s %-5s %-12s %4s  %-6s %10s %8s %7s\n", "op", "type", "N x K", "T", "kernel", "us/call", "GB/s",
           "%copy");

    if (only && !strcmp(only, "deepseek")) {
        bench_deepseek(cp);
        return 0;
    }
    struct { int N, K; } shapes[] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
    ld_kdt types[] = {LD_KDT_F32, LD_KDT_F16, LD_KDT_BF16, LD_KDT_Q8_0, LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q4_K,
                      LD_KDT_Q6_K};
    int Ts[] = {1, 8, 64};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int N = shapes[si].N, K = shapes[si].K;
            ld_kdt dt = types[ti];
            if ((dt == LD_KDT_Q4_K || dt == LD_KDT_Q6_K) && K % 256) continue;
            if (quick && si != 2 && si != 4) continue;
            size_t wb = ld_cu_row_bytes(dt, K) * (size_t)N;
            void *w = dev_random(wb);
            float *x = dev_random(sizeof(float) * 64 * (size_t)K);
            float *out;
            TRY(ld_cu_malloc((void **)&out, sizeof(float) * 64 * (size_t)N));
            /* x as small floats: random f32 bits masked above are finite */
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%d", N, K);
            for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
                int T = Ts[k];
                if (quick && T == 64) continue;
                double bytes = (double)wb + 4.0 * T * ((double)K + (double)N);
                for (int v = V_TC; v >= 0; v--) {
                    if (v == LD_CU_REF && (T > 8 || N > 2000) && quick) continue;
                    if (v == V_TC && (!tc_ok || !ld_cu_matmul_tc_supported(dt, K))) continue;
                    mm_ctx c = {v, out, x, w, dt, T, K, N};
                    int iters = v == LD_CU_REF ? 5 : (quick ? 20 : 100);
                    const char *kname = v == V_TC ? "tc" : v ? "custom" : "ref";
                    line("matmul", dt_name(dt), shape, T, kname, time_it(call_mm, &c, iters), bytes, cp);
                }
            }
            TRY(ld_cu_free(w));
            TRY(ld_cu_free(x));
            TRY(ld_cu_free(out));
        }
    }

    /* decode attention: one query of 9 heads against `ctx` cached positions */
    int ctxs[] = {128, 1024, 4096};
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        int ctx = ctxs[i];
        size_t kvn = (size_t)ctx * 3 * 64;
        att_ctx c = {0};
        c.q = dev_random(sizeof(float) * 9 * 64);
        c.k = dev_random(sizeof(float) * kvn);
        c.vc = dev_random(sizeof(float) * kvn);
        TRY(ld_cu_malloc((void **)&c.out, sizeof(float) * 9 * 64));
        c.T = 1;
        c.pos0 = ctx - 1;
        c.work_n = ld_cu_attention_work(LD_CU_CUSTOM, 1, 9, 64, c.pos0, 1);
        TRY(ld_cu_malloc((void **)&c.work, sizeof(float) * c.work_n));
        char shape[32];
        snprintf(shape, sizeof shape, "ctx %d", ctx);
        double bytes = 2.0 * 4.0 * (double)kvn;
        for (int v = 1; v >= 0; v--) {
            c.v = v;
            line("attention", "f32", shape, 1, v ? "custom" : "ref", time_it(call_att, &c, v ? 100 : 5), bytes, cp);
        }
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.k));
        TRY(ld_cu_free(c.vc));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(c.work));
    }
    printf("\n");
    bench_gemm();
    if (!only) {
        printf("\n");
        bench_deepseek(cp);
    }
    return 0;
}
