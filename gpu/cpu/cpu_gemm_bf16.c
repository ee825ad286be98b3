/* bf16 GEMM: which kernel runs (CPU features, Linux's AMX permission), weight packing, the
 * activations' conversion and the loop over panel blocks, and the AVX2 + FMA kernel. The
 * AVX512-BF16 and AMX kernels have translation units of their own (cpu_bf16_avx512.c,
 * cpu_bf16_amx.c), each compiled for its ISA by target attributes only. */
#include "gpu/cpu/cpu_gemm_bf16.h"

#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <string.h>

#include "gpu/cpu/cpu_bf16_int.h"

#define NR GPU_CPU_GEMM_NR
/* Packed weight bytes a block of panels may take, so it stays in L2 while every row block of
 * x passes over it (the activations are converted once per block and row block). */
#define PANEL_BLOCK_BYTES (1u << 20)
#define RB_AVX2           12 /* rows per block on AVX2: two 6-row register blocks */

static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; activations are finite */
    return (uint16_t)(u >> 16);
}

static inline float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float gpu_cpu_bf16_round(float x) {
    return from_bf16(to_bf16(x));
}

static int kpad(int K) {
    return (K + BF16_KPAD - 1) / BF16_KPAD * BF16_KPAD;
}

size_t gpu_cpu_bf16_packed_elems(int N, int K) {
    return (size_t)((N + NR - 1) / NR) * NR * (size_t)kpad(K);
}

/* Panel j holds columns j*NR.. as Kp/2 rows of NR (k, k+1) pairs: element (k, c) at
 * ((k/2) * NR + c) * 2 + k % 2, as vdpbf16ps's and AMX's B operands take them. */
void gpu_cpu_bf16_pack(const float *w, int ldw, int N, int K, uint16_t *bp) {
    const int Kp = kpad(K), panels = (N + NR - 1) / NR;
    for (int j = 0; j < panels; j++)
        for (int k = 0; k < Kp; k++)
            for (int c = 0; c < NR; c++) {
                int n = j * NR + c;
                float v = n < N && k < K ? w[(size_t)n * ldw + k] : 0.0f;
                bp[(size_t)j * Kp * NR + ((size_t)(k / 2) * NR + c) * 2 + k % 2] = to_bf16(v);
            }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpu/cpu/cpu_simd.h"

#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux asm/prctl.h */
#define XFEATURE_XTILEDATA  18

static struct {
    pthread_once_t once;
    int avx2, avx512bf16, amx;
    const char *why_not_amx;
} feat = {.once = PTHREAD_ONCE_INIT, .why_not_amx = ""};

static uint64_t xcr0(void) {
    uint32_t a, d;
    __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
    return ((uint64_t)d << 32) | a;
}

/* Whether the tile instructions really run: a child process configures the tiles, zeroes
 * one and releases them. On some virtual machines that advertise AMX, LDTILECFG faults
 * (SIGILL or SIGSEGV) although everything above says yes; the child takes that blow, not the
 * worker. */
static int amx_runs(void) {
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        gpu_cpu_bf16_amx_probe();
        _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void detect(void) {
    __builtin_cpu_init();
    feat.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    unsigned a, b, c, d, a1 = 0, b1, c1, d1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) a = b = c = d = 0;
    if (a >= 1) __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
    unsigned a0, b0, c0, d0;
    int osxsave = __get_cpuid(1, &a0, &b0, &c0, &d0) && (c0 >> 27 & 1);
    uint64_t x = osxsave ? xcr0() : 0;
    int zmm_os = (x & 0xe6) == 0xe6; /* SSE, AVX, opmask, both ZMM halves */
    int avx512f = (b >> 16 & 1) && zmm_os;
    feat.avx512bf16 = avx512f && (a1 >> 5 & 1) && feat.avx2;
    int amx_hw = (d >> 22 & 1) && (d >> 24 & 1); /* AMX-BF16, AMX-TILE */
    if (!amx_hw)
        feat.why_not_amx = "this CPU has no AMX-BF16";
    else if (!avx512f)
        feat.why_not_amx = "AMX without usable AVX-512 (the epilogue needs it)";
    else if ((x & 0x60000) != 0x60000)
        feat.why_not_amx = "the OS does not enable AMX tile state (XCR0)";
    else if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        feat.why_not_amx = "Linux refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM): a "
                           "kernel before 5.16, or a seccomp/sigaltstack limit";
    else if (!amx_runs())
        feat.why_not_amx = "AMX instructions fault on this machine although CPUID, XCR0 and Linux "
                           "grant them (seen in virtual machines): a child process that "
                           "configured the tiles was killed by a signal";
    else
        feat.amx = 1;
}

int gpu_cpu_bf16_isa_available(gpu_cpu_bf16_isa_t isa) {
    pthread_once(&feat.once, detect);
    switch (isa) {
    case GPU_CPU_BF16_AVX2:
        return feat.avx2;
    case GPU_CPU_BF16_AVX512:
        return feat.avx512bf16;
    case GPU_CPU_BF16_AMX:
        return feat.amx;
    default:
        return 0;
    }
}

gpu_cpu_bf16_isa_t gpu_cpu_bf16_best(void) {
    if (gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AMX)) return GPU_CPU_BF16_AMX;
    if (gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AVX512)) return GPU_CPU_BF16_AVX512;
    if (gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AVX2)) return GPU_CPU_BF16_AVX2;
    return GPU_CPU_BF16_NONE;
}

