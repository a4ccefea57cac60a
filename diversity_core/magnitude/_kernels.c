/* The magnitude engine's compiled kernels: the exponentials of exp(-tD), the weighted distance
 * form dMag/dt, and the large-n path's products with exp(-tD), each in one pass over its
 * matrices.
 *
 * exp through glibc's vector math library (libmvec, _ZGVdN4v_exp: AVX2, at most 4 ulp from the
 * true value), four entries at a time. Why by hand: NumPy vectorises its float64 exp for AVX-512
 * only; on an AVX2-only x86-64 CPU every entry goes through glibc's scalar exp (7 to 9 ns an entry
 * on the project's machines), and the exponentials of exp(-tD) are half of a MagArea's time at
 * 1,000 points. libmvec's AVX2 routine takes 1.4 to 2.2 ns an entry on the same machines. NumPy,
 * SciPy and the standard library offer no binding to it (its functions take and return AVX
 * registers). ``exp_inplace`` exponentiates a buffer; ``exp_scaled`` forms exp(max(-t D, floor))
 * from a block of D straight into a block of Z, the product and the floor taken in registers
 * (NumPy takes three passes and a copy for it: the product, the floor, the exponential).
 *
 * Every entry goes through the vector routine, the last ones of a buffer or row padded to a full
 * register, so an entry's result depends on its value only, not on its position or on how a
 * matrix was cut into blocks (the library's paths must give the same bits for the same scale);
 * the product -t·D and the floor are IEEE operations, the bits of NumPy's multiply and maximum.
 * Where the CPU lacks AVX2 or FMA (checked at run time) the module answers with glibc's scalar
 * exp, which is what NumPy computes there, and ``VECTORISED`` is False; so it does on any CPU
 * where DIVERSITY_CORE_SCALAR_KERNELS is set (not to 0) when the module loads, which is how the
 * tests run those routines.
 *
 * ``weighted_row_sums``: dMag/dt = wᵀ (D ∘ Z_t) w, at every scale a Hermite rule or the
 * convergence-scale search solves, is 2 Σ_i w_i s_i with s_i = Σ_{j>i} Z_ij D_ij w_j (or Σ_{j<i}
 * where the strict lower triangle holds Z_t, as after a Cholesky factorisation that kept it).
 * NumPy takes four passes for it (a copy of a row block of the triangle, its diagonal part cut
 * out, the product with D, a matrix-vector product); here each entry of D and Z is read once.
 * NumPy, SciPy and BLAS offer no elementwise product of three operands with a reduction. Each
 * row's sum is formed in a fixed order (four running sums over j, then the tail) by plain C,
 * without contraction into fused multiply-adds, so a row's bits depend on that row only: not on
 * the rows a thread was given, the thread count or the CPU.
 *
 * ``panel_product32``: the large-n path's float32 product Z_t x, one stored panel of the
 * distance matrix's upper triangle at a time (``_large``): each entry's exp(max(-t D, floor))
 * is formed in a register (libmvec's _ZGVdN8v_expf, eight at a time) and used at once for the
 * panel's rows and, beyond its diagonal block, for the mirrored columns, so every distance is
 * read once. NumPy takes five passes over a block for it (the product, the floor, the
 * exponential, two matrix-vector products), and the first alone, which reads the panel from
 * memory, cost more than the exponential. A row's sum runs in eight float64 lanes, added in a
 * fixed order; no fused multiply-adds. ``panel_product64`` does the same in float64 for the
 * refinement's products: Z_t x and (D ∘ Z_t) v for one or two vectors v (the derivative's
 * weighting, the distance bound's |w|), libmvec's _ZGVdN4v_exp four at a time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC optimize("fp-contract=off")

__attribute__((target("avx2,fma"))) extern __m256d _ZGVdN4v_exp(__m256d);
__attribute__((target("avx2,fma"))) extern __m256 _ZGVdN8v_expf(__m256);

static int vectorised = 0;

__attribute__((target("avx2,fma")))
static void exp_avx2(double *x, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(x + i, _ZGVdN4v_exp(_mm256_loadu_pd(x + i)));
    if (i < n) {
        double tail[4] = {0.0, 0.0, 0.0, 0.0};
        memcpy(tail, x + i, (size_t)(n - i) * sizeof(double));
        _mm256_storeu_pd(tail, _ZGVdN4v_exp(_mm256_loadu_pd(tail)));
        memcpy(x + i, tail, (size_t)(n - i) * sizeof(double));
    }
}

static void exp_scalar(double *x, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; ++i)
        x[i] = exp(x[i]);
}

/* out[j] = exp(max(scale * d[j], floor)) for one row of m entries. */
__attribute__((target("avx2,fma")))
static void exp_scaled_row_avx2(const double *d, double *out, Py_ssize_t m, double scale,
                                double floor)
{
    const __m256d s = _mm256_set1_pd(scale), f = _mm256_set1_pd(floor);
    Py_ssize_t j = 0;
    for (; j + 4 <= m; j += 4) {
        __m256d x = _mm256_max_pd(_mm256_mul_pd(_mm256_loadu_pd(d + j), s), f);
        _mm256_storeu_pd(out + j, _ZGVdN4v_exp(x));
    }
    if (j < m) {
        double tail[4] = {0.0, 0.0, 0.0, 0.0};
        for (Py_ssize_t k = 0; k < m - j; ++k) {
            double x = scale * d[j + k];
            tail[k] = x < floor ? floor : x;
        }
        _mm256_storeu_pd(tail, _ZGVdN4v_exp(_mm256_loadu_pd(tail)));
        memcpy(out + j, tail, (size_t)(m - j) * sizeof(double));
    }
}

