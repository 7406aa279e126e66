"""XLA's indexing, window, convolution and batch norm ops written out in
plain numpy loops, from the operation semantics (slow, obviously right;
for small arrays).

Window positions in the padding are skipped, as XLA computes reduce-window
and select-and-scatter; gather clamps start indices so the slice is in
bounds; scatter skips a whole window whose start puts any of it out of
bounds.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def gather(operand: np.ndarray, indices: np.ndarray, *, offset_dims,
           collapsed_slice_dims, start_index_map, index_vector_dim,
           slice_sizes, operand_batching_dims=(),
           start_indices_batching_dims=()) -> np.ndarray:
    idx_batch = [d for d in range(indices.ndim) if d != index_vector_dim]
    window_dims = [d for d in range(operand.ndim)
                   if d not in collapsed_slice_dims
                   and d not in operand_batching_dims]
    out_rank = len(idx_batch) + len(offset_dims)
    shape, b_i, w_i = [], 0, 0
    for i in range(out_rank):
        if i in offset_dims:
            shape.append(slice_sizes[window_dims[w_i]])
            w_i += 1
        else:
            shape.append(indices.shape[idx_batch[b_i]])
            b_i += 1
    batch_out = [i for i in range(out_rank) if i not in offset_dims]
    out = np.zeros(shape, operand.dtype)
    for out_idx in np.ndindex(*shape):
        b = [out_idx[i] for i in batch_out]
        start = [0] * operand.ndim
        for k, od in enumerate(start_index_map):
            where = list(b)
            if index_vector_dim < indices.ndim:
                where.insert(index_vector_dim, k)
            start[od] = int(indices[tuple(where)])
        for od, idd in zip(operand_batching_dims,
                           start_indices_batching_dims):
            start[od] = b[idx_batch.index(idd)]
        for d in range(operand.ndim):
            start[d] = min(max(start[d], 0), operand.shape[d] - slice_sizes[d])
        for k, d in enumerate(window_dims):
            start[d] += out_idx[offset_dims[k]]
        out[out_idx] = operand[tuple(start)]
    return out


def scatter(operands: Sequence[np.ndarray], indices: np.ndarray,
            updates: Sequence[np.ndarray], combine: Callable, *,
            update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim,
            input_batching_dims=(), scatter_indices_batching_dims=()
            ) -> list[np.ndarray]:
    """``combine(current_values, update_values)`` takes and returns lists
    (one value per operand)."""
    outs = [o.copy() for o in operands]
    operand = operands[0]
    upd = updates[0]
    idx_batch = [d for d in range(indices.ndim) if d != index_vector_dim]
    window_dims = [d for d in range(operand.ndim)
                   if d not in inserted_window_dims
                   and d not in input_batching_dims]
    extent = [1] * operand.ndim
    for k, d in enumerate(window_dims):
        extent[d] = upd.shape[update_window_dims[k]]
    scatter_dims = [i for i in range(upd.ndim) if i not in update_window_dims]
    for u_idx in np.ndindex(*upd.shape):
        b = [u_idx[i] for i in scatter_dims]
        start = [0] * operand.ndim
        for k, od in enumerate(scatter_dims_to_operand_dims):
            where = list(b)
            if index_vector_dim < indices.ndim:
                where.insert(index_vector_dim, k)
            start[od] = int(indices[tuple(where)])
        for od, idd in zip(input_batching_dims, scatter_indices_batching_dims):
            start[od] = b[idx_batch.index(idd)]
        if any(start[d] < 0 or start[d] > operand.shape[d] - extent[d]
               for d in range(operand.ndim)):
            continue
        for k, d in enumerate(window_dims):
            start[d] += u_idx[update_window_dims[k]]
        t = tuple(start)
        new = combine([o[t] for o in outs], [u[u_idx] for u in updates])
        for o, v in zip(outs, new):
            o[t] = v
    return outs


def _window_positions(shape, out_idx, size, stride, pad_low, base, dil):
    """Operand indices that output position ``out_idx``'s window covers."""
    for w in np.ndindex(*size):
        idx = []
        for d in range(len(shape)):
            p = out_idx[d] * stride[d] + w[d] * dil[d] - pad_low[d]
            if p < 0 or p % base[d] or p // base[d] >= shape[d]:
                break
            idx.append(p // base[d])
        else:
            yield tuple(idx)


def window_output_shape(shape, size, stride, padding, base, dil):
    out = []
    for d in range(len(shape)):
        dilated = (shape[d] - 1) * base[d] + 1 if shape[d] else 0
        padded = dilated + padding[d][0] + padding[d][1]
        extent = (size[d] - 1) * dil[d] + 1 if size[d] else 0
        out.append(0 if padded < extent
                   else (padded - extent) // stride[d] + 1)
    return out


def reduce_window(inputs: Sequence[np.ndarray], inits: Sequence, combine,
                  *, size, stride=None, padding=None, base=None, dil=None
                  ) -> list[np.ndarray]:
    rank = inputs[0].ndim
    stride = stride or [1] * rank
    padding = padding or [(0, 0)] * rank
    base = base or [1] * rank
    dil = dil or [1] * rank
    shape = window_output_shape(inputs[0].shape, size, stride, padding,
                                base, dil)
    outs = [np.zeros(shape, x.dtype) for x in inputs]
    for o in np.ndindex(*shape):
        acc = list(inits)
        for idx in _window_positions(inputs[0].shape, o, size, stride,
                                     [p[0] for p in padding], base, dil):
            acc = combine(acc, [x[idx] for x in inputs])
        for out, a in zip(outs, acc):
            out[o] = a
    return outs


def select_and_scatter(operand, source, init, select, scatter_fn, *, size,
                       stride, padding=None) -> np.ndarray:
    rank = operand.ndim
    padding = padding or [(0, 0)] * rank
    out = np.full(operand.shape, init, dtype=source.dtype)
    for o in np.ndindex(*source.shape):
        chosen = None
        for idx in _window_positions(operand.shape, o, size, stride,
                                     [p[0] for p in padding], [1] * rank,
                                     [1] * rank):
            if chosen is None or not select(operand[chosen], operand[idx]):
                chosen = idx
        if chosen is not None:
            out[chosen] = scatter_fn(out[chosen], source[o])
    return out


def convolution(lhs, rhs, dim_labels: str, *, stride=None, padding=None,
                lhs_dilation=None, rhs_dilation=None, reversal=None,
                feature_group_count=1, batch_group_count=1,
                out_dtype=None) -> np.ndarray:
    """``dim_labels`` like "b01f_01io->b01f"."""
    ins, rest = dim_labels.split("_")
    ker, outs = rest.split("->")
    spatial = len(ins) - 2

    def canon(x, labels, a, b):
        order = [labels.index(a)] + [labels.index(str(i))
                                     for i in range(spatial)]
        order.append(labels.index(b))
        return np.transpose(x, order)

    x = canon(lhs, ins, "b", "f").astype(np.float64)
    w = canon(rhs, ker, "i", "o").astype(np.float64)  # [i, 0.., o]
    w = np.moveaxis(w, 0, -2)                         # [0.., i, o]
    stride = stride or [1] * spatial
    padding = padding or [(0, 0)] * spatial
    lhs_dilation = lhs_dilation or [1] * spatial
    rhs_dilation = rhs_dilation or [1] * spatial
    reversal = reversal or [False] * spatial
    for s in range(spatial):
        if reversal[s]:
            w = np.flip(w, s)
    taps = w.shape[:spatial]
    out_sp = window_output_shape(x.shape[1:-1], taps, stride, padding,
                                 lhs_dilation, rhs_dilation)
    n_in = x.shape[0]
    c_out = w.shape[-1]
    groups = max(feature_group_count, batch_group_count)
    cin_g = w.shape[-2]
    cout_g = c_out // groups
    nb = n_in // batch_group_count
    res = np.zeros([nb, *out_sp, c_out])
    for b in range(nb):
        for o in np.ndindex(*out_sp):
            for oc in range(c_out):
                g = oc // cout_g
                fb = g if batch_group_count > 1 else 0
                ff = g if feature_group_count > 1 else 0
                total = 0.0
                for t in np.ndindex(*taps):
                    idx = []
                    for s in range(spatial):
                        p = o[s] * stride[s] + t[s] * rhs_dilation[s] \
                            - padding[s][0]
                        if (p < 0 or p % lhs_dilation[s]
                                or p // lhs_dilation[s] >= x.shape[1 + s]):
                            break
                        idx.append(p // lhs_dilation[s])
                    else:
                        features = slice(ff * cin_g, (ff + 1) * cin_g)
                        vec = x[(fb * nb + b, *idx)][features]
                        total += float(vec @ w[(*t, slice(None), oc)])
                res[(b, *o, oc)] = total
    order = [outs.index("b")] + [outs.index(str(i)) for i in range(spatial)]
    order.append(outs.index("f"))
    result = np.transpose(res, np.argsort(order))
    return result.astype(out_dtype or lhs.dtype)


def batch_norm_moments(x: np.ndarray, feature: int):
    """The per-feature mean and (biased) variance of a batch norm: over
    every dimension of ``x`` but ``feature``."""
    axes = tuple(d for d in range(x.ndim) if d != feature)
    return x.mean(axis=axes), x.var(axis=axes)


def along_feature(v: np.ndarray, x: np.ndarray, feature: int) -> np.ndarray:
    """Per-feature values ``v`` shaped to broadcast against ``x``."""
    shape = [1] * x.ndim
    shape[feature] = -1
    return v.reshape(shape)


def batch_norm(x, scale, offset, mean, var, eps, feature: int):
    """batch-norm-inference's result (training's, with the batch's own
    moments)."""
    return (along_feature(scale, x, feature)
            * (x - along_feature(mean, x, feature))
            / np.sqrt(along_feature(var, x, feature) + eps)
            + along_feature(offset, x, feature))


def batch_norm_grad(x, scale, mean, var, dy, eps, feature: int):
    """batch-norm-grad's (grad_operand, grad_scale, grad_offset): the
    textbook backward pass of training normalization."""
    axes = tuple(d for d in range(x.ndim) if d != feature)
    n = x.size // x.shape[feature]
    inv = 1 / np.sqrt(along_feature(var, x, feature) + eps)
    xhat = (x - along_feature(mean, x, feature)) * inv
    grad_offset = dy.sum(axis=axes)
    grad_scale = (dy * xhat).sum(axis=axes)
    grad_x = (along_feature(scale, x, feature) * inv / n
              * (n * dy - along_feature(grad_offset, x, feature)
                 - xhat * along_feature(grad_scale, x, feature)))
    return grad_x, grad_scale, grad_offset


def dot_general(lhs, rhs, lb=(), rb=(), lc=(), rc=()):
    """dot with XLA's dimension numbers: the result is [batch, lhs free,
    rhs free]."""
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub, rsub = [None] * lhs.ndim, [None] * rhs.ndim
    for dl, dr in zip(list(lb) + list(lc), list(rb) + list(rc)):
        lsub[dl] = rsub[dr] = next(letters)
    for d in lf:
        lsub[d] = next(letters)
    for d in rf:
        rsub[d] = next(letters)
    out = ([lsub[d] for d in lb] + [lsub[d] for d in lf]
           + [rsub[d] for d in rf])
    return np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}",
                     lhs, rhs)


def ragged_group_ids(lhs_shape, sizes, lb, lc, ragged: int) -> np.ndarray:
    """For every lhs element, the group its index along the ragged
    dimension falls in (g where it is past the last group), from
    group_sizes [g] or [prefix..., g] as ragged-dot reads it."""
    if ragged in lb:
        prefix = list(lb[:list(lb).index(ragged)])
    elif ragged in lc:
        prefix = list(lb) + list(lc[:list(lc).index(ragged)])
    else:
        prefix = list(lb) + [d for d in range(ragged)
                             if d not in lb and d not in lc]
    g = sizes.shape[-1]
    if sizes.ndim == 1:
        sizes = np.broadcast_to(
            sizes, tuple(lhs_shape[d] for d in prefix) + (g,))
    ends = np.cumsum(sizes.astype(np.int64), axis=-1)
    ids = np.empty(lhs_shape, np.int64)
    for idx in np.ndindex(*lhs_shape):
        # The group of index m is the number of groups ending at or
        # before it.
        own = ends[tuple(idx[d] for d in prefix)]
        ids[idx] = int(np.count_nonzero(own <= idx[ragged]))
    return ids


def ragged_dot(lhs, rhs, sizes, *, lb=(), rb=(), lc=(), rc=(), ragged: int,
               group=None):
    """ragged-dot: each lhs element takes part only with its own group
    (a ragged free dimension: its group's rhs along `group`; a ragged
    contracting one: one result per group; a ragged batch one: batches past
    the last group are zeros)."""
    g = sizes.shape[-1]
    ids = ragged_group_ids(lhs.shape, sizes, lb, lc, ragged)
    zero = np.zeros_like(lhs)
    if ragged in lc:
        return np.stack([dot_general(np.where(ids == j, lhs, zero), rhs,
                                     lb, rb, lc, rc) for j in range(g)])
    if ragged in lb:
        return dot_general(np.where(ids < g, lhs, zero), rhs, lb, rb, lc, rc)
    rb1 = [d - (d > group) for d in rb]
    rc1 = [d - (d > group) for d in rc]
    out = dot_general(zero, np.take(rhs, 0, axis=group), lb, rb1, lc, rc1)
    for j in range(g):
        out = out + dot_general(np.where(ids == j, lhs, zero),
                                np.take(rhs, j, axis=group), lb, rb1, lc,
                                rc1)
    return out
