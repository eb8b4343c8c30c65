// Fused radial-kernel reductions for torchkern's "compiled" backend (CPU).
//
//   forward:  out[i, c] = sum_j phi(t_ij) v[c, j],           t_ij = |x_i - y_j|^2
//   gradient: gx[i, k]  = sum_j 2 w_ij psi(t_ij) (x_ik - y_jk),  w_ij = sum_c g[i, c] v[c, j]
//
// with psi = dphi/dt. No block of K is ever stored: each row i streams over the columns
// j in chunks that stay in the L1 cache, and every loop over j is a plain loop that the
// compiler vectorizes (AVX2 / AVX-512 with -march=native). exp is evaluated inline by a
// branch-free polynomial (Cody-Waite range reduction, then a Taylor polynomial on
// [-ln2/2, ln2/2]; Muller 2016, "Elementary Functions", ch. 11), accurate to about one
// unit in the last place in float and in double.
//
// Layouts: x (n, d) row-major; yt (d, m) and vt (r, m) column-major data (one row per
// feature / per right-hand side); out and g (n, r) row-major; gx (n, d) row-major.
// Each entry point computes the rows i0 <= i < i1. The caller's threads share them through
// one atomic counter (tk_radial_run): each takes the next `chunk` rows when it is free, so
// a thread that other processes deschedule holds back at most one chunk, and nobody waits
// at a barrier or spins (dynamic scheduling; no OpenMP runtime, no thread pool here).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

constexpr int64_t CHUNK = 512;
constexpr double SQRT_EPS = 1e-30;  // as torchkern.kernels._ops.safe_sqrt
// Bound on t = r^2 of the profiles of r (torchkern.kernels._ops.EXP_ZERO = 746, squared):
// e^-r is 0 there, so (1 + s)e^-s is 0 where an overflowed t = inf gave inf * 0 = NaN.
constexpr double T_MAX = 746.0 * 746.0;

template <typename T> struct Bits;
template <> struct Bits<float> { using I = int32_t; static constexpr int MANT = 23, BIAS = 127; };
template <> struct Bits<double> { using I = int64_t; static constexpr int MANT = 52, BIAS = 1023; };

template <typename T>
inline T fast_exp(T a) {
  using I = typename Bits<T>::I;
  const T lo = sizeof(T) == 4 ? T(-87.3) : T(-708.3);
  const T hi = sizeof(T) == 4 ? T(88.7) : T(709.7);
  const bool under = a < lo;  // e^a below the smallest normal: 0 (not e^lo, which a
                              // large polynomial factor or x - y would scale up)
  a = under ? lo : (a > hi ? hi : a);
  const T log2e = T(1.4426950408889634);
  T fn = std::floor(a * log2e + T(0.5));
  // ln 2 split in a part exact in T's precision and the rest (Cody and Waite 1980).
  const T c1 = sizeof(T) == 4 ? T(0.693359375) : T(6.93147180369123816490e-01);
  const T c2 = sizeof(T) == 4 ? T(-2.12194440e-4) : T(1.90821492927058770002e-10);
  T r = a - fn * c1 - fn * c2;
  T p;
  if (sizeof(T) == 4) {
    p = T(1.0 / 5040);
    p = p * r + T(1.0 / 720); p = p * r + T(1.0 / 120); p = p * r + T(1.0 / 24);
    p = p * r + T(1.0 / 6); p = p * r + T(0.5); p = p * r + T(1); p = p * r + T(1);
  } else {
    p = T(1.0 / 6227020800.0);
    p = p * r + T(1.0 / 479001600); p = p * r + T(1.0 / 39916800);
    p = p * r + T(1.0 / 3628800); p = p * r + T(1.0 / 362880); p = p * r + T(1.0 / 40320);
    p = p * r + T(1.0 / 5040); p = p * r + T(1.0 / 720); p = p * r + T(1.0 / 120);
    p = p * r + T(1.0 / 24); p = p * r + T(1.0 / 6); p = p * r + T(0.5);
    p = p * r + T(1); p = p * r + T(1);
  }
  I e = (static_cast<I>(fn) + Bits<T>::BIAS) << Bits<T>::MANT;
  T s;
  std::memcpy(&s, &e, sizeof(T));
  return under ? T(0) : p * s;
}

// Profiles phi(t) and psi(t) = dphi/dt of the squared distance t (inputs already divided
// by the lengthscale), as torchkern.kernels.stationary defines them.
enum Profile { GAUSS = 0, LAPLACE = 1, MATERN32 = 2, MATERN52 = 3 };