static void exp_scaled_row_scalar(const double *d, double *out, Py_ssize_t m, double scale,
                                  double floor)
{
    for (Py_ssize_t j = 0; j < m; ++j) {
        double x = scale * d[j];
        out[j] = exp(x < floor ? floor : x);
    }
}

/* A buffer of float64 ('d') or float32 ('f') entries with its shape and strides, or an error
 * naming the function and the argument. */
static int typed_buffer(PyObject *obj, Py_buffer *view, int writable, char type,
                        const char *name, const char *what)
{
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    Py_ssize_t size = type == 'd' ? 8 : 4;
    if (view->itemsize != size || view->format == NULL || view->format[0] != type
            || view->format[1] != '\0') {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: %s must be a buffer of %s", name, what,
                     type == 'd' ? "float64" : "float32");
        return -1;
    }
    return 0;
}

/* typed_buffer for `count` arguments of types `types` ('d' or 'f' each), the last one written
 * to: returns how many views are held (all of them, or fewer with the error set). */
static int typed_buffers(PyObject *const *objects, Py_buffer *views, int count, const char *types,
                         const char *name, const char *const *what)
{
    int held = 0;
    while (held < count && typed_buffer(objects[held], &views[held], held == count - 1,
                                        types[held], name, what[held]) == 0)
        ++held;
    return held;
}

static void release_buffers(Py_buffer *views, int held)
{
    for (int i = 0; i < held; ++i)
        PyBuffer_Release(&views[i]);
}

