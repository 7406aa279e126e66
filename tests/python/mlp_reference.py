"""The MLP training step of tests/data/mlp_train_step.hlo, written in numpy.

Two dense layers with relu, softmax cross-entropy against one-hot labels,
backpropagation written out, and SGD. The tests check pjrtd's results
against it in float64; the MLP benchmark times it in float32.
"""

from __future__ import annotations

import numpy as np

BATCH, IN, HIDDEN, OUT = 64, 784, 128, 10
LEARNING_RATE = 0.01


def train_step(w1, b1, w2, b2, x, labels):
    """One step in the parameters' dtype: ([new w1, b1, w2, b2], loss, and
    the hidden pre-activations, to check that none sits on relu's kink)."""
    dtype = w1.dtype.type
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0)
    logits = h @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    logp = shifted - np.log(s)
    onehot = (labels[:, None] == np.arange(OUT)[None, :]).astype(w1.dtype)
    loss = -np.mean(np.sum(onehot * logp, axis=1))
    # Backpropagation.
    dlogp = -onehot / BATCH
    dlogits = dlogp - (e / s) * dlogp.sum(axis=1, keepdims=True)
    db2 = dlogits.sum(axis=0)
    dw2 = h.T @ dlogits
    dh = dlogits @ w2.T
    dz1 = np.where(z1 > 0, dh, dtype(0))
    db1 = dz1.sum(axis=0)
    dw1 = x.T @ dz1
    lr = dtype(LEARNING_RATE)
    new = [w1 - lr * dw1, b1 - lr * db1, w2 - lr * dw2, b2 - lr * db2]
    return new, loss, z1