// The clamps let a NaN through (its comparisons are false): NaN in, NaN out, never the
// cap or the floor.
template <int P, typename T>
inline T phi(T t) {
  if (P == GAUSS) return fast_exp(T(-0.5) * t);
  t = t > T(T_MAX) ? T(T_MAX) : t;
  T r = std::sqrt((t < T(0) ? T(0) : t) + T(SQRT_EPS));
  if (P == LAPLACE) return fast_exp(-r);
  if (P == MATERN32) { T s = T(1.7320508075688772) * r; return (T(1) + s) * fast_exp(-s); }
  T s = T(2.2360679774997896) * r;
  return (T(1) + s + T(5.0 / 3.0) * t) * fast_exp(-s);
}

template <int P, typename T>
inline T psi(T t) {
  if (P == GAUSS) return T(-0.5) * fast_exp(T(-0.5) * t);
  t = t > T(T_MAX) ? T(T_MAX) : t;
  T r = std::sqrt((t < T(0) ? T(0) : t) + T(SQRT_EPS));
  if (P == LAPLACE) return T(-0.5) * fast_exp(-r) / r;
  if (P == MATERN32) return T(-1.5) * fast_exp(T(-1.7320508075688772) * r);
  T s = T(2.2360679774997896) * r;
  return T(-5.0 / 6.0) * (T(1) + s) * fast_exp(-s);
}

// Squared distances of x_i to the columns [j0, j0 + len) into buf. D > 0: the feature
// count known at compile time (the loop over k unrolled inside the loop over j).
template <int D, typename T>
inline void sqdist_chunk(const T* xi, const T* yt, int64_t m, int64_t d, int64_t j0,
                         int64_t len, T* buf) {
  if (D > 0) {
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      T acc = 0;
      for (int k = 0; k < D; ++k) { T u = xi[k] - yt[k * m + j0 + j]; acc += u * u; }
      buf[j] = acc;
    }
    return;
  }
  for (int64_t j = 0; j < len; ++j) buf[j] = 0;
  for (int64_t k = 0; k < d; ++k) {
    const T xk = xi[k];
    const T* y = yt + k * m + j0;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) { T u = xk - y[j]; buf[j] += u * u; }
  }
}

template <int P, int D, typename T>
void forward(const T* x, const T* yt, const T* vt, T* out, int64_t i0, int64_t i1,
             int64_t m, int64_t d, int64_t r) {
  alignas(64) T buf[CHUNK];
  for (int64_t i = i0; i < i1; ++i) {
    const T* xi = x + i * d;
    T* oi = out + i * r;
    for (int64_t c = 0; c < r; ++c) oi[c] = 0;
    for (int64_t j0 = 0; j0 < m; j0 += CHUNK) {
      const int64_t len = m - j0 < CHUNK ? m - j0 : CHUNK;
      if (D > 0 && r == 1) {  // fully fused: distance, profile and product in one loop
        const T* v = vt + j0;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < len; ++j) {
          T t = 0;
          for (int k = 0; k < D; ++k) { T u = xi[k] - yt[k * m + j0 + j]; t += u * u; }
          acc += phi<P>(t) * v[j];
        }
        oi[0] += acc;
        continue;
      }
      sqdist_chunk<D>(xi, yt, m, d, j0, len, buf);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) buf[j] = phi<P>(buf[j]);
      for (int64_t c = 0; c < r; ++c) {
        const T* v = vt + c * m + j0;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < len; ++j) acc += buf[j] * v[j];
        oi[c] += acc;
      }
    }
  }
}

template <int P, int D, typename T>
void gradient(const T* x, const T* yt, const T* g, const T* vt, T* gx, int64_t i0,
              int64_t i1, int64_t m, int64_t d, int64_t r) {
  alignas(64) T buf[CHUNK];
  alignas(64) T w[CHUNK];
  for (int64_t i = i0; i < i1; ++i) {
    const T* xi = x + i * d;
    const T* gi = g + i * r;
    T* out = gx + i * d;
    for (int64_t k = 0; k < d; ++k) out[k] = 0;
    for (int64_t j0 = 0; j0 < m; j0 += CHUNK) {
      const int64_t len = m - j0 < CHUNK ? m - j0 : CHUNK;
      for (int64_t j = 0; j < len; ++j) w[j] = 0;
      for (int64_t c = 0; c < r; ++c) {
        const T gc = gi[c];
        const T* v = vt + c * m + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) w[j] += gc * v[j];
      }
      sqdist_chunk<D>(xi, yt, m, d, j0, len, buf);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) buf[j] = T(2) * w[j] * psi<P>(buf[j]);
      // Differences, not x_ik Σ_j buf_j − Σ_j buf_j y_jk: at x_i = y_j the Laplacian's
      // psi is huge (1/√ε) and only the exact zero difference cancels it. An overflowed
      // difference is taken as the largest finite one: psi is 0 there, and 0 · ∞ = NaN.
      constexpr T H = std::numeric_limits<T>::max();
      for (int64_t k = 0; k < d; ++k) {
        const T* y = yt + k * m + j0;
        const T xk = xi[k];
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < len; ++j) {
          T u = xk - y[j];
          u = u > H ? H : (u < -H ? -H : u);
          acc += buf[j] * u;
        }
        out[k] += acc;
      }
    }
  }
}