/* Release the views, and return None, or NULL with a ValueError naming the problem. */
static PyObject *finish(Py_buffer *views, int held, const char *name, const char *problem)
{
    release_buffers(views, held);
    if (problem != NULL) {
        PyErr_Format(PyExc_ValueError, "%s: %s", name, problem);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *exp_inplace(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (typed_buffer(arg, &view, 1, 'd', "exp_inplace", "a") < 0)
        return NULL;
    if (!PyBuffer_IsContiguous(&view, 'C')) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "exp_inplace: a must be C-contiguous");
        return NULL;
    }
    double *x = (double *)view.buf;
    Py_ssize_t n = view.len / 8;
    Py_BEGIN_ALLOW_THREADS
    if (vectorised)
        exp_avx2(x, n);
    else
        exp_scalar(x, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *exp_scaled(PyObject *self, PyObject *args)
{
    PyObject *objects[2];
    const char *what[2] = {"D", "out"};
    Py_buffer views[2];
    double scale, floor;
    if (!PyArg_ParseTuple(args, "OddO", &objects[0], &scale, &floor, &objects[1]))
        return NULL;
    int held = typed_buffers(objects, views, 2, "dd", "exp_scaled", what);
    if (held < 2) {
        release_buffers(views, held);
        return NULL;
    }
    Py_buffer *d = &views[0], *out = &views[1];
    const char *problem = NULL;
    if (d->ndim != 2 || out->ndim != 2 || d->shape[0] != out->shape[0]
            || d->shape[1] != out->shape[1])
        problem = "D and out must be two-dimensional, of one shape";
    else if ((d->shape[1] > 1 && d->strides[1] != 8) || (out->shape[1] > 1 && out->strides[1] != 8))
        problem = "the rows of D and out must be contiguous";
    if (problem == NULL) {
        Py_ssize_t rows = d->shape[0], m = d->shape[1];
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; ++r) {
            const double *row = (const double *)((const char *)d->buf + r * d->strides[0]);
            double *target = (double *)((char *)out->buf + r * out->strides[0]);
            if (vectorised)
                exp_scaled_row_avx2(row, target, m, scale, floor);
            else
                exp_scaled_row_scalar(row, target, m, scale, floor);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(views, 2, "exp_scaled", problem);
}

static void row_sums(const double *Z, const double *D, const double *w, double *out,
                     Py_ssize_t n, int upper, Py_ssize_t first, Py_ssize_t last)
{
    for (Py_ssize_t i = first; i < last; ++i) {
        const double *z = Z + i * n, *d = D + i * n;
        Py_ssize_t j = upper ? i + 1 : 0, stop = upper ? n : i;
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (; j + 4 <= stop; j += 4) {
            a0 += z[j] * d[j] * w[j];
            a1 += z[j + 1] * d[j + 1] * w[j + 1];
            a2 += z[j + 2] * d[j + 2] * w[j + 2];
            a3 += z[j + 3] * d[j + 3] * w[j + 3];
        }
        double s = (a0 + a1) + (a2 + a3);
        for (; j < stop; ++j)
            s += z[j] * d[j] * w[j];
        out[i] = s;
    }
}

static PyObject *weighted_row_sums(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    const char *what[4] = {"Z", "D", "w", "out"};
    Py_buffer views[4];
    int upper;
    Py_ssize_t first, last;
    if (!PyArg_ParseTuple(args, "OOOOpnn", &objects[0], &objects[1], &objects[2], &objects[3],
                          &upper, &first, &last))
        return NULL;
    int held = typed_buffers(objects, views, 4, "dddd", "weighted_row_sums", what);
    if (held < 4) {
        release_buffers(views, held);
        return NULL;
    }
    Py_buffer *Z = &views[0], *D = &views[1], *w = &views[2], *out = &views[3];
    Py_ssize_t n = w->len / (Py_ssize_t)sizeof(double);
    int contiguous = 1;
    for (int i = 0; i < 4; ++i)
        contiguous = contiguous && PyBuffer_IsContiguous(&views[i], 'C');
    const char *problem = NULL;
    if (!contiguous)
        problem = "Z, D, w and out must be C-contiguous";
    else if (out->len != w->len)
        problem = "w and out must be float64 buffers of n entries each";
    else if (Z->len != n * n * (Py_ssize_t)sizeof(double) || D->len != Z->len)
        problem = "Z and D must be float64 buffers of n x n entries each";
    else if (first < 0 || last > n || first > last)
        problem = "rows first:last must lie within 0:n";
    if (problem == NULL) {
        Py_BEGIN_ALLOW_THREADS
        row_sums((const double *)Z->buf, (const double *)D->buf, (const double *)w->buf,
                 (double *)out->buf, n, upper, first, last);
        Py_END_ALLOW_THREADS
    }
    return finish(views, 4, "weighted_row_sums", problem);
}

/* The sum of a four-lane float64 accumulator's lanes, in a fixed order. */
__attribute__((target("avx2,fma")))
static double lane_total(__m256d a)
{
    double v[4];
    _mm256_storeu_pd(v, a);
    return (v[0] + v[1]) + (v[2] + v[3]);
}

/* One panel of h rows and `width` columns (row stride `stride` floats): rows p + i, columns
 * p + c. y[p + i] += sum_c z_ic x[p + c], and for c >= h, y[p + c] += z_ic x[p + i], with
 * z = exp(max(scale d, floor)). */
__attribute__((target("avx2,fma")))
static void panel_avx2(const float *panel, Py_ssize_t h, Py_ssize_t width, Py_ssize_t stride,
                       Py_ssize_t p, float scale, float floor, const float *x, float *y)
{
    const __m256 s = _mm256_set1_ps(scale), f = _mm256_set1_ps(floor);
    const float *xs = x + p;
    float *ys = y + p;
    for (Py_ssize_t i = 0; i < h; ++i) {
        const float *d = panel + i * stride;
        const __m256 xi = _mm256_set1_ps(xs[i]);
        __m256d acc_low = _mm256_setzero_pd(), acc_high = _mm256_setzero_pd();
        Py_ssize_t c = 0;
        for (; c < width; c += 8) {
            __m256 z, xc;
            Py_ssize_t left = width - c;
            if (left >= 8) {
                z = _ZGVdN8v_expf(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(d + c), s), f));
                xc = _mm256_loadu_ps(xs + c);
            } else {  /* the tail, padded: x = 0 there, so it adds nothing */
                float dt[8] = {0}, xt[8] = {0};
                memcpy(dt, d + c, (size_t)left * sizeof(float));
                memcpy(xt, xs + c, (size_t)left * sizeof(float));
                z = _ZGVdN8v_expf(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(dt), s), f));
                xc = _mm256_loadu_ps(xt);
            }
            __m256 zx = _mm256_mul_ps(z, xc);
            acc_low = _mm256_add_pd(acc_low, _mm256_cvtps_pd(_mm256_castps256_ps128(zx)));
            acc_high = _mm256_add_pd(acc_high, _mm256_cvtps_pd(_mm256_extractf128_ps(zx, 1)));
            if (c + 8 <= h)
                continue;  /* the diagonal block: stored whole, no mirror */
            float *yc = ys + c;
            if (c >= h && left >= 8) {
                _mm256_storeu_ps(yc, _mm256_add_ps(_mm256_loadu_ps(yc), _mm256_mul_ps(z, xi)));
                continue;
            }
            float zv[8];  /* the block's edge, or the tail */
            _mm256_storeu_ps(zv, _mm256_mul_ps(z, xi));
            for (Py_ssize_t k = c < h ? h - c : 0; k < 8 && k < left; ++k)
                yc[k] += zv[k];
        }
        ys[i] += (float)lane_total(_mm256_add_pd(acc_low, acc_high));
    }
}

