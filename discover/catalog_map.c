/*  discover/catalog_map.c: range -> catalog operator (catalog_map.h). */
#include "catalog_map.h"

#include <stdio.h>
#include <string.h>

const char akd_map_table_text[] =
    "  softmax          aten::softmax, aten::_softmax, aten::special_softmax: rows x cols (last dim)\n"
    "  rmsnorm          aten::rms_norm, aten::_fused_rms_norm, module::*RMSNorm: M x N (last dim)\n"
    "  layernorm        aten::layer_norm, aten::native_layer_norm, module::LayerNorm: batch x dim\n"
    "  matmul           aten::mm, aten::addmm, aten::linear, aten::matmul, aten::bmm (batch 1),\n"
    "                   module::Linear: M x N x K\n"
    "  flash_attention  aten::scaled_dot_product_attention, aten::_scaled_dot_product_flash_attention,\n"
    "                   ..._efficient_attention, ..._cudnn_attention, torch_nvtx::sdpa: B x H x S x D\n"
    "                   (query and key of one length), mask 2 when causal\n"
    "  cross_entropy    aten::cross_entropy_loss (its log_softmax + nll_loss inside): batch x vocab\n"
    "  rotary_embedding names holding \"rotary\" with a [B, H, S, D] first argument\n"
    "  split_kv_attention the attention ops above with query [B, HQ, Q, D] and key [B, HK, L, D]\n"
    "                   of another length or fewer heads (decode over a KV cache, grouped-query):\n"
    "                   B x Q x HQ x HK x L x D x mask, mask 2 when causal with Q = L\n"
    "  gated_residual   aten::addcmul (value 1 assumed) with a gate of x's shape (G 2) or [B, 1, N]\n"
    "                   over x [B, T, N] (G 1): B x T x N x G\n"
    "  ada_rms_norm     module::*AdaRMSNorm, module::*RMSNorm called with a conditioning tensor\n"
    "                   [B, C] after x [B, T, N]: B x T x N (the module's modulation Linear counts too)\n"
    "  gated_gelu       _C::gelu_tanh_and_mul, _C::silu_and_mul (vLLM: out, x [.., 2N]),\n"
    "                   module::SiluAndMul (x [.., 2N]): M x N x act (1 gelu_tanh, 2 silu)\n";

static bool s_is (const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcmp (name, *list) == 0)
            return true;
    return false;
}

static bool s_ends (const char *s, const char *suffix)
{
    size_t n = strlen (s), m = strlen (suffix);
    return n >= m && strcmp (s + n - m, suffix) == 0;
}

/* The i-th tensor argument, or NULL. */
static const akd_shape_t *s_tensor (const akd_payload_t *p, int i)
{
    for (int a = 0; a < p->nsizes; a++)
        if (p->sizes[a].tensor && i-- == 0)
            return &p->sizes[a];
    return NULL;
}

static int64_t s_rows (const akd_shape_t *s)
{
    int64_t r = 1;
    for (int d = 0; d + 1 < s->ndims; d++)
        r *= s->dims[d];
    return r;
}

static int s_set (akd_map_t *m, const char *op, int n, const char *const keys[], const int64_t values[])
{
    m->op = op;
    m->nkeys = n;
    for (int i = 0; i < n; i++) {
        m->keys[i] = keys[i];
        m->values[i] = values[i];
        if (values[i] <= 0 || values[i] > ((int64_t) 1 << 31)) {
            snprintf (m->why, sizeof m->why, "%s = %lld: not a size the catalog takes",
                      keys[i], (long long) values[i]);
            return -1;
        }
    }
    return 1;
}

static int s_no (akd_map_t *m, const char *op, const char *why)
{
    m->op = op;
    snprintf (m->why, sizeof m->why, "%s", why);
    return -1;
}

/* Row-wise ops: rows = product of all dims but the last. */
static int s_rowwise (const akd_payload_t *p, akd_map_t *m, const char *op, const char *k0, const char *k1)
{
    const akd_shape_t *x = s_tensor (p, 0);
    if (!x)
        return s_no (m, op, p->has_sizes ? "no tensor argument in the recorded sizes"
                                         : "the range carries no sizes (record_shapes off?)");
    const char *keys[] = { k0, k1 };
    int64_t v[] = { s_rows (x), x->dims[x->ndims - 1] };
    return s_set (m, op, 2, keys, v);
}