const char *gpu_cpu_bf16_why_not_amx(void) {
    pthread_once(&feat.once, detect);
    return feat.why_not_amx;
}

/* ---- AVX2 + FMA: 6 rows x 16 columns in 12 ymm accumulators, products of bf16 values
 * computed exactly in fp32 (8-bit mantissas) and accumulated k after k, as AMX's TDPBF16PS
 * is specified ---- */

#define MR2 6

/* rows x 16 from the half panel at b (Kp/2 rows of NR pairs) and xf (rows, Kp): x rounded to
 * bf16, as floats. rows and full are compile-time constants at each call site. */
GEMM_NO_SANITIZE __attribute__((target("avx2,fma"), always_inline)) static inline void
block2(const float *xf, int lda, int Kp, const uint16_t *b, const float *bias, gpu_cpu_epi_t epi,
       float *y, int ldy, int rows, int full, __m256i c0, __m256i c1) {
    __m256 acc[MR2][2];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm256_setzero_ps();
        acc[r][1] = _mm256_setzero_ps();
    }
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    for (int kp = 0; kp < Kp / 2; kp++) {
        const __m256i *bw = (const __m256i *)(b + (size_t)kp * 2 * NR);
        __m256i w0 = _mm256_load_si256(bw), w1 = _mm256_load_si256(bw + 1);
        __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
        __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(xf + (size_t)r * lda + 2 * kp);
            acc[r][0] = _mm256_fmadd_ps(a, e0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, e1, acc[r][1]);
        }
        __m256 o0 = _mm256_castsi256_ps(_mm256_and_si256(w0, hi));
        __m256 o1 = _mm256_castsi256_ps(_mm256_and_si256(w1, hi));
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(xf + (size_t)r * lda + 2 * kp + 1);
            acc[r][0] = _mm256_fmadd_ps(a, o0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, o1, acc[r][1]);
        }
    }
    __m256 bias0 = !bias  ? _mm256_setzero_ps()
                   : full ? _mm256_loadu_ps(bias)
                          : _mm256_maskload_ps(bias, c0);
    __m256 bias1 = !bias  ? _mm256_setzero_ps()
                   : full ? _mm256_loadu_ps(bias + 8)
                          : _mm256_maskload_ps(bias + 8, c1);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ldy;
        epi256_store(acc[r][0], bias0, epi, yr, full, c0);
        epi256_store(acc[r][1], bias1, epi, yr + 8, full, c1);
    }
}

#define BLOCK2_CASE(R)                                                                             \
    case R:                                                                                        \
        if (cols == 16)                                                                            \
            block2(xf, lda, Kp, b, bias, epi, y, ldy, R, 1, c0, c1);                               \
        else                                                                                       \
            block2(xf, lda, Kp, b, bias, epi, y, ldy, R, 0, c0, c1);                               \
        break;

GEMM_NO_SANITIZE __attribute__((target("avx2,fma"))) static void
block2_rows(const float *xf, int lda, int Kp, const uint16_t *b, const float *bias,
            gpu_cpu_epi_t epi, float *y, int ldy, int rows, int cols) {
    __m256i c0 = lanes256(cols < 8 ? cols : 8), c1 = lanes256(cols < 8 ? 0 : cols - 8);
    switch (rows) {
        BLOCK2_CASE(6)
        BLOCK2_CASE(5)
        BLOCK2_CASE(4)
        BLOCK2_CASE(3)
        BLOCK2_CASE(2)
        BLOCK2_CASE(1)
    }
}

static void avx2_rows(const float *xf, int lda, int Kp, int rows, const uint16_t *bp, int panels,
                      int N, const float *bias, gpu_cpu_epi_t epi, float *y, int ldy) {
    for (int j = 0; j < panels; j++)
        for (int h = 0; h < NR; h += 16) { /* the panel's two halves */
            int cols = N - j * NR - h;
            if (cols <= 0) return;
            if (cols > 16) cols = 16;
            for (int r = 0; r < rows; r += MR2)
                block2_rows(xf + (size_t)r * lda, lda, Kp, bp + (size_t)j * Kp * NR + 2 * h,
                            bias ? bias + j * NR + h : NULL, epi, y + (size_t)r * ldy + j * NR + h,
                            ldy, rows - r < MR2 ? rows - r : MR2, cols);
        }
}

/* xa (rb, lda) = x (rows, K) in bf16, zero past K and in rows rows..rb-1 (AMX loads whole
 * tiles). Plain loops the compiler vectorizes: the conversion is up to a third of the time
 * where K is large against N. */
