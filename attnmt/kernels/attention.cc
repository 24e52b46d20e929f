// The decoder's attention on the CPU: additive (Bahdanau) scores fused into one pass over the keys,
// and the context product (further down).
//
//   forward:  e[n,s] = sum_a v[n,a] tanh(k[n,s,a] + q[n,a])
//   backward: t = tanh(k + q) (recomputed), dpre[n,s,a] = de[n,s] v[n,a] (1 - t^2),
//             dk = dpre, dq[n,a] = sum_s dpre[n,s,a], dv[n,a] = sum_s de[n,s] t[n,s,a]
//
// XLA:CPU runs the same arithmetic as several passes over the N x S x A keys (tanh, product with v;
// tanh again, dpre, two reductions), each writing or reading a 4 MB array at the bench config.
// Here each row n is read once. Leading (batch) axes are flattened into n; an operand may have 1
// for any of them (broadcast: v shared by the rows). Rows are shared with XLA's intra-op threads.
// The Python side is attnmt/kernels/__init__.py; tests/test_kernels.py checks it against the JAX path.
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// tanh as Eigen's and XLA's float approximation: a 13/6 rational function on [-c, c], clamped
// outside, +-1 beyond 9, and x itself where |x| is below 4e-4. Written so that the compiler vectorises the loops
// it sits in. The library is compiled with -ffast-math (for the reciprocal estimate), under which
// the compiler may assume there are no NaNs; the integer test on x's bits keeps them anyway.
inline float fast_tanh(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const float c = 7.90531110763549805f;
  const float xc = x < -c ? -c : (x > c ? c : x);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float r = 1.19825839466702e-06f;
  r = r * x2 + 1.18534705686654e-04f;
  r = r * x2 + 2.26843463243900e-03f;
  r = r * x2 + 4.89352518554385e-03f;
  const float t = p / r;
  // Past 9, float tanh is 1 exactly; the approximation (with a reciprocal estimate) would be 2 ulp short.
  const float saturated = std::fabs(x) >= 9.f ? std::copysign(1.f, x) : t;
  return nan || std::fabs(x) < 0.0004f ? x : saturated;
}

// Runs fn(begin, end) over [0, rows) in chunks of a few rows that this thread and one task per other
// thread of XLA's intra-op pool claim in turn. The pool's threads may be busy with other kernels of
// the same program (the decoder runs its recurrent product beside the attention), so a task can
// start late or never claim a chunk: this thread waits only for chunks already claimed, never for a
// task to start. The tasks' shared state is on the heap, as they may run after this call returns.
template <typename F>
void parallel_rows(ffi::ThreadPool& pool, int64_t rows, F fn) {
  const int64_t chunk = 4, chunks = (rows + chunk - 1) / chunk;
  int64_t helpers = pool.num_threads() - 1;
  if (helpers > chunks - 1) helpers = chunks - 1;
  if (helpers <= 0) {
    fn(0, rows);
    return;
  }
  struct Work {
    std::atomic<int64_t> next{0}, done{0};
    std::mutex mu;
    std::condition_variable cv;
  };
  auto work = std::make_shared<Work>();
  auto claim = [rows, chunk, chunks](Work& w, F& f) {
    for (int64_t i; (i = w.next.fetch_add(1)) < chunks;) {
      const int64_t begin = i * chunk, end = begin + chunk < rows ? begin + chunk : rows;
      f(begin, end);   // only reached while the caller waits for this chunk: f is still alive
      if (w.done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(w.mu);
        w.cv.notify_all();
      }
    }
  };
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([work, claim, f = &fn] { claim(*work, *f); });
  claim(*work, fn);
  std::unique_lock<std::mutex> lock(work->mu);
  work->cv.wait(lock, [&] { return work->done.load() == chunks; });
}

// Maps a row n of the output's leading (batch) axes to a row of an operand whose leading axes are
// either the output's or 1 (broadcast), aligned to the right as in NumPy. Under vmap with
// vmap_method='expand_dims' an operand that is not batched (v, shared by all rows) arrives with 1s.
class RowMap {
 public:
  RowMap() = default;
  RowMap(const std::vector<int64_t>& out, ffi::Span<const int64_t> dims, size_t trailing) : out_(out) {
    const size_t lead = dims.size() - trailing, offset = out.size() - lead;
    strides_.assign(out.size(), 0);
    int64_t stride = 1;
    for (size_t i = lead; i-- > 0;) {
      if (dims[i] != 1) strides_[offset + i] = stride;
      stride *= dims[i];
    }
  }
  int64_t operator()(int64_t n) const {
    int64_t row = 0;
    for (size_t i = out_.size(); i-- > 0;) {
      row += (n % out_[i]) * strides_[i];
      n /= out_[i];
    }
    return row;
  }