static int s_matmul (const akd_payload_t *p, akd_map_t *m)
{
    static const char *const keys[] = { "M", "N", "K" };
    const char *n = p->name;
    const akd_shape_t *a = s_tensor (p, 0), *b = s_tensor (p, 1), *c = s_tensor (p, 2);
    if (!a || !b)
        return s_no (m, "matmul", p->has_sizes ? "fewer than two tensor arguments"
                                               : "the range carries no sizes (record_shapes off?)");
    if (strcmp (n, "aten::addmm") == 0) {
        /* addmm (bias, a, b) */
        if (!c)
            return s_no (m, "matmul", "addmm without its two matrices");
        a = b;
        b = c;
    }
    if (strcmp (n, "aten::linear") == 0 || strcmp (n, "module::Linear") == 0) {
        /* x [..., K], weight [N, K] */
        if (b->ndims != 2 || b->dims[1] != a->dims[a->ndims - 1])
            return s_no (m, "matmul", "linear: weight is not [N, K]");
        int64_t v[] = { s_rows (a), b->dims[0], b->dims[1] };
        return s_set (m, "matmul", 3, keys, v);
    }
    if (a->ndims == 3 && b->ndims == 3) {
        if (a->dims[0] != 1 || b->dims[0] != 1)
            return s_no (m, "matmul", "batched GEMM (batch > 1): the catalog's matmul has no batch key");
        int64_t v[] = { a->dims[1], b->dims[2], a->dims[2] };
        if (b->dims[1] != a->dims[2])
            return s_no (m, "matmul", "inner dimensions differ");
        return s_set (m, "matmul", 3, keys, v);
    }
    if (b->ndims != 2 || a->ndims < 2)
        return s_no (m, "matmul", "operands are not [.., M, K] x [K, N]");
    if (b->dims[0] != a->dims[a->ndims - 1])
        return s_no (m, "matmul", "inner dimensions differ");
    int64_t v[] = { s_rows (a), b->dims[1], b->dims[0] };
    return s_set (m, "matmul", 3, keys, v);
}

/*  Query and key of one length and head count: flash_attention.  Another
    length (decode: a few new tokens over a KV cache) or fewer key heads
    (grouped-query, enable_gqa): split_kv_attention, whose q / k / v are
    SDPA's [B, H, S, D] layouts. */
static int s_attention (const akd_payload_t *p, akd_map_t *m)
{
    static const char *const keys[] = { "B", "H", "S", "D", "mask" };
    static const char *const kv_keys[] = { "B", "Q", "HQ", "HK", "L", "D", "mask" };
    const akd_shape_t *q = s_tensor (p, 0), *k = s_tensor (p, 1);
    if (!q || !k)
        return s_no (m, "flash_attention", p->has_sizes ? "no query and key in the recorded sizes"
                                                         : "the range carries no sizes (record_shapes off?)");
    if (q->ndims != 4 || k->ndims != 4)
        return s_no (m, "flash_attention", "query or key is not [B, H, S, D]");
    /* The is_causal flag comes from torch_nvtx.py's sdpa range; an explicit
       mask tensor (a third... fourth argument) is not expressible */
    int64_t causal = akd_payload_int (p, "is_causal", 0);
    bool decode = q->dims[2] != k->dims[2] || q->dims[1] != k->dims[1];
    const char *op = decode ? "split_kv_attention" : "flash_attention";
    if (q->dims[3] != k->dims[3] || q->dims[0] != k->dims[0])
        return s_no (m, op, "query and key batch or head widths differ");
    if (akd_payload_int (p, "has_mask", 0) != 0)
        return s_no (m, op, decode ? "an explicit attention mask: the catalog's decode attention has none, "
                                     "causal or its own ragged lengths"
                                   : "an explicit attention mask: the catalog has none or causal");
    if (!decode) {
        int64_t v[] = { q->dims[0], q->dims[1], q->dims[2], q->dims[3], causal ? 2 : 1 };
        return s_set (m, "flash_attention", 5, keys, v);
    }
    if (k->dims[1] <= 0 || k->dims[1] > q->dims[1] || q->dims[1] % k->dims[1] != 0)
        return s_no (m, op, "query heads are not a multiple of key heads");
    if (causal && q->dims[2] != k->dims[2])
        return s_no (m, op, "is_causal with query and key lengths differing: torch aligns that mask "
                            "top-left (query 0 sees key 0), not the decode mask");
    int64_t v[] = { q->dims[0], q->dims[2], q->dims[1], k->dims[1], k->dims[2], q->dims[3], causal ? 2 : 1 };
    return s_set (m, op, 7, kv_keys, v);
}