static void panel_scalar(const float *panel, Py_ssize_t h, Py_ssize_t width, Py_ssize_t stride,
                         Py_ssize_t p, float scale, float floor, const float *x, float *y)
{
    for (Py_ssize_t i = 0; i < h; ++i) {
        const float *d = panel + i * stride;
        double acc = 0.0;
        float xi = x[p + i];
        for (Py_ssize_t c = 0; c < width; ++c) {
            float e = scale * d[c];
            float z = expf(e < floor ? floor : e);
            acc += (double)(z * x[p + c]);
            if (c >= h)
                y[p + c] += z * xi;
        }
        y[p + i] += (float)acc;
    }
}

/* A panel's rows p:p+h and columns p:p+width, its row stride in entries. */
typedef struct {
    Py_ssize_t h, width, stride;
} PanelLayout;

/* The panel's layout, or the problem why it cannot be read: its rows must be contiguous and
 * lie within x's n entries (columns p:n, at most as many rows as columns). */
static const char *panel_layout(const Py_buffer *panel, Py_ssize_t p, Py_ssize_t n,
                                PanelLayout *layout)
{
    if (panel->ndim != 2)
        return "the panel must be two-dimensional";
    if (panel->shape[1] > 1 && panel->strides[1] != panel->itemsize)
        return "the panel's rows must be contiguous";
    if (p < 0 || panel->shape[0] > panel->shape[1] || p + panel->shape[1] != n)
        return "the panel (rows p:p+h, columns p:n, h <= n - p) must lie within x's n entries";
    layout->h = panel->shape[0];
    layout->width = panel->shape[1];
    layout->stride = layout->h > 1 ? panel->strides[0] / panel->itemsize : layout->width;
    return NULL;
}

