// RoPE's rotation on the device, one definition for every kernel that turns Q or K: cuda_rope
// (in place, the first-token path) and the attention kernels, which turn Q in registers and
// each key tile in shared memory as they load them (no pass of its own over Q and K). The
// (cos, sin) come from cuda_rope_table's table: (positions, d/2) float2, pair j of position p
// at p * d/2 + j. Included by .cu files only, after cuda_common.cuh.
#ifndef RECLASS_GPU_CUDA_ROPE_CUH
#define RECLASS_GPU_CUDA_ROPE_CUH

#include "gpu/cuda/cuda_common.cuh"

// One pair (x at dim j, y at dim j + d/2) turned by cs = (cos, sin) in fp32 as HF forms it
// (q cos + rotate_half(q) sin): each product and the sum rounded on its own, no FMA, so that
// every kernel gives the same bits whatever the compiler contracts.
__device__ __forceinline__ float2 rope_turn(float x, float y, float2 cs) {
    return make_float2(__fadd_rn(__fmul_rn(x, cs.x), -__fmul_rn(y, cs.y)),
                       __fadd_rn(__fmul_rn(y, cs.x), __fmul_rn(x, cs.y)));
}

// The (cos, sin) of pairs j0 .. j0 + 7 (j0 % 2 == 0: 16-byte loads) of position p, through
// the read-only cache: the query blocks of one sequence on an SM read the same rows.
struct rope_cs8_t {
    float4 v[4]; // v[u]: pairs j0 + 2u (x, y) and j0 + 2u + 1 (z, w)
};
__device__ __forceinline__ rope_cs8_t rope_cs8(const float2 *__restrict__ tab, int half, int p,
                                               int j0) {
    const float4 *c = reinterpret_cast<const float4 *>(tab + (size_t)p * half + j0);
    rope_cs8_t r;
#pragma unroll
    for (int u = 0; u < 4; u++)
        r.v[u] = __ldg(c + u);
    return r;
}

// 8 pairs in registers: a dims j0 .. j0 + 7, b their partners j0 + d/2 .. (fp32, unrounded).
__device__ __forceinline__ void rope_turn8_f(float (&a)[8], float (&b)[8], const rope_cs8_t &c) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const float2 r0 = rope_turn(a[2 * u], b[2 * u], make_float2(c.v[u].x, c.v[u].y));
        const float2 r1 = rope_turn(a[2 * u + 1], b[2 * u + 1], make_float2(c.v[u].z, c.v[u].w));
        a[2 * u] = r0.x, b[2 * u] = r0.y, a[2 * u + 1] = r1.x, b[2 * u + 1] = r1.y;
    }
}

// 8 pairs in place: dims j0 .. j0 + 7 at lo, their partners j0 + d/2 .. at hi (16 bytes each,
// global or shared memory), rounded to the storage type once.
template <typename T>
__device__ __forceinline__ void rope_turn8(T *lo, T *hi, const rope_cs8_t &c) {
    float a[8], b[8];
    load8(lo, a);
    load8(hi, b);
    rope_turn8_f(a, b, c);
    store8(lo, a);
    store8(hi, b);
}

// Key tiles of 64 rows x 64 dims as both attention kernels stage them: 256 items of a row and
// a chunk ch < 4 (dims 8 ch .. 8 ch + 7) with its partner ch + 4 (dims + 32), so that the
// thread that copied both halves of a pair turns them once its own copies landed, with no
// barrier between. Item i of thread tid (of NT, ROPE_ITEMS(NT) each): a quarter warp's eight
// 16-byte moves cover rows r and r + 4, whose chunks fall in disjoint banks in both layouts
// (the mma.sync kernel's 144-byte padded rows, the wgmma kernel's 128-byte swizzle).
#define ROPE_ITEMS(NT) (256 / (NT))
__device__ __forceinline__ int rope_item_row(int tid, int i, int nt) {
    const int lane = tid & 31;
    return ((tid >> 5) + i * (nt >> 5)) * 8 + (lane >> 3) + ((lane >> 2) & 1) * 4;
}
__device__ __forceinline__ int rope_item_ch(int tid) {
    return tid & 3;
}

// A warp's 16 query rows of one head (head_dim 64) as the attention kernels hold them: the
// mma.sync m16k16 A fragments qa[kk][i], dims kk * 16 + 2c (+ 8 for i >= 2) and the next,
// row r0 (i even) or r0 + 8 (i odd). Dims 0..31 (kk < 2) pair with the same register of
// kk + 2, so the turn needs no exchange between lanes. Rows at or past len stay zero; row r
// of the sequence starting at token start sits at position pos[start + r].
template <typename T>
__device__ __forceinline__ void rope_turn_q(uint32_t (&qa)[4][4], const float2 *__restrict__ tab,
                                            const int32_t *__restrict__ pos, int start, int r0,
                                            int len, int c) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + (i & 1) * 8;
        if (r >= len) continue;
        const float2 *cs = tab + (size_t)__ldg(pos + start + r) * 32;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            const int d = kk * 16 + 2 * c + (i >> 1) * 8;
            const float4 cc = __ldg(reinterpret_cast<const float4 *>(cs + d));
            const float2 x = st<T>::to_f2(qa[kk][i]), y = st<T>::to_f2(qa[kk + 2][i]);
            const float2 a = rope_turn(x.x, y.x, make_float2(cc.x, cc.y));
            const float2 b = rope_turn(x.y, y.y, make_float2(cc.z, cc.w));
            qa[kk][i] = st<T>::pack(a.x, b.x);
            qa[kk + 2][i] = st<T>::pack(a.y, b.y);
        }
    }
}

#endif