/* Same rank and dims. */
static bool s_same (const akd_shape_t *a, const akd_shape_t *b)
{
    if (a->ndims != b->ndims)
        return false;
    for (int d = 0; d < a->ndims; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

/*  aten::addcmul (x, t1, t2) = x + value t1 t2: a gated residual when one
    factor has x's shape (h) and the other (the gate) too (G 2) or is
    [B, 1, N] over x [B, T, N] (G 1).  value is not in the record; the
    gated residuals of adaLN-Zero and pi0.5 use 1. */
static int s_gated_residual (const akd_payload_t *p, akd_map_t *m)
{
    static const char *const keys[] = { "B", "T", "N", "G" };
    const akd_shape_t *x = s_tensor (p, 0), *t1 = s_tensor (p, 1), *t2 = s_tensor (p, 2);
    if (!x || !t1 || !t2)
        return s_no (m, "gated_residual", p->has_sizes ? "fewer than three tensor arguments"
                                                       : "the range carries no sizes (record_shapes off?)");
    const akd_shape_t *gate = s_same (t1, x) ? t2 : t1, *h = gate == t1 ? t2 : t1;
    if (!s_same (h, x) || x->ndims < 2)
        return s_no (m, "gated_residual", "neither factor has the residual's shape [.., N]");
    const int64_t N = x->dims[x->ndims - 1];
    if (s_same (gate, x)) {
        int64_t v[] = { 1, s_rows (x), N, 2 };
        return s_set (m, "gated_residual", 4, keys, v);
    }
    if (x->ndims == 3 && gate->ndims == 3 && gate->dims[0] == x->dims[0] && gate->dims[1] == 1
        && gate->dims[2] == N) {
        int64_t v[] = { x->dims[0], x->dims[1], N, 1 };
        return s_set (m, "gated_residual", 4, keys, v);
    }
    return s_no (m, "gated_residual", "the gate is neither x's shape nor [B, 1, N] over x [B, T, N]");
}

/*  An RMSNorm module given a conditioning tensor [B, C] after x [B, T, N]
    (or x [B, N]: T 1) is adaptive: scale and shift come from the
    condition, one vector per batch row. */
static int s_ada_rms_norm (const akd_payload_t *p, akd_map_t *m)
{
    static const char *const keys[] = { "B", "T", "N" };
    const akd_shape_t *x = s_tensor (p, 0), *c = s_tensor (p, 1);
    if (!x || !c)
        return s_no (m, "ada_rms_norm", p->has_sizes ? "no input and condition in the recorded sizes"
                                                     : "the range carries no sizes (record_shapes off?)");
    if (x->ndims < 2 || x->ndims > 3 || c->ndims != 2 || c->dims[0] != x->dims[0])
        return s_no (m, "ada_rms_norm", "input is not [B, T, N] or [B, N] with a condition [B, C]");
    int64_t v[] = { x->dims[0], x->ndims == 3 ? x->dims[1] : 1, x->dims[x->ndims - 1] };
    return s_set (m, "ada_rms_norm", 3, keys, v);
}

/*  act(x[.., :N]) * x[.., N:] over x [.., 2N]: the vLLM ops take (out, x),
    its SiluAndMul module (x). */
static int s_gated_gelu (const akd_payload_t *p, akd_map_t *m, int arg, int64_t act)
{
    static const char *const keys[] = { "M", "N", "act" };
    const akd_shape_t *x = s_tensor (p, arg);
    if (!x)
        return s_no (m, "gated_gelu", p->has_sizes ? "no packed input in the recorded sizes"
                                                   : "the range carries no sizes (record_shapes off?)");
    if (x->ndims < 1 || x->dims[x->ndims - 1] % 2 != 0)
        return s_no (m, "gated_gelu", "the packed input's last dimension is not 2N");
    int64_t v[] = { s_rows (x), x->dims[x->ndims - 1] / 2, act };
    return s_set (m, "gated_gelu", 3, keys, v);
}

const char *akd_map_dtype (const akd_payload_t *p)
{
    for (int i = 0; i < p->ndtypes; i++) {
        const char *d = akd_dtype_catalog (p->dtypes[i]);
        if (d)
            return d;
    }
    return NULL;
}

int akd_map_payload (const akd_payload_t *p, akd_map_t *m)
{
    memset (m, 0, sizeof *m);
    m->dtype = akd_map_dtype (p);
    const char *n = p->name;
    static const char *const softmax[] = { "aten::softmax", "aten::_softmax", "aten::special_softmax", NULL };
    static const char *const rms[] = { "aten::rms_norm", "aten::_fused_rms_norm", NULL };
    static const char *const ln[] = { "aten::layer_norm", "aten::native_layer_norm", "module::LayerNorm", NULL };
    static const char *const mm[] = { "aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::bmm",
                                      "module::Linear", NULL };
    static const char *const sdpa[] = { "aten::scaled_dot_product_attention",
                                        "aten::_scaled_dot_product_flash_attention",
                                        "aten::_scaled_dot_product_efficient_attention",
                                        "aten::_scaled_dot_product_cudnn_attention",
                                        "aten::_scaled_dot_product_flash_attention_for_cpu",
                                        "torch_nvtx::sdpa", NULL };
    static const char *const ce[] = { "aten::cross_entropy_loss", "aten::cross_entropy", NULL };
    if (s_is (n, softmax))
        return s_rowwise (p, m, "softmax", "rows", "cols");
    bool module = strncmp (n, "module::", 8) == 0;
    if (module && (s_ends (n, "AdaRMSNorm") || s_ends (n, "AdaptiveRMSNorm")
                   || (s_ends (n, "RMSNorm") && s_tensor (p, 1))))
        return s_ada_rms_norm (p, m);
    if (strcmp (n, "aten::addcmul") == 0)
        return s_gated_residual (p, m);
    if (strcmp (n, "_C::silu_and_mul") == 0 || strcmp (n, "_C::gelu_tanh_and_mul") == 0)
        return s_gated_gelu (p, m, 1, strstr (n, "silu") ? 2 : 1);
    if (strcmp (n, "module::SiluAndMul") == 0)
        return s_gated_gelu (p, m, 0, 2);
    if (strcmp (n, "_C::gelu_and_mul") == 0 || strcmp (n, "module::GeluAndMul") == 0)
        return s_no (m, "gated_gelu", "GELU without the tanh approximation (or not said): the catalog's "
                                      "gated_gelu is gelu_tanh");
    if (s_is (n, rms) || (module && s_ends (n, "RMSNorm")))
        return s_rowwise (p, m, "rmsnorm", "M", "N");
    if (s_is (n, ln))
        return s_rowwise (p, m, "layernorm", "batch", "dim");
    if (s_is (n, mm))
        return s_matmul (p, m);
    if (s_is (n, sdpa))
        return s_attention (p, m);
    if (s_is (n, ce)) {
        const akd_shape_t *x = s_tensor (p, 0);
        if (!x || x->ndims != 2)
            return s_no (m, "cross_entropy", "logits are not [batch, vocab]");
        static const char *const keys[] = { "batch", "vocab" };
        int64_t v[] = { x->dims[0], x->dims[1] };
        return s_set (m, "cross_entropy", 2, keys, v);
    }
    if (strstr (n, "rotary") || strstr (n, "Rotary")) {
        if (strncmp (n, "module::", 8) == 0)
            return 0;                 /* the module computes cos/sin tables, not the rotation */
        const akd_shape_t *x = s_tensor (p, 0);
        if (!x || x->ndims != 4)
            return s_no (m, "rotary_embedding", "first argument is not [B, H, S, D]");
        static const char *const keys[] = { "B", "H", "S", "D" };
        int64_t v[] = { x->dims[0], x->dims[1], x->dims[2], x->dims[3] };
        return s_set (m, "rotary_embedding", 4, keys, v);
    }
    return 0;
}