static PyObject *panel_product32(PyObject *self, PyObject *args)
{
    PyObject *objects[3];
    const char *what[3] = {"the panel", "x", "y"};
    Py_buffer views[3];
    Py_ssize_t p;
    float scale, floor;
    if (!PyArg_ParseTuple(args, "OnffOO", &objects[0], &p, &scale, &floor, &objects[1],
                          &objects[2]))
        return NULL;
    int held = typed_buffers(objects, views, 3, "fff", "panel_product32", what);
    if (held < 3) {
        release_buffers(views, held);
        return NULL;
    }
    Py_buffer *panel = &views[0], *x = &views[1], *y = &views[2];
    Py_ssize_t n = x->ndim == 1 ? x->shape[0] : 0;
    const char *problem = NULL;
    if (x->ndim != 1 || y->ndim != 1 || y->shape[0] != n || !PyBuffer_IsContiguous(x, 'C')
            || !PyBuffer_IsContiguous(y, 'C'))
        problem = "x and y must be contiguous vectors of one length";
    PanelLayout L;
    if (problem == NULL)
        problem = panel_layout(panel, p, n, &L);
    if (problem == NULL) {
        Py_BEGIN_ALLOW_THREADS
        if (vectorised)
            panel_avx2((const float *)panel->buf, L.h, L.width, L.stride, p, scale, floor,
                       (const float *)x->buf, (float *)y->buf);
        else
            panel_scalar((const float *)panel->buf, L.h, L.width, L.stride, p, scale, floor,
                         (const float *)x->buf, (float *)y->buf);
        Py_END_ALLOW_THREADS
    }
    return finish(views, 3, "panel_product32", problem);
}

/* The float64 product over one panel: out[0] += Z x and out[1 + j] += (D ∘ Z) v_j for the k
 * rows v_j of V, each with its mirror beyond the diagonal block, the distances read as float32
 * and every product formed in float64 (x, V, out: float64, n entries a row). */
#define MAX_COLUMNS 2

