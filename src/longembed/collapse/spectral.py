"""sigma_a: the largest singular value of the high-frequency part of an attention matrix.

The length-collapse paper (Theorem 2, eq. (16)) bounds how much of the high-frequency
(non-DC) signal one self-attention layer keeps by

    sigma_a = || (I - 11^T / n) A ||_2,

the spectral norm of the row-stochastic attention matrix ``A`` after removing, from every
column, its mean over the rows (``(I - 11^T/n) A = A - mean_over_rows(A)``).  With this
definition a uniform matrix (all rows identical) has sigma_a = 0 (everything is DC) and the
identity has sigma_a = 1 (``I - 11^T/n`` is an orthogonal projection), for any n >= 2.

Two ways to compute it:

* :func:`sigma_a_dense` takes the materialized ``(..., n, n)`` matrix and returns the exact
  value (a full SVD); for tests and short inputs.
* :func:`sigma_a_blockwise` never holds more than ``H x block x n`` attention probabilities:
  it asks a callback for rows ``start..stop`` of every head's attention matrix (the encoder
  recomputes them from q and k) and runs a Krylov method on ``M^T M`` (``M = (I - 11^T/n) A``)
  using only the products ``M x = A x - mean(A x)`` and ``M^T y = A^T (y - mean(y))``.  Each
  product is one pass over the row blocks.  The default is Lanczos with full
  reorthogonalization (it converges much faster than plain power iteration for the same
  number of passes, and its estimate is never worse, because the power iterate lies in the
  Krylov subspace); plain power iteration is available as ``method="power"``.  Both
  estimates are lower bounds of the true value that increase towards it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from longembed.errors import UserError

__all__ = ["SIGMA_A_METHOD", "sigma_a_blockwise", "sigma_a_dense"]

SIGMA_A_METHOD = (
    "sigma_a = ||(I - 11^T/n) A||_2 (largest singular value of the column-centred softmax "
    "attention matrix, paper eq. (16)), per head; computed without materializing A by Lanczos "
    "with full reorthogonalization on M^T M (M = (I - 11^T/n) A), using only M x = Ax - mean(Ax) "
    "and M^T y = A^T (y - mean(y)) accumulated over row blocks of A recomputed from q and k "
    "(memory O(heads * block * n)); stopped when the Ritz residual bound is below tol "
    "(longembed.collapse.spectral.sigma_a_blockwise)"
)
"""One-line description of the blockwise estimator, for result files."""

# Below this, a Lanczos residual means the Krylov space is invariant (exact answer reached).
# M^T M has eigenvalues sigma^2 with sigma_a of order 0.01..1 for real attention, so this is far
# below any value that matters.
_BREAKDOWN = 1e-12


def sigma_a_dense(attn: Tensor) -> Tensor:
    """Exact sigma_a of materialized attention matrices.

    Args:
        attn: ``(..., n, n)`` row-stochastic matrices (softmax probabilities, rows = queries).

    Returns:
        ``(...)`` tensor: the largest singular value of ``(I - 11^T/n) A`` for every matrix, in
        ``attn``'s dtype (float32 for half-precision inputs, which are computed in float32).
    """
    if attn.ndim < 2 or attn.shape[-1] != attn.shape[-2]:
        raise UserError(f"expected (..., n, n) attention matrices, got shape {tuple(attn.shape)}")
    work = attn if attn.dtype in (torch.float32, torch.float64) else attn.float()
    centred = work - work.mean(dim=-2, keepdim=True)  # (I - 11^T/n) A
    flat = centred.reshape(-1, *centred.shape[-2:])
    # one SVD per matrix: torch's batched CPU SVD is ~30x slower than a loop here (torch 2.x)
    norms = [torch.linalg.svdvals(m)[0] for m in flat]
    out = torch.stack(norms) if norms else flat.new_zeros(0)
    return out.reshape(centred.shape[:-2])


class _BlockOperator:
    """``x -> M^T M x`` for batched ``x`` of shape (H, n), from row blocks of A.

    Each product makes two passes over the row blocks (one for ``A x``, one for
    ``A^T y``).  Products are taken in the blocks' dtype (float32 normally) and accumulated in
    float64.  Blocks are kept between passes only if the whole matrix fits in ``cache_bytes``
    (default 0: every pass asks ``attention_rows`` again); the first block, fetched to learn the
    number of heads, is reused once.
    """

    def __init__(self, attention_rows: Callable[[int, int], Tensor], n: int, block: int, cache_bytes: int):
        self.attention_rows = attention_rows
        self.n = n
        self.block = block
        self.calls = 0
        self.passes = 0
        first = self._fetch(0, min(n, block))
        self.n_heads = first.shape[0]
        full_bytes = self.n_heads * n * n * first.element_size()
        self.cache: dict[int, Tensor] | None = {} if full_bytes <= cache_bytes else None
        self._pending: Tensor | None = first
        if self.cache is not None:
            self.cache[0] = first
            self._pending = None

    def _fetch(self, start: int, stop: int) -> Tensor:
        a = self.attention_rows(start, stop)
        self.calls += 1
        if a.ndim != 3 or a.shape[1] != stop - start or a.shape[2] != self.n:
            raise UserError(
                f"attention_rows({start}, {stop}) must return (H, {stop - start}, {self.n}), "
                f"got {tuple(a.shape)}"
            )
        return a if a.dtype in (torch.float32, torch.float64) else a.float()

    def rows(self, start: int) -> Tensor:
        if start == 0 and self._pending is not None:
            a, self._pending = self._pending, None
            return a
        if self.cache is not None:
            if start not in self.cache:
                self.cache[start] = self._fetch(start, min(self.n, start + self.block))
            return self.cache[start]
        return self._fetch(start, min(self.n, start + self.block))

    def __call__(self, x: Tensor) -> Tensor:
        n, block = self.n, self.block
        # pass 1: y = M x = A x - mean(A x)
        parts = []
        for start in range(0, n, block):
            a = self.rows(start)
            parts.append(torch.bmm(a, x.to(a.dtype).unsqueeze(-1)).squeeze(-1).double())
        ax = torch.cat(parts, dim=-1)
        y = ax - ax.mean(dim=-1, keepdim=True)
        # pass 2: z = M^T y = A^T (y - mean(y)); y is already centred, centre again for rounding
        y = y - y.mean(dim=-1, keepdim=True)
        z = torch.zeros_like(x, dtype=torch.float64)
        for start in range(0, n, block):
            a = self.rows(start)
            z += torch.bmm(y[:, start : start + a.shape[1]].to(a.dtype).unsqueeze(1), a).squeeze(1).double()
        self.passes += 2
        return z


def sigma_a_blockwise(
    attention_rows: Callable[[int, int], Tensor],
    n: int,
    *,
    iters: int = 30,
    tol: float = 1e-4,
    block: int = 256,
    generator: torch.Generator | None = None,
    method: Literal["lanczos", "power"] = "lanczos",
    return_info: bool = False,
    cache_bytes: int = 0,
) -> Tensor | tuple[Tensor, dict]:
    """sigma_a of every head's attention matrix without materializing it.

    Why: at 4k-32k tokens an ``n x n`` matrix per head does not fit (or is wasteful), but the
    encoder can recompute any block of softmax rows from q and k.  This function needs only
    ``O(H * block * n)`` memory for the rows plus ``O(H * iters * n)`` for the Krylov basis.

    Args:
        attention_rows: ``attention_rows(start, stop)`` returns the softmax probabilities of
            query rows ``start..stop`` for all heads, shape ``(H, stop - start, n)``.  It is called
            about ``2 * steps * ceil(n / block)`` times (two passes per step).
        n: sequence length (number of rows and columns).
        iters: maximum number of steps (each step = one ``M^T M`` product = two passes).
        tol: stop when, for every head, the estimated relative error of sigma_a is below this
            (Lanczos: Ritz residual bound; power: relative change between steps).
        block: rows per call of ``attention_rows``.
        generator: random generator for the start vector (default: a fixed seed, so results
            are reproducible).
        method: ``"lanczos"`` (default; Lanczos with full reorthogonalization on ``M^T M``)
            or ``"power"`` (plain power iteration with the Rayleigh quotient).
        return_info: also return ``{"steps", "passes", "calls", "converged"}``.
        cache_bytes: if the whole ``(H, n, n)`` matrix takes at most this many bytes, keep the
            blocks after their first computation instead of asking for them on every pass
            (a speed/memory trade-off for short inputs; default 0 = never).

    Returns:
        ``(H,)`` float64 tensor of sigma_a per head (and the info dict if asked).
    """
    if n < 1:
        raise UserError("n must be >= 1")
    if iters < 1:
        raise UserError("iters must be >= 1")
    if method not in ("lanczos", "power"):
        raise UserError(f"unknown method {method!r}: use 'lanczos' or 'power'")
    op = _BlockOperator(attention_rows, n, block, cache_bytes)
    if n == 1:  # a 1x1 matrix minus its mean is 0
        out = torch.zeros(op.n_heads, dtype=torch.float64)
        info = {"steps": 0, "passes": 0, "calls": op.calls, "converged": True}
        return (out, info) if return_info else out

    if generator is None:
        generator = torch.Generator().manual_seed(0)
    q = torch.randn(op.n_heads, n, generator=generator, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)

    if method == "power":
        sigma2, converged, steps = _power(op, q, iters, tol)
    else:
        sigma2, converged, steps = _lanczos(op, q, iters, tol)
    sigma = sigma2.clamp_min(0.0).sqrt()
    if return_info:
        return sigma, {"steps": steps, "passes": op.passes, "calls": op.calls, "converged": bool(converged)}
    return sigma


def _power(mtm: Callable[[Tensor], Tensor], q: Tensor, iters: int, tol: float) -> tuple[Tensor, bool, int]:
    """Power iteration on M^T M; returns (largest eigenvalue estimate, converged, steps)."""
    prev = None
    lam = torch.zeros(q.shape[0], dtype=torch.float64)
    for step in range(1, iters + 1):
        w = mtm(q)
        lam = (w * q).sum(dim=-1)  # Rayleigh quotient, q has unit norm
        norm = w.norm(dim=-1, keepdim=True)
        dead = norm.squeeze(-1) <= _BREAKDOWN
        q = torch.where(dead.unsqueeze(-1), q, w / norm.clamp_min(_BREAKDOWN))
        if prev is not None:
            # sigma = sqrt(lambda): relative change of sigma is about half that of lambda
            rel = (lam - prev).abs() / (2 * lam.abs().clamp_min(_BREAKDOWN))
            if bool(((rel <= tol) | dead).all()):
                return lam, True, step
        elif bool(dead.all()):
            return lam, True, step
        prev = lam
    return lam, False, iters


def _lanczos(mtm: Callable[[Tensor], Tensor], q: Tensor, iters: int, tol: float) -> tuple[Tensor, bool, int]:
    """Lanczos with full reorthogonalization on the PSD operator M^T M, batched over heads.

    Returns (largest Ritz value per head, converged, steps).  A head whose residual vanishes
    (invariant subspace) keeps zero vectors afterwards: its tridiagonal matrix becomes block
    diagonal with zero blocks, which leaves the largest Ritz value unchanged.
    """
    n_heads, n = q.shape
    basis = [q]
    alphas: list[Tensor] = []
    betas: list[Tensor] = []
    theta = torch.zeros(n_heads, dtype=torch.float64)
    for step in range(1, min(iters, n) + 1):
        qj = basis[-1]
        w = mtm(qj)
        alpha = (w * qj).sum(dim=-1)
        w = w - alpha.unsqueeze(-1) * qj
        if betas:
            w = w - betas[-1].unsqueeze(-1) * basis[-2]
        stacked = torch.stack(basis, dim=1)  # (H, k, n)
        for _ in range(2):  # full reorthogonalization, twice is enough
            w = w - torch.einsum("hk,hkn->hn", torch.einsum("hkn,hn->hk", stacked, w), stacked)
        beta = w.norm(dim=-1)
        alphas.append(alpha)

        k = len(alphas)
        tri = torch.diag_embed(torch.stack(alphas, dim=-1))
        if k > 1:
            off = torch.stack(betas, dim=-1)
            tri = tri + torch.diag_embed(off, offset=1) + torch.diag_embed(off, offset=-1)
        evals, evecs = torch.linalg.eigh(tri)
        theta = evals[:, -1]
        # residual of the top Ritz pair: ||S y - theta y|| = beta_k * |last component of s|
        resid = beta * evecs[:, -1, -1].abs()
        dead = beta <= _BREAKDOWN
        # Stop on the residual bound: some eigenvalue of M^T M lies within resid of theta (and
        # theta <= lambda_max always).  This is conservative: the error of the top Ritz value is
        # usually ~resid^2 / gap, but the gap estimate from Ritz values can be optimistic.
        # Relative error of sigma = sqrt(theta) is about half the relative error of theta.
        rel = resid / (2 * theta.abs().clamp_min(_BREAKDOWN))
        if bool(((rel <= tol) | dead).all()) or step == n:
            return theta, True, step
        betas.append(torch.where(dead, torch.zeros_like(beta), beta))
        nxt = torch.where(
            dead.unsqueeze(-1), torch.zeros_like(w), w / beta.clamp_min(_BREAKDOWN).unsqueeze(-1)
        )
        basis.append(nxt)
    return theta, False, min(iters, n)