 private:
  std::vector<int64_t> out_, strides_;
};

struct Layout {
  int64_t rows = 0, positions = 0, size = 0;   // N (all leading axes), S, A
  RowMap q, keys, v, de;
};

// Checks the operands against the output's leading axes `out` (e's shape without S) and builds the
// row maps. Every operand's leading axes must be the output's or 1.
ffi::Error layout_of(ffi::Span<const int64_t> e_dims, ffi::Span<const int64_t> q_dims,
                     ffi::Span<const int64_t> k_dims, ffi::Span<const int64_t> v_dims,
                     const ffi::Span<const int64_t>* de_dims, Layout* layout) {
  if (e_dims.size() < 1 || k_dims.size() < 2 || q_dims.size() < 1 || v_dims.size() < 1)
    return ffi::Error::InvalidArgument("additive_attention: scores need S, keys S x A, query and v A");
  std::vector<int64_t> out(e_dims.begin(), e_dims.end() - 1);
  layout->positions = e_dims.back();
  layout->size = k_dims.back();
  layout->rows = 1;
  for (int64_t d : out) layout->rows *= d;
  auto fits = [&](ffi::Span<const int64_t> dims, size_t trailing) {
    if (dims.size() < trailing || dims.size() - trailing > out.size()) return false;
    const size_t offset = out.size() - (dims.size() - trailing);
    for (size_t i = 0; i + trailing < dims.size(); ++i)
      if (dims[i] != 1 && dims[i] != out[offset + i]) return false;
    return true;
  };
  if (k_dims[k_dims.size() - 2] != layout->positions || q_dims.back() != layout->size ||
      v_dims.back() != layout->size || !fits(q_dims, 1) || !fits(k_dims, 2) || !fits(v_dims, 1) ||
      (de_dims && (de_dims->back() != layout->positions || !fits(*de_dims, 1))))
    return ffi::Error::InvalidArgument("additive_attention: operand shapes do not broadcast to the scores'");
  layout->q = RowMap(out, q_dims, 1);
  layout->keys = RowMap(out, k_dims, 2);
  layout->v = RowMap(out, v_dims, 1);
  if (de_dims) layout->de = RowMap(out, *de_dims, 1);
  return ffi::Error::Success();
}

ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> keys,
                   ffi::Buffer<ffi::F32> v, ffi::ResultBuffer<ffi::F32> e) {
  Layout L;
  if (ffi::Error err = layout_of(e->dimensions(), q.dimensions(), keys.dimensions(), v.dimensions(), nullptr, &L);
      err.failure())
    return err;
  const float* qp = q.typed_data();
  const float* kp = keys.typed_data();
  const float* vp = v.typed_data();
  float* ep = e->typed_data();
  const int64_t S = L.positions, A = L.size;
  parallel_rows(pool, L.rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* qn = qp + L.q(n) * A;
      const float* vn = vp + L.v(n) * A;
      const float* kn = kp + L.keys(n) * S * A;
      for (int64_t s = 0; s < S; ++s) {
        const float* k = kn + s * A;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int64_t a = 0; a < A; ++a) acc += vn[a] * fast_tanh(k[a] + qn[a]);
        ep[n * S + s] = acc;
      }
    }
  });
  return ffi::Error::Success();
}