__attribute__((target("avx2,fma")))
static void panel64_avx2(const float *panel, Py_ssize_t h, Py_ssize_t width, Py_ssize_t stride,
                         Py_ssize_t p, double scale, double floor, const double *x,
                         const double *V, Py_ssize_t k, double *out, Py_ssize_t n)
{
    const __m256d s = _mm256_set1_pd(scale), f = _mm256_set1_pd(floor);
    for (Py_ssize_t i = 0; i < h; ++i) {
        const float *d = panel + i * stride;
        __m256d acc[1 + MAX_COLUMNS], mirror[1 + MAX_COLUMNS];
        acc[0] = _mm256_setzero_pd();
        mirror[0] = _mm256_set1_pd(x[p + i]);
        for (Py_ssize_t j = 0; j < k; ++j) {
            acc[1 + j] = _mm256_setzero_pd();
            mirror[1 + j] = _mm256_set1_pd(V[j * n + p + i]);
        }
        for (Py_ssize_t c = 0; c < width; c += 4) {
            Py_ssize_t left = width - c, col = p + c;
            __m256d dc, z, vc[1 + MAX_COLUMNS];
            if (left >= 4) {
                dc = _mm256_cvtps_pd(_mm_loadu_ps(d + c));
                vc[0] = _mm256_loadu_pd(x + col);
                for (Py_ssize_t j = 0; j < k; ++j)
                    vc[1 + j] = _mm256_loadu_pd(V + j * n + col);
            } else {  /* the tail, padded: x = V = 0 there, so it adds nothing */
                float dt[4] = {0};
                double vt[4] = {0};
                memcpy(dt, d + c, (size_t)left * sizeof(float));
                dc = _mm256_cvtps_pd(_mm_loadu_ps(dt));
                memcpy(vt, x + col, (size_t)left * sizeof(double));
                vc[0] = _mm256_loadu_pd(vt);
                for (Py_ssize_t j = 0; j < k; ++j) {
                    memcpy(vt, V + j * n + col, (size_t)left * sizeof(double));
                    vc[1 + j] = _mm256_loadu_pd(vt);
                }
            }
            z = _ZGVdN4v_exp(_mm256_max_pd(_mm256_mul_pd(dc, s), f));
            __m256d dz = _mm256_mul_pd(dc, z);
            acc[0] = _mm256_add_pd(acc[0], _mm256_mul_pd(z, vc[0]));
            for (Py_ssize_t j = 0; j < k; ++j)
                acc[1 + j] = _mm256_add_pd(acc[1 + j], _mm256_mul_pd(dz, vc[1 + j]));
            if (c + 4 <= h)
                continue;  /* the diagonal block: stored whole, no mirror */
            Py_ssize_t from = c < h ? h - c : 0;
            for (Py_ssize_t j = 0; j <= k; ++j) {
                double *o = out + j * n + col;
                __m256d term = _mm256_mul_pd(j == 0 ? z : dz, mirror[j]);
                if (from == 0 && left >= 4) {
                    _mm256_storeu_pd(o, _mm256_add_pd(_mm256_loadu_pd(o), term));
                    continue;
                }
                double tv[4];  /* the block's edge, or the tail */
                _mm256_storeu_pd(tv, term);
                for (Py_ssize_t q = from; q < 4 && q < left; ++q)
                    o[q] += tv[q];
            }
        }
        for (Py_ssize_t j = 0; j <= k; ++j)
            out[j * n + p + i] += lane_total(acc[j]);
    }
}

static void panel64_scalar(const float *panel, Py_ssize_t h, Py_ssize_t width, Py_ssize_t stride,
                           Py_ssize_t p, double scale, double floor, const double *x,
                           const double *V, Py_ssize_t k, double *out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < h; ++i) {
        const float *d = panel + i * stride;
        double acc[1 + MAX_COLUMNS] = {0};
        for (Py_ssize_t c = 0; c < width; ++c) {
            Py_ssize_t col = p + c;
            double e = scale * (double)d[c];
            double z = exp(e < floor ? floor : e), dz = (double)d[c] * z;
            acc[0] += z * x[col];
            for (Py_ssize_t j = 0; j < k; ++j)
                acc[1 + j] += dz * V[j * n + col];
            if (c < h)
                continue;
            out[col] += z * x[p + i];
            for (Py_ssize_t j = 0; j < k; ++j)
                out[(1 + j) * n + col] += dz * V[j * n + p + i];
        }
        for (Py_ssize_t j = 0; j <= k; ++j)
            out[j * n + p + i] += acc[j];
    }
}

