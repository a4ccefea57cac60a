/* The magnitude engine's compiled kernels: the exponentials of exp(-tD), and the weighted
 * distance form dMag/dt, each in one pass over its matrices.
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
 * exp, which is what NumPy computes there, and ``VECTORISED`` is False.
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#pragma GCC optimize("fp-contract=off")

__attribute__((target("avx2,fma"))) extern __m256d _ZGVdN4v_exp(__m256d);

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

static int float64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: expected a buffer of float64", name);
        return -1;
    }
    return 0;
}

static PyObject *exp_inplace(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (view.itemsize != 8 || view.format == NULL || strcmp(view.format, "d") != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "exp_inplace: expected a buffer of float64");
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
    PyObject *d_obj, *out_obj;
    double scale, floor;
    Py_buffer d, out;
    if (!PyArg_ParseTuple(args, "OddO", &d_obj, &scale, &floor, &out_obj))
        return NULL;
    if (float64_buffer(d_obj, &d, 0, "exp_scaled") < 0)
        return NULL;
    if (float64_buffer(out_obj, &out, 1, "exp_scaled") < 0) {
        PyBuffer_Release(&d);
        return NULL;
    }
    const char *problem = NULL;
    if (d.ndim != 2 || out.ndim != 2 || d.shape[0] != out.shape[0] || d.shape[1] != out.shape[1])
        problem = "exp_scaled: D and out must be two-dimensional, of one shape";
    else if ((d.shape[1] > 1 && d.strides[1] != 8) || (out.shape[1] > 1 && out.strides[1] != 8))
        problem = "exp_scaled: the rows of D and out must be contiguous";
    if (problem == NULL) {
        Py_ssize_t rows = d.shape[0], m = d.shape[1];
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; ++r) {
            const double *row = (const double *)((const char *)d.buf + r * d.strides[0]);
            double *target = (double *)((char *)out.buf + r * out.strides[0]);
            if (vectorised)
                exp_scaled_row_avx2(row, target, m, scale, floor);
            else
                exp_scaled_row_scalar(row, target, m, scale, floor);
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&d);
    PyBuffer_Release(&out);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
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
    Py_buffer Z, D, w, out;
    int upper;
    Py_ssize_t first, last;
    if (!PyArg_ParseTuple(args, "y*y*y*w*pnn", &Z, &D, &w, &out, &upper, &first, &last))
        return NULL;
    Py_ssize_t n = w.len / (Py_ssize_t)sizeof(double);
    const char *problem = NULL;
    if (w.len != n * (Py_ssize_t)sizeof(double) || out.len != w.len)
        problem = "weighted_row_sums: w and out must be float64 buffers of n entries each";
    else if (Z.len != n * n * (Py_ssize_t)sizeof(double) || D.len != Z.len)
        problem = "weighted_row_sums: Z and D must be float64 buffers of n x n entries each";
    else if (first < 0 || last > n || first > last)
        problem = "weighted_row_sums: rows first:last must lie within 0:n";
    if (problem == NULL) {
        Py_BEGIN_ALLOW_THREADS
        row_sums((const double *)Z.buf, (const double *)D.buf, (const double *)w.buf,
                 (double *)out.buf, n, upper, first, last);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&Z);
    PyBuffer_Release(&D);
    PyBuffer_Release(&w);
    PyBuffer_Release(&out);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "The magnitude engine's compiled kernels (exp through glibc's libmvec, the weighted "
    "distance form); see _kernels.c.", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    __builtin_cpu_init();
    vectorised = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "VECTORISED", vectorised) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
