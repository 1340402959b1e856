"""Sketches of per-completion score vectors: a count sketch of formed vectors, a TensorSketch of per-layer factors.

The probe needs inner products of score vectors g in R^P (THEORY.md, "The probe"); a sketch S: R^P -> R^D with
E<Sg, Sh> = <g, h> keeps its estimators unbiased. Two kinds, the same for the estimators:

- ``CountSketch`` (Charikar, Chen & Farach-Colton, ICALP 2002) sketches vectors already formed: the loop's, or the
  per-row gradients of workers.scores.batched_scores (the probe's path until 2026-12; kept for comparison).
- ``TensorSketch`` sketches a weight W (o x i) from the two factors of its per-example gradient, never forming it.
  A Linear layer's is dW_n = sum_t go_{n,t} a_{n,t}^T (go: the output gradient, a: the input, at token t of
  completion n). The TensorSketch of a matrix M is its count sketch under the hash H(j, k) = h_o(j) + h_i(k) mod D
  with signs s_o(j) s_i(k) (Pham & Pagh, KDD 2013), and of an outer product u v^T it is the circular convolution of
  the two sides' count sketches, so by linearity

      S(dW_n) = irfft( sum_t rfft(C_o go_{n,t}) * rfft(C_i a_{n,t}) ),

  O(o + i + D log D) a token against the o i of forming dW_n (a weight small enough that forming costs less,
  FORM_AT_MOST, is formed and sketched by the same hash: the same map). An embedding's per-example gradient, sum_t
  e_{id_t} go_t^T, is sketched the same way (C_o e_id is one signed bucket); vectors (norm weights, biases) by a
  count sketch of their per-example gradients. Each parameter has hashes of its own, so the blocks add up to a
  sketch of the whole score vector: E<Sg, Sh> = <g, h>, Var <Sg, Sh> <= 22 ||g||^2 ||h||^2 / D (THEORY.md, "The
  probe's sketch", from the TensorSketch's JL moment (2 + 3^2) / D; a count sketch's is 2 / D).
"""

from __future__ import annotations

import torch

FORM_AT_MOST = 1 << 16  # entries of a weight whose per-example gradients may be formed, when that is the cheaper way
SKETCH_SLICE = 1 << 24  # coordinates sketched at a time (16M: 128 MB of float64 a row)
ROW_BY_ROW = 1 << 16  # from this many coordinates a block is sketched row by row (CPU index_add_ along dim 1 is slow)