static PyObject *panel_product64(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    const char *what[4] = {"the panel", "x", "V", "out"};
    Py_buffer views[4];
    Py_ssize_t p;
    double scale, floor;
    if (!PyArg_ParseTuple(args, "OnddOOO", &objects[0], &p, &scale, &floor, &objects[1],
                          &objects[2], &objects[3]))
        return NULL;
    int held = typed_buffers(objects, views, 4, "fddd", "panel_product64", what);
    if (held < 4) {
        release_buffers(views, held);
        return NULL;
    }
    Py_buffer *panel = &views[0], *x = &views[1], *V = &views[2], *out = &views[3];
    Py_ssize_t n = x->ndim == 1 ? x->shape[0] : 0;
    Py_ssize_t k = V->ndim == 2 ? V->shape[0] : -1;
    const char *problem = NULL;
    if (x->ndim != 1 || V->ndim != 2 || V->shape[1] != n || k > MAX_COLUMNS
            || out->ndim != 2 || out->shape[0] != k + 1 || out->shape[1] != n
            || !PyBuffer_IsContiguous(x, 'C') || !PyBuffer_IsContiguous(V, 'C')
            || !PyBuffer_IsContiguous(out, 'C'))
        problem = "x (n), V (k <= 2 rows of n) and out (k + 1 rows of n) must be C-contiguous";
    PanelLayout L;
    if (problem == NULL)
        problem = panel_layout(panel, p, n, &L);
    if (problem == NULL) {
        Py_BEGIN_ALLOW_THREADS
        if (vectorised)
            panel64_avx2((const float *)panel->buf, L.h, L.width, L.stride, p, scale, floor,
                         (const double *)x->buf, (const double *)V->buf, k, (double *)out->buf,
                         n);
        else
            panel64_scalar((const float *)panel->buf, L.h, L.width, L.stride, p, scale, floor,
                           (const double *)x->buf, (const double *)V->buf, k,
                           (double *)out->buf, n);
        Py_END_ALLOW_THREADS
    }
    return finish(views, 4, "panel_product64", problem);
}

static PyMethodDef methods[] = {
    {"exp_inplace", exp_inplace, METH_O,
     "exp_inplace(a): a = exp(a) for a writable C-contiguous float64 buffer."},
    {"exp_scaled", exp_scaled, METH_VARARGS,
     "exp_scaled(D, scale, floor, out): out = exp(max(scale * D, floor)) for two float64\n"
     "arrays of one shape whose rows are contiguous."},
    {"weighted_row_sums", weighted_row_sums, METH_VARARGS,
     "weighted_row_sums(Z, D, w, out, upper, first, last): out[i] = sum over j > i (upper) or\n"
     "j < i of Z[i, j] D[i, j] w[j], for rows first:last; Z, D C-contiguous (n, n) float64."},
    {"panel_product64", panel_product64, METH_VARARGS,
     "panel_product64(panel, p, scale, floor, x, V, out): out[0] += Z x, out[1 + j] +=\n"
     "(D o Z) V[j] with Z = exp(max(scale * D, floor)), for a float32 panel D (contiguous\n"
     "rows) of the upper triangle (rows p:p+h, columns p:n) and its mirror; x (n), V (k <= 2,\n"
     "n), out (k + 1, n) contiguous float64."},
    {"panel_product32", panel_product32, METH_VARARGS,
     "panel_product32(panel, p, scale, floor, x, y): y += exp(max(scale * P, floor)) x for a\n"
     "float32 panel P of the upper triangle (rows p:p+h, columns p:p+width, its first h columns\n"
     "the diagonal block) and its mirror beyond that block; x, y float32."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "The magnitude engine's compiled kernels (exp through glibc's libmvec, the weighted "
    "distance form, the large-n path's panel products); see _kernels.c.", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    __builtin_cpu_init();
    const char *scalar = getenv("DIVERSITY_CORE_SCALAR_KERNELS");
    int forced = scalar != NULL && scalar[0] != '\0' && strcmp(scalar, "0") != 0;
    vectorised = !forced && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "VECTORISED", vectorised) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