static void convert_rows(const float *x, int ldx, int rows, int rb, int K, int Kp, uint16_t *xa,
                         int lda) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ldx;
        uint16_t *o = xa + (size_t)r * lda;
        for (int k = 0; k < K; k++)
            o[k] = to_bf16(xr[k]);
        for (int k = K; k < Kp; k++)
            o[k] = 0;
    }
    for (int r = rows; r < rb; r++)
        memset(xa + (size_t)r * lda, 0, sizeof(uint16_t) * (size_t)Kp);
}

/* xf (rows, lda) = x (rows, K) rounded to bf16, as floats; zero past K. */
static void round_rows(const float *x, int ldx, int rows, int K, int Kp, float *xf, int lda) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ldx;
        float *o = xf + (size_t)r * lda;
        for (int k = 0; k < K; k++)
            o[k] = from_bf16(to_bf16(xr[k]));
        for (int k = K; k < Kp; k++)
            o[k] = 0.0f;
    }
}

void gpu_cpu_gemm_bf16_isa(gpu_cpu_bf16_isa_t isa, const float *x, int ldx, int m,
                           const uint16_t *bp, int N, int K, const float *bias, gpu_cpu_epi_t epi,
                           float *y, int ldy) {
    /* (rows of the block, Kp): bf16 rows for AVX512/AMX, bf16-rounded floats for AVX2 */
    _Alignas(64) uint16_t xa[BF16_RB_AMX * (GPU_CPU_BF16_MAX_K + BF16_ROW_PAD)];
    float *xf = (float *)(void *)xa;
    const int Kp = kpad(K), panels = (N + NR - 1) / NR, lda = Kp + BF16_ROW_PAD;
    const int rb = isa == GPU_CPU_BF16_AMX      ? BF16_RB_AMX
                   : isa == GPU_CPU_BF16_AVX512 ? BF16_RB_AVX512
                                                : RB_AVX2;
    const size_t panel = (size_t)Kp * NR;
    int per_block = (int)(PANEL_BLOCK_BYTES / (panel * sizeof(uint16_t)));
    if (per_block < 1) per_block = 1;
    if (isa == GPU_CPU_BF16_AMX) gpu_cpu_bf16_amx_begin();
    for (int j0 = 0; j0 < panels; j0 += per_block) {
        int j1 = j0 + per_block < panels ? j0 + per_block : panels;
        for (int i = 0; i < m; i += rb) {
            int rows = m - i < rb ? m - i : rb;
            const float *xr = x + (size_t)i * ldx;
            if (isa == GPU_CPU_BF16_AVX2)
                round_rows(xr, ldx, rows, K, Kp, xf, lda);
            else
                convert_rows(xr, ldx, rows, isa == GPU_CPU_BF16_AMX ? rb : rows, K, Kp, xa, lda);
            const uint16_t *b = bp + (size_t)j0 * panel;
            const float *bj = bias ? bias + j0 * NR : NULL;
            float *yj = y + (size_t)i * ldy + j0 * NR;
            if (isa == GPU_CPU_BF16_AMX)
                gpu_cpu_bf16_amx_rows(xa, lda, Kp, rows, b, j1 - j0, N - j0 * NR, bj, epi, yj, ldy);
            else if (isa == GPU_CPU_BF16_AVX512)
                gpu_cpu_bf16_avx512_rows(xa, lda, Kp, rows, b, j1 - j0, N - j0 * NR, bj, epi, yj,
                                         ldy);
            else
                avx2_rows(xf, lda, Kp, rows, b, j1 - j0, N - j0 * NR, bj, epi, yj, ldy);
        }
    }
    if (isa == GPU_CPU_BF16_AMX) gpu_cpu_bf16_amx_end();
}

#else
int gpu_cpu_bf16_isa_available(gpu_cpu_bf16_isa_t isa) {
    (void)isa;
    return 0;
}
gpu_cpu_bf16_isa_t gpu_cpu_bf16_best(void) {
    return GPU_CPU_BF16_NONE;
}
const char *gpu_cpu_bf16_why_not_amx(void) {
    return "not an x86-64 build";
}
void gpu_cpu_gemm_bf16_isa(gpu_cpu_bf16_isa_t isa, const float *x, int ldx, int m,
                           const uint16_t *bp, int N, int K, const float *bias, gpu_cpu_epi_t epi,
                           float *y, int ldy) {
    (void)isa, (void)x, (void)ldx, (void)m, (void)bp, (void)N, (void)K, (void)bias, (void)epi,
        (void)y, (void)ldy;
}
#endif

void gpu_cpu_gemm_bf16(const float *x, int ldx, int m, const uint16_t *bp, int N, int K,
                       const float *bias, gpu_cpu_epi_t epi, float *y, int ldy) {
    gpu_cpu_gemm_bf16_isa(gpu_cpu_bf16_best(), x, ldx, m, bp, N, K, bias, epi, y, ldy);
}

const char *gpu_cpu_bf16_isa_name(gpu_cpu_bf16_isa_t isa) {
    switch (isa) {
    case GPU_CPU_BF16_AMX:
        return "amx-bf16";
    case GPU_CPU_BF16_AVX512:
        return "avx512-bf16";
    case GPU_CPU_BF16_AVX2:
        return "avx2-fma (bf16 emulated in fp32)";
    default:
        return "none";
    }
}
