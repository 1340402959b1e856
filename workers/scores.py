"""Per-completion score vectors s_i = grad log pi(y_i | x_i), many completions per backward pass.

The probe needs one gradient per completion (THEORY.md, "The probe"). One backward pass per
completion is exact but slow. Because each completion's log-probability depends on its own row
only, one backward pass of sum_i log pi(y_i | x_i) over a chunk of rows gives, at every layer, the
per-row output gradients; with the layer's per-row inputs they give each row's own weight gradient
exactly (Goodfellow, "Efficient per-example gradient computations", arXiv 1510.01799):

    Linear      dW_i = sum_t go_{i,t}^T a_{i,t},   db_i = sum_t go_{i,t}
    Embedding   dE_i[v] = sum_{t: id_{i,t} = v} go_{i,t}   (0 for its padding_idx, as nn.Embedding)
    RMSNorm     dw_i = sum_t go_{i,t} * x_{i,t} / rms(x_{i,t})

A tied embedding and LM head (one parameter, two modules) adds both. Modules of other kinds with
parameters raise UnsupportedModule, and the caller falls back to the loop. With a count sketch
(workers.probe.CountSketch) each parameter's per-row gradient is sketched as the backward pass forms it, a Linear's
one row at a time: at most one row's gradient of the largest weight exists at once (a 0.5B model's tied 150k x 896
embedding: 0.5 GB), never the chunk x P gradients (70 GB for 0.5B parameters and 32 rows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import contextmanager

import torch

from workers.models.lora import LORA_MARK
from workers.rollout import Rollout, _completion_hidden
from workers.sketch import TensorSketch


class UnsupportedModule(TypeError):
    """A module with parameters whose per-row gradient this file cannot form."""


def _is_rms_norm(module: torch.nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "weight") and module.weight.dim() == 1


def select_parameters(model: torch.nn.Module, which: str) -> list[torch.nn.Parameter]:
    """``probe.parameters``: ``all`` (every trainable parameter: the adapter alone under LoRA), ``lm_head`` (the
    output embedding, tied or not), ``lora`` (the LoRA adapter) or ``last_layers:K`` (the last K decoder layers,
    the final norm and the LM head).

    Raises:
        ValueError: an unknown choice, or K outside 1..number of layers.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if which == "all":
        return params
    if which == "lora":
        adapter = [p for name, p in model.named_parameters() if LORA_MARK in name and p.requires_grad]
        if not adapter:
            raise ValueError("probe.parameters lora needs a model with a LoRA adapter (model.lora)")
        return adapter
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if which == "lm_head":
        if head is None:
            raise ValueError("probe.parameters lm_head needs a language model")
        return [head.weight]
    if which.startswith("last_layers:") and which.split(":", 1)[1].isdigit() and head is not None:
        k = int(which.split(":", 1)[1])
        n = int(getattr(model.config, "num_hidden_layers", 0))
        if not 1 <= k <= n:
            raise ValueError(f"probe.parameters {which}: the model has {n} layers; allowed: last_layers:1 .. last_layers:{n}")
        keep = {f"layers.{i}." for i in range(n - k, n)}
        chosen = {id(p) for name, p in model.named_parameters() if any(key in name for key in keep)}
        chosen |= {id(p) for name, p in model.named_parameters() if name.endswith("norm.weight") and "layers." not in name}
        chosen.add(id(head.weight))
        return [p for p in params if id(p) in chosen]
    raise ValueError(f"unknown probe.parameters {which!r}; valid: all, lm_head, lora, last_layers:K")


ROW_GRADIENTS = 1 << 26  # float32 entries of one weight's per-row gradients formed at once when sketching (256 MB)


def _rows_at_once(n: int, weight: torch.nn.Parameter, sketching: bool) -> int:
    """How many rows' gradients of ``weight`` a hook forms in one einsum: all n, unless sketching and n of them exceed
    ROW_GRADIENTS entries (then as many as fit, at least one: an LM head of a 150k vocabulary goes row by row)."""
    return n if not sketching or n * weight.numel() <= ROW_GRADIENTS else max(1, ROW_GRADIENTS // weight.numel())


Sink = Callable[[torch.nn.Parameter, torch.Tensor, int], None]  # (param, rows' gradients (n, *shape), first row)


def _tokens(x: torch.Tensor, go: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, features) -> (rows, 1, features): a Linear applied to one position a row."""
    return (x.unsqueeze(1), go.unsqueeze(1)) if x.dim() == 2 else (x, go)


def _rms_normed(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """An RMSNorm's input normalised as its forward does (in x's dtype), as float32: its weight's per-token factor."""
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype).float()