// Rows [i0, i1) of the Gram matrix itself, K_ij = phi(|x_i - y_j|^2), written in place
// into out (n x m, row-major): distances chunk by chunk, then the profile on each chunk.
template <int P, int D, typename T>
void gram(const T* x, const T* yt, T* out, int64_t i0, int64_t i1, int64_t m, int64_t d) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* xi = x + i * d;
    T* oi = out + i * m;
    for (int64_t j0 = 0; j0 < m; j0 += CHUNK) {
      const int64_t len = m - j0 < CHUNK ? m - j0 : CHUNK;
      sqdist_chunk<D>(xi, yt, m, d, j0, len, oi + j0);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) oi[j0 + j] = phi<P>(oi[j0 + j]);
    }
  }
}

template <int P, typename T>
void gram_any(const T* x, const T* yt, T* out, int64_t i0, int64_t i1, int64_t m,
              int64_t d) {
  switch (d) {
    case 1: return gram<P, 1>(x, yt, out, i0, i1, m, d);
    case 2: return gram<P, 2>(x, yt, out, i0, i1, m, d);
    case 3: return gram<P, 3>(x, yt, out, i0, i1, m, d);
    case 4: return gram<P, 4>(x, yt, out, i0, i1, m, d);
    case 8: return gram<P, 8>(x, yt, out, i0, i1, m, d);
    default: return gram<P, 0>(x, yt, out, i0, i1, m, d);
  }
}

template <typename T>
void dispatch_gram(int p, const T* x, const T* yt, T* out, int64_t i0, int64_t i1,
                   int64_t m, int64_t d) {
  switch (p) {
    case GAUSS: return gram_any<GAUSS>(x, yt, out, i0, i1, m, d);
    case LAPLACE: return gram_any<LAPLACE>(x, yt, out, i0, i1, m, d);
    case MATERN32: return gram_any<MATERN32>(x, yt, out, i0, i1, m, d);
    default: return gram_any<MATERN52>(x, yt, out, i0, i1, m, d);
  }
}

template <int P, typename T>
void forward_any(const T* x, const T* yt, const T* vt, T* out, int64_t i0, int64_t i1,
                 int64_t m, int64_t d, int64_t r) {
  switch (d) {
    case 1: return forward<P, 1>(x, yt, vt, out, i0, i1, m, d, r);
    case 2: return forward<P, 2>(x, yt, vt, out, i0, i1, m, d, r);
    case 3: return forward<P, 3>(x, yt, vt, out, i0, i1, m, d, r);
    case 4: return forward<P, 4>(x, yt, vt, out, i0, i1, m, d, r);
    default: return forward<P, 0>(x, yt, vt, out, i0, i1, m, d, r);
  }
}

template <int P, typename T>
void gradient_any(const T* x, const T* yt, const T* g, const T* vt, T* gx, int64_t i0,
                  int64_t i1, int64_t m, int64_t d, int64_t r) {
  switch (d) {
    case 1: return gradient<P, 1>(x, yt, g, vt, gx, i0, i1, m, d, r);
    case 2: return gradient<P, 2>(x, yt, g, vt, gx, i0, i1, m, d, r);
    case 3: return gradient<P, 3>(x, yt, g, vt, gx, i0, i1, m, d, r);
    default: return gradient<P, 0>(x, yt, g, vt, gx, i0, i1, m, d, r);
  }
}

template <typename T>
void dispatch_forward(int p, const T* x, const T* yt, const T* vt, T* out, int64_t i0,
                      int64_t i1, int64_t m, int64_t d, int64_t r) {
  switch (p) {
    case GAUSS: return forward_any<GAUSS>(x, yt, vt, out, i0, i1, m, d, r);
    case LAPLACE: return forward_any<LAPLACE>(x, yt, vt, out, i0, i1, m, d, r);
    case MATERN32: return forward_any<MATERN32>(x, yt, vt, out, i0, i1, m, d, r);
    default: return forward_any<MATERN52>(x, yt, vt, out, i0, i1, m, d, r);
  }
}