ffi::Error Backward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> keys,
                    ffi::Buffer<ffi::F32> v, ffi::Buffer<ffi::F32> de, ffi::ResultBuffer<ffi::F32> dq,
                    ffi::ResultBuffer<ffi::F32> dkeys, ffi::ResultBuffer<ffi::F32> dv) {
  // dq, dkeys and dv have the output's leading axes (N x A, N x S x A, N x A: dv per row; the caller
  // sums the rows that share a v).
  Layout L;
  const auto de_dims = de.dimensions();
  if (ffi::Error err = layout_of(dkeys->dimensions().first(dkeys->dimensions().size() - 1), q.dimensions(),
                                 keys.dimensions(), v.dimensions(), &de_dims, &L);
      err.failure())
    return err;
  const float* qp = q.typed_data();
  const float* kp = keys.typed_data();
  const float* vp = v.typed_data();
  const float* dep = de.typed_data();
  float* dqp = dq->typed_data();
  float* dkp = dkeys->typed_data();
  float* dvp = dv->typed_data();
  const int64_t S = L.positions, A = L.size;
  parallel_rows(pool, L.rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* qn = qp + L.q(n) * A;
      const float* vn = vp + L.v(n) * A;
      const float* kn = kp + L.keys(n) * S * A;
      const float* den = dep + L.de(n) * S;
      float* dqn = dqp + n * A;
      float* dvn = dvp + n * A;
      for (int64_t a = 0; a < A; ++a) dqn[a] = dvn[a] = 0.f;
      for (int64_t s = 0; s < S; ++s) {
        const float* k = kn + s * A;
        float* dk = dkp + (n * S + s) * A;
        const float g = den[s];
#pragma omp simd
        for (int64_t a = 0; a < A; ++a) {
          const float t = fast_tanh(k[a] + qn[a]);
          const float d = g * vn[a] * (1.f - t * t);
          dk[a] = d;
          dqn[a] += d;
          dvn[a] += g * t;
        }
      }
    }
  });
  return ffi::Error::Success();
}

// The attention context c[n,h] = sum_s w[n,s] m[n,s,h] (m: the annotations) and its input gradient
// dw[n,s] = sum_h dc[n,h] m[n,s,h]. XLA:CPU runs both as Eigen batched matrix-vector products on one
// thread; here rows are shared with the pool. Operands have the same leading axes (the caller
// broadcasts).
// N, S and H of the context's operands: m is N x S x H (N: all leading axes); the weights (or their
// gradient) must have N x S elements and the context (or its gradient) N x H.
ffi::Error context_layout(const ffi::Buffer<ffi::F32>& m, int64_t weights, int64_t context, int64_t* rows,
                          int64_t* S, int64_t* H) {
  const auto md = m.dimensions();
  if (md.size() < 2) return ffi::Error::InvalidArgument("attention_context: m needs rank >= 2");
  *S = md[md.size() - 2];
  *H = md.back();
  *rows = *S * *H ? m.element_count() / (*S * *H) : 0;
  if (weights != *rows * *S || context != *rows * *H)
    return ffi::Error::InvalidArgument("attention_context: weights, m and context disagree in shape");
  return ffi::Error::Success();
}

ffi::Error Context(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> w, ffi::Buffer<ffi::F32> m,
                   ffi::ResultBuffer<ffi::F32> c) {
  int64_t rows, S, H;
  if (ffi::Error err = context_layout(m, w.element_count(), c->element_count(), &rows, &S, &H); err.failure())
    return err;
  const float* wp = w.typed_data();
  const float* mp = m.typed_data();
  float* cp = c->typed_data();
  parallel_rows(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      float* cn = cp + n * H;
      for (int64_t h = 0; h < H; ++h) cn[h] = 0.f;
      for (int64_t s = 0; s < S; ++s) {
        const float ws = wp[n * S + s];
        const float* row = mp + (n * S + s) * H;
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) cn[h] += ws * row[h];
      }
    }
  });
  return ffi::Error::Success();
}

ffi::Error ContextInputGrad(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> dc, ffi::Buffer<ffi::F32> m,
                            ffi::ResultBuffer<ffi::F32> dw) {
  int64_t rows, S, H;
  if (ffi::Error err = context_layout(m, dw->element_count(), dc.element_count(), &rows, &S, &H); err.failure())
    return err;
  const float* dcp = dc.typed_data();
  const float* mp = m.typed_data();
  float* dwp = dw->typed_data();
  parallel_rows(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* dcn = dcp + n * H;
      for (int64_t s = 0; s < S; ++s) {
        const float* row = mp + (n * S + s) * H;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int64_t h = 0; h < H; ++h) acc += dcn[h] * row[h];
        dwp[n * S + s] = acc;
      }
    }
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(AttnmtAdditiveForward, Forward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(AttnmtAdditiveBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// Both context handlers take two float32 buffers and return one.
static auto BindTwoToOne() {
  return ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().Arg<ffi::Buffer<ffi::F32>>().Arg<ffi::Buffer<ffi::F32>>()
      .Ret<ffi::Buffer<ffi::F32>>();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(AttnmtContextForward, Context, BindTwoToOne());
XLA_FFI_DEFINE_HANDLER_SYMBOL(AttnmtContextInputGrad, ContextInputGrad, BindTwoToOne());