class _PerRow:
    """Rules that form each row's gradient of every wanted parameter and hand it to ``add`` (a tied parameter's two
    modules hand theirs separately: the sink sums them). ``one_row_at_a_time`` (sketching): a large Linear's or
    Embedding's weight gradients are formed and handed a few rows at a time (_rows_at_once), so that a 150k x 896
    vocabulary's never exist for more than one row (0.5 GB)."""

    def __init__(self, wanted: set[int], add: Sink, one_row_at_a_time: bool) -> None:
        self.wanted, self.add, self.one_row_at_a_time = wanted, add, one_row_at_a_time

    def linear(self, module: torch.nn.Linear, x: torch.Tensor, go: torch.Tensor) -> None:
        x, go = _tokens(x, go)
        if id(module.weight) in self.wanted:  # sums over <= L tokens: float32 is exact enough
            step = _rows_at_once(x.shape[0], module.weight, self.one_row_at_a_time)
            for i in range(0, x.shape[0], step):
                self.add(module.weight, torch.einsum("bto,bti->boi", go[i : i + step].float(), x[i : i + step].float()), i)
        if module.bias is not None and id(module.bias) in self.wanted:
            self.add(module.bias, go.float().sum(dim=1), 0)

    def embedding(self, module: torch.nn.Embedding, ids: torch.Tensor, go: torch.Tensor) -> None:
        step = _rows_at_once(ids.shape[0], module.weight, self.one_row_at_a_time)
        for i in range(0, ids.shape[0], step):
            rows, g = ids[i : i + step], go[i : i + step]
            grad = torch.zeros((rows.shape[0], *module.weight.shape), dtype=torch.float32, device=go.device)
            grad.scatter_add_(1, rows.unsqueeze(-1).expand(*rows.shape, g.shape[-1]), g.float())
            if module.padding_idx is not None:  # nn.Embedding never updates its padding row (the pad id may be sampled)
                grad[:, module.padding_idx] = 0.0
            self.add(module.weight, grad, i)

    def rms_norm(self, module: torch.nn.Module, x: torch.Tensor, go: torch.Tensor) -> None:
        self.add(module.weight, (go.float() * _rms_normed(module, x)).sum(dim=1), 0)


class _Sketched:
    """Rules that add each row's TensorSketch of every wanted parameter's gradient into ``out`` (n, D) float64
    (workers.sketch.TensorSketch), from the layer's input and output gradient: no row's gradient of a matrix is
    formed."""

    def __init__(self, wanted: set[int], sketch: TensorSketch, out: torch.Tensor) -> None:
        self.wanted, self.sketch, self.out = wanted, sketch, out

    def linear(self, module: torch.nn.Linear, x: torch.Tensor, go: torch.Tensor) -> None:
        x, go = _tokens(x, go)
        if id(module.weight) in self.wanted:
            self.sketch.linear(self.out, module.weight, x, go)
        if module.bias is not None and id(module.bias) in self.wanted:
            self.sketch.vector(self.out, module.bias, go.float().sum(dim=1))

    def embedding(self, module: torch.nn.Embedding, ids: torch.Tensor, go: torch.Tensor) -> None:
        self.sketch.embedding(self.out, module.weight, ids, go, module.padding_idx)

    def rms_norm(self, module: torch.nn.Module, x: torch.Tensor, go: torch.Tensor) -> None:
        self.sketch.vector(self.out, module.weight, (go.float() * _rms_normed(module, x)).sum(dim=1))


@contextmanager
def _per_row_hooks(model: torch.nn.Module, rules: _PerRow | _Sketched):
    """Hooks that hand every wanted parameter's module, its input and its output gradient to ``rules`` as the
    backward pass reaches it.

    Raises:
        UnsupportedModule: a wanted parameter belongs to a module that is not a Linear, an Embedding or an RMSNorm.
    """
    handles = []
    for module in model.modules():
        own = [p for p in module.parameters(recurse=False) if id(p) in rules.wanted]
        if not own:
            continue
        kinds = ((torch.nn.Linear, rules.linear), (torch.nn.Embedding, rules.embedding))
        kind = next((rule for cls, rule in kinds if isinstance(module, cls)), rules.rms_norm if _is_rms_norm(module) else None)
        if kind is None:
            raise UnsupportedModule(f"per-row gradients of {type(module).__name__} are not implemented")

        def forward_hook(module: torch.nn.Module, inputs: tuple, output: torch.Tensor, kind: Callable = kind) -> None:
            x = inputs[0].detach()
            if output.requires_grad:
                output.register_hook(lambda go, module=module, x=x: kind(module, x, go.detach()))

        handles.append(module.register_forward_hook(forward_hook))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class _Sink:
    """Where the hooks' per-row gradients of one chunk go: into a count sketch as they come (``out``, (n, D)
    float64: the sketch is linear, so a tied parameter's two parts add up), else kept whole per parameter (``grads``)."""

    def __init__(self, params: list[torch.nn.Parameter], sketch) -> None:  # noqa: ANN001 - workers.probe.CountSketch
        self.sketch, self.offsets, at = sketch, {}, 0
        for p in params:
            self.offsets[id(p)], at = at, at + p.numel()
        self.out: torch.Tensor | None = None
        self.grads: dict[int, torch.Tensor] = {}

    def start(self, n: int) -> None:
        """A new chunk of ``n`` rows."""
        self.out = torch.zeros(n, self.sketch.dim, dtype=torch.float64) if self.sketch is not None else None
        self.grads = {}

    def add(self, param: torch.nn.Parameter, grad: torch.Tensor, first: int) -> None:
        if self.out is not None:
            rows = self.out[first : first + grad.shape[0]]  # a view: the sketch adds into out in place
            self.sketch.add_block(rows, grad.reshape(grad.shape[0], -1), self.offsets[id(param)])
        else:
            self.grads[id(param)] = self.grads[id(param)] + grad if id(param) in self.grads else grad