class CountSketch:
    """Unbiased inner-product-preserving projection R^P -> R^D: v -> sum of sign(p) v_p in bucket(p).

    E[<Sv, Sw>] = <v, w> over the random hash (Charikar, Chen, Farach-Colton, ICALP 2002).
    The hash is held as 5 bytes a parameter (bucket int32, sign int8: 2.5 GB at 0.5B parameters, not the 16 of
    int64 and float64); its values are the same draws either way.
    """

    def __init__(self, n_params: int, dim: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.dim = dim
        self.bucket = torch.randint(0, dim, (n_params,), generator=g, dtype=torch.int32)
        self.sign = torch.randint(0, 2, (n_params,), generator=g, dtype=torch.int8).mul_(2).sub_(1)  # -1 or +1

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        """(P,) -> (D,), or (n, P) -> (n, D) row by row."""
        if v.dim() == 2:
            return self.add_block(torch.zeros(v.shape[0], self.dim, dtype=torch.float64), v, 0)
        return torch.zeros(self.dim, dtype=torch.float64).index_add_(0, self.bucket, v.double() * self.sign)

    def add_block(self, out: torch.Tensor, block: torch.Tensor, offset: int) -> torch.Tensor:
        """Adds the sketch of coordinates offset .. offset + k of n vectors, ``block`` (n, k), into ``out`` (n, D)
        float64 in place, and returns it. Summing the blocks of a vector gives the sketch of the whole vector
        (the sketch is linear) without ever holding all n x P coordinates."""
        for lo in range(0, block.shape[1], SKETCH_SLICE):  # a float64 copy of at most SKETCH_SLICE coordinates a row
            part = block[:, lo : lo + SKETCH_SLICE]
            k, at = part.shape[1], offset + lo
            signed = part.to(torch.float64, copy=True).mul_(self.sign[at : at + k])  # never the caller's tensor
            if k < ROW_BY_ROW:  # with an int64 index: CPU's 2-D index_add_ is ~15x slower with an int32 one
                out.index_add_(1, self.bucket[at : at + k].long(), signed)
                continue
            for row, values in zip(out, signed, strict=True):  # a 1-D index_add_ of 16M is ~50x faster than a 2-D one
                row.index_add_(0, self.bucket[at : at + k], values)
        return out


class _Side:
    """One side's count-sketch hash of a weight: bucket h (k,) int64 and sign s (k,) float32 of each index (drawn on
    the CPU, copied once to each device the data comes on)."""

    def __init__(self, k: int, dim: int, g: torch.Generator) -> None:
        self.h = torch.randint(0, dim, (k,), generator=g)
        self.s = torch.randint(0, 2, (k,), generator=g).mul_(2).sub_(1).float()
        self._copies: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(h, s) on ``device``."""
        if device.type == "cpu":
            return self.h, self.s
        if device not in self._copies:
            self._copies[device] = (self.h.to(device), self.s.to(device))
        return self._copies[device]

    def rows(self, v: torch.Tensor, dim: int) -> torch.Tensor:
        """(m, k) -> (m, D) float64: each row's count sketch (an index_add_ along dim 0, CPU's fast direction)."""
        h, s = self.on(v.device)
        signed = (v.float() * s).T.contiguous()
        return torch.zeros(dim, v.shape[0], dtype=torch.float32, device=v.device).index_add_(0, h, signed).T.double()


class TensorSketch:
    """S: R^P -> R^D over ``params`` (in their order), block by block: a TensorSketch for each matrix (its rows the
    output side, as nn.Linear's and nn.Embedding's weights), a count sketch for the other parameters together.

    ``linear``, ``embedding`` and ``vector`` sketch per-example gradients from their factors (workers.scores'
    backward hooks); ``__call__`` sketches formed vectors, the same map (the reference the factored forms equal).
    Memory: two int64 hashes and two signs an index of each matrix side (20 MB for a 0.5B model, where
    CountSketch holds 2.5 GB).
    """

    def __init__(self, params: list[torch.nn.Parameter], dim: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.dim, self.sides, self.offsets, self.shapes = dim, {}, {}, [(id(p), p.shape) for p in params]
        vector_size = 0
        for p in params:
            if p.dim() == 2:
                self.sides[id(p)] = (_Side(p.shape[0], dim, g), _Side(p.shape[1], dim, g))
            else:
                self.offsets[id(p)], vector_size = vector_size, vector_size + p.numel()
        self.counts = CountSketch(vector_size, dim, int(torch.randint(0, 2**31, (1,), generator=g)))
        self._flats: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def _convolve(self, out: torch.Tensor, left: torch.Tensor, right: torch.Tensor) -> None:
        """out (n, D) += irfft(sum_t rfft(left) * rfft(right)), left and right (n, T, D) float64."""
        spectrum = (torch.fft.rfft(left, dim=-1) * torch.fft.rfft(right, dim=-1)).sum(dim=1)
        out += torch.fft.irfft(spectrum, n=self.dim, dim=-1)

    def _cheaper_formed(self, param: torch.nn.Parameter, tokens: int) -> bool:
        """Whether forming a weight's per-example gradients costs less than the transforms: a small weight (at most
        FORM_AT_MOST entries, 256 KB a completion) over many tokens, o i <= 4 T D (measured on CPU: the index_add_
        of o i entries against T rffts of D)."""
        return param.numel() <= min(FORM_AT_MOST, 4 * tokens * self.dim)

    def _flat(self, key: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """A matrix's hash over its flattened entries on ``device``: bucket H(j, k) (o i,) int64 and sign s_o(j) s_i(k)
        float64 (kept for the small weights the hooks form, made afresh for a formed score vector's large ones)."""
        if (key, device) in self._flats:
            return self._flats[key, device]
        (rh, rs), (ch, cs) = self.sides[key][0].on(device), self.sides[key][1].on(device)
        flat = (rh[:, None] + ch[None, :]).remainder(self.dim).reshape(-1), (rs[:, None] * cs[None, :]).reshape(-1).double()
        if flat[0].numel() <= FORM_AT_MOST:
            self._flats[key, device] = flat
        return flat

    def _add_formed(self, out: torch.Tensor, key: int, grads: torch.Tensor, signed: bool = False) -> None:
        """out (n, D) += the sketch of formed matrices ``grads`` (n, o i); ``signed``: their entries already carry the
        signs s_o(j) s_i(k) (the hooks sign the two factors before their product: o + i multiplications, not o i)."""
        bucket, sign = self._flat(key, grads.device)
        if signed:
            out += torch.zeros(out.shape, dtype=grads.dtype, device=grads.device).index_add_(1, bucket, grads).double()
        else:
            out.index_add_(1, bucket, grads.double() * sign)

    def linear(self, out: torch.Tensor, param: torch.nn.Parameter, x: torch.Tensor, go: torch.Tensor) -> None:
        """out (n, D) += S(dW_n), dW_n = sum_t go[n, t] x[n, t]^T: x (n, T, i) inputs, go (n, T, o) output gradients."""
        rows, cols = self.sides[id(param)]
        n, t = x.shape[:2]
        if self._cheaper_formed(param, t):
            (_, s_o), (_, s_i) = rows.on(go.device), cols.on(x.device)
            grads = torch.einsum("bto,bti->boi", go.float() * s_o, x.float() * s_i).reshape(n, -1)
            self._add_formed(out, id(param), grads, signed=True)
            return
        left = rows.rows(go.reshape(n * t, -1), self.dim).reshape(n, t, -1)
        self._convolve(out, left, cols.rows(x.reshape(n * t, -1), self.dim).reshape(n, t, -1))

    def embedding(
        self, out: torch.Tensor, param: torch.nn.Parameter, ids: torch.Tensor, go: torch.Tensor, pad: int | None
    ) -> None:
        """out (n, D) += S(dE_n), dE_n = sum_t e_{ids[n, t]} go[n, t]^T: ids (n, T), go (n, T, H); the padding row's
        gradient is 0 (nn.Embedding never updates it)."""
        rows, cols = self.sides[id(param)]
        n, t = ids.shape
        keep = (ids != pad).unsqueeze(-1) if pad is not None else torch.ones_like(ids, dtype=torch.bool).unsqueeze(-1)
        h, s = rows.on(ids.device)
        if self._cheaper_formed(param, t):
            signed = go.float() * keep * s[ids].unsqueeze(-1) * cols.on(go.device)[1]
            grads = torch.zeros(n, *param.shape, dtype=torch.float32, device=go.device)
            grads.scatter_add_(1, ids.unsqueeze(-1).expand(n, t, go.shape[-1]), signed)
            self._add_formed(out, id(param), grads.reshape(n, -1), signed=True)
            return
        sign = s[ids].double().unsqueeze(-1) * keep
        left = torch.zeros(n, t, self.dim, dtype=torch.float64, device=go.device).scatter_(2, h[ids].unsqueeze(-1), sign)
        self._convolve(out, left, cols.rows(go.reshape(n * t, -1), self.dim).reshape(n, t, -1))

    def vector(self, out: torch.Tensor, param: torch.nn.Parameter, grads: torch.Tensor) -> None:
        """out (n, D) += the count sketch of a vector parameter's per-example gradients ``grads`` (n, k) (on the CPU,
        where the count sketch's hash is: k is at most a few thousand)."""
        if out.device.type == "cpu":
            self.counts.add_block(out, grads, self.offsets[id(param)])
            return
        part = torch.zeros(grads.shape[0], self.dim, dtype=torch.float64)
        out += self.counts.add_block(part, grads.detach().cpu(), self.offsets[id(param)]).to(out.device)

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        """(P,) -> (D,) or (n, P) -> (n, D): the same sketch of formed score vectors (concatenated in params' order)."""
        rows = v.reshape(-1, v.shape[-1]).double()
        out, at = torch.zeros(rows.shape[0], self.dim, dtype=torch.float64), 0
        for key, shape in self.shapes:
            size = shape.numel()
            block = rows[:, at : at + size]
            if key in self.sides:
                self._add_formed(out, key, block)
            else:
                self.counts.add_block(out, block, self.offsets[key])
            at += size
        return out.reshape(*v.shape[:-1], self.dim)
