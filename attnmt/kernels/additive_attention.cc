// Additive (Bahdanau) attention scores on the CPU, fused into one pass over the keys.
//
//   forward:  e[n,s] = sum_a v[n,a] tanh(k[n,s,a] + q[n,a])
//   backward: t = tanh(k + q) (recomputed), dpre[n,s,a] = de[n,s] v[n,a] (1 - t^2),
//             dk = dpre, dq[n,a] = sum_s dpre[n,s,a], dv[n,a] = sum_s de[n,s] t[n,s,a]
//
// XLA:CPU runs the same arithmetic as several passes over the N x S x A keys (tanh, product with v;
// tanh again, dpre, two reductions), each writing or reading a 4 MB array at the bench config.
// Here each row n is read once. Leading axes are flattened into n; v may be shared (one row) or
// given per row. Rows are shared with XLA's intra-op thread pool when it has more than one thread.
// The Python side is attnmt/kernels/__init__.py; tests/test_kernels.py checks it against the JAX path.
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

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

struct Shape {
  int64_t rows, positions, size;   // N, S, A
  bool shared_v;
};

ffi::Error shape_of(const ffi::Buffer<ffi::F32>& q, const ffi::Buffer<ffi::F32>& keys,
                    const ffi::Buffer<ffi::F32>& v, Shape* shape) {
  auto kd = keys.dimensions();
  if (kd.size() < 2) return ffi::Error::InvalidArgument("additive_attention: keys need rank >= 2");
  const int64_t size = kd.back(), positions = kd[kd.size() - 2];
  const int64_t rows = positions * size == 0 ? 0 : keys.element_count() / (positions * size);
  if (q.element_count() != rows * size)
    return ffi::Error::InvalidArgument("additive_attention: query and keys disagree in shape");
  if (v.element_count() != size && v.element_count() != rows * size)
    return ffi::Error::InvalidArgument("additive_attention: v must have A or N x A elements");
  *shape = {rows, positions, size, v.element_count() == size && rows != 1};
  return ffi::Error::Success();
}

ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> keys,
                   ffi::Buffer<ffi::F32> v, ffi::ResultBuffer<ffi::F32> e) {
  Shape sh;
  if (ffi::Error err = shape_of(q, keys, v, &sh); err.failure()) return err;
  const float* qp = q.typed_data();
  const float* kp = keys.typed_data();
  const float* vp = v.typed_data();
  float* ep = e->typed_data();
  const int64_t S = sh.positions, A = sh.size;
  parallel_rows(pool, sh.rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* qn = qp + n * A;
      const float* vn = sh.shared_v ? vp : vp + n * A;
      for (int64_t s = 0; s < S; ++s) {
        const float* k = kp + (n * S + s) * A;
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
  Shape sh;
  if (ffi::Error err = shape_of(q, keys, v, &sh); err.failure()) return err;
  const float* qp = q.typed_data();
  const float* kp = keys.typed_data();
  const float* vp = v.typed_data();
  const float* dep = de.typed_data();
  float* dqp = dq->typed_data();
  float* dkp = dkeys->typed_data();
  float* dvp = dv->typed_data();   // N x A: per row (the caller sums rows for a shared v)
  const int64_t S = sh.positions, A = sh.size;
  parallel_rows(pool, sh.rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* qn = qp + n * A;
      const float* vn = sh.shared_v ? vp : vp + n * A;
      float* dqn = dqp + n * A;
      float* dvn = dvp + n * A;
      for (int64_t a = 0; a < A; ++a) dqn[a] = dvn[a] = 0.f;
      for (int64_t s = 0; s < S; ++s) {
        const float* k = kp + (n * S + s) * A;
        float* dk = dkp + (n * S + s) * A;
        const float g = dep[n * S + s];
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