template <typename T>
void dispatch_gradient(int p, const T* x, const T* yt, const T* g, const T* vt, T* gx,
                       int64_t i0, int64_t i1, int64_t m, int64_t d, int64_t r) {
  switch (p) {
    case GAUSS: return gradient_any<GAUSS>(x, yt, g, vt, gx, i0, i1, m, d, r);
    case LAPLACE: return gradient_any<LAPLACE>(x, yt, g, vt, gx, i0, i1, m, d, r);
    case MATERN32: return gradient_any<MATERN32>(x, yt, g, vt, gx, i0, i1, m, d, r);
    default: return gradient_any<MATERN52>(x, yt, g, vt, gx, i0, i1, m, d, r);
  }
}

}  // namespace

extern "C" {

void tk_radial_forward_f32(int p, const float* x, const float* yt, const float* vt,
                           float* out, int64_t i0, int64_t i1, int64_t m, int64_t d,
                           int64_t r) {
  dispatch_forward<float>(p, x, yt, vt, out, i0, i1, m, d, r);
}

void tk_radial_forward_f64(int p, const double* x, const double* yt, const double* vt,
                           double* out, int64_t i0, int64_t i1, int64_t m, int64_t d,
                           int64_t r) {
  dispatch_forward<double>(p, x, yt, vt, out, i0, i1, m, d, r);
}

void tk_radial_gradient_f32(int p, const float* x, const float* yt, const float* g,
                            const float* vt, float* gx, int64_t i0, int64_t i1, int64_t m,
                            int64_t d, int64_t r) {
  dispatch_gradient<float>(p, x, yt, g, vt, gx, i0, i1, m, d, r);
}

void tk_radial_gradient_f64(int p, const double* x, const double* yt, const double* g,
                            const double* vt, double* gx, int64_t i0, int64_t i1, int64_t m,
                            int64_t d, int64_t r) {
  dispatch_gradient<double>(p, x, yt, g, vt, gx, i0, i1, m, d, r);
}

// r is unused: the signature matches the other entry points (one calling convention).
void tk_radial_gram_f32(int p, const float* x, const float* yt, float* out, int64_t i0,
                        int64_t i1, int64_t m, int64_t d, int64_t r) {
  (void)r;
  dispatch_gram<float>(p, x, yt, out, i0, i1, m, d);
}

void tk_radial_gram_f64(int p, const double* x, const double* yt, double* out, int64_t i0,
                        int64_t i1, int64_t m, int64_t d, int64_t r) {
  (void)r;
  dispatch_gram<double>(p, x, yt, out, i0, i1, m, d);
}

// Work sharing: every thread that calls this with the same counter takes rows
// [i, i + chunk) with i = counter++ * chunk until i >= i1 (an atomic fetch-and-add, no
// lock), and calls entry point `fn` (one of the above, by its index) on them. Threads
// return as soon as no rows are left; the caller joins them (no spinning here).
void tk_radial_run(int which, int p, const void* a0, const void* a1, const void* a2,
                   const void* a3, void* out, int64_t i1, int64_t m, int64_t d, int64_t r,
                   int64_t chunk, int64_t* counter) {
  for (;;) {  // the GCC / Clang builtin: the compilers this file is built with
    const int64_t i = __atomic_fetch_add(counter, int64_t(1), __ATOMIC_RELAXED) * chunk;
    if (i >= i1) return;
    const int64_t e = i + chunk < i1 ? i + chunk : i1;
    switch (which) {
      case 0: tk_radial_forward_f32(p, (const float*)a0, (const float*)a1, (const float*)a2,
                                    (float*)out, i, e, m, d, r); break;
      case 1: tk_radial_forward_f64(p, (const double*)a0, (const double*)a1,
                                    (const double*)a2, (double*)out, i, e, m, d, r); break;
      case 2: tk_radial_gradient_f32(p, (const float*)a0, (const float*)a1, (const float*)a2,
                                     (const float*)a3, (float*)out, i, e, m, d, r); break;
      case 3: tk_radial_gradient_f64(p, (const double*)a0, (const double*)a1,
                                     (const double*)a2, (const double*)a3, (double*)out, i,
                                     e, m, d, r); break;
      case 4: tk_radial_gram_f32(p, (const float*)a0, (const float*)a1, (float*)out, i, e, m,
                                 d, r); break;
      default: tk_radial_gram_f64(p, (const double*)a0, (const double*)a1, (double*)out, i,
                                  e, m, d, r); break;
    }
  }
}

}  // extern "C"