def _summed_logprob(model: torch.nn.Module, part: Rollout, temperature: float) -> torch.Tensor:
    """sum_i log pi(y_i | x_i) over the rows of ``part`` (each row's own forward: group_size 1)."""
    hidden = _completion_hidden(model, part)
    logits = model.get_output_embeddings()(hidden).float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, part.completion_ids.unsqueeze(-1)).squeeze(-1)
    return (logp * part.completion_mask).sum()


def batched_scores(
    model: torch.nn.Module,
    rollout: Rollout,
    temperature: float,
    params: list[torch.nn.Parameter],
    project: Callable[[torch.Tensor], torch.Tensor] | None,
    chunk: int = 64,
) -> torch.Tensor:
    """(S, D) float64 per-completion score vectors over ``params`` (flattened in their order; accumulated in
    float32, like the loop's autograd), each row projected by ``project`` ((n, P) -> (n, D)) when given (a
    CountSketch block by block).
    ``chunk`` completions share one forward and backward pass.

    Raises:
        UnsupportedModule: a selected parameter belongs to a module kind without a per-row rule.
    """
    wanted = {id(p) for p in params}
    sink = _Sink(params, project if hasattr(project, "add_block") else None)
    rows = []
    for start in range(0, rollout.input_ids.shape[0], chunk):
        part = dataclasses.replace(rollout.rows(slice(start, start + chunk)), group_size=1)  # each row's own forward
        n = part.input_ids.shape[0]
        sink.start(n)
        with _per_row_hooks(model, _PerRow(wanted, sink.add, one_row_at_a_time=sink.sketch is not None)):
            _summed_logprob(model, part, temperature).backward()
        model.zero_grad(set_to_none=True)
        if sink.out is not None:  # no (n, P) gradient ever held: at most one parameter's, of one row for a Linear
            rows.append(sink.out)
            continue
        blocks = [sink.grads.pop(id(p)).reshape(n, -1) if id(p) in sink.grads else torch.zeros(n, p.numel()) for p in params]
        flat = torch.cat(blocks, dim=1)
        rows.append(project(flat) if project else flat.double())
    return torch.cat(rows)


@contextmanager
def _activation_gradients_only(model: torch.nn.Module):
    """The backward pass computes the activations' gradients and no parameter's: every parameter frozen (restored on
    exit) and the input embeddings' output made a leaf that requires grad, so each layer's output gradient still
    flows (about half a training backward's work: no weight gradient is formed)."""
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)

    def leaf(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        return output.detach().requires_grad_()

    handle = model.get_input_embeddings().register_forward_hook(leaf)
    try:
        yield
    finally:
        handle.remove()
        for p in frozen:
            p.requires_grad_(True)


def sketched_scores(
    model: torch.nn.Module,
    rollout: Rollout,
    temperature: float,
    params: list[torch.nn.Parameter],
    sketch: TensorSketch,
    chunk: int = 64,
) -> torch.Tensor:
    """(S, D) float64: each completion's score vector over ``params`` sketched by ``sketch``, taken inside one
    backward pass of ``chunk`` completions from each layer's input and output gradient (workers.sketch): no
    per-example gradient of a matrix is ever formed, and no parameter's gradient is computed. Equals
    ``sketch(batched_scores(..., project=None))`` to float rounding.

    Raises:
        UnsupportedModule: a selected parameter belongs to a module kind without a rule.
    """
    wanted = {id(p) for p in params}
    rows = []
    with _activation_gradients_only(model):  # the hooks below go first: the embedding's output is a leaf before them
        for start in range(0, rollout.input_ids.shape[0], chunk):
            part = dataclasses.replace(rollout.rows(slice(start, start + chunk)), group_size=1)
            out = torch.zeros(part.input_ids.shape[0], sketch.dim, dtype=torch.float64, device=part.input_ids.device)
            with _per_row_hooks(model, _Sketched(wanted, sketch, out)):
                _summed_logprob(model, part, temperature).backward()
            rows.append(out.cpu())
    return torch.cat(rows)
