"""The GPU check: one JSON document of what only a CUDA machine can show (bench/gpu_check.sh runs it).

1. ``trial``: a tiny-preset (tiny-llama, arithmetic) trial on CUDA with bf16 weights: status, s/step, gap.
2. ``left_padding``: last-position logits of prompts left-padded by 0..8 tokens against each prompt alone, in
   bf16 on CUDA: all finite, max |difference| (goal < 0.05).
3. ``medium_step``: one GRPO step at the medium shape of bench/scale_vs_trl.py (11M parameters, 32k
   vocabulary, B = 64, G = 8, 64 tokens, micro-batches of 16): s/step, tokens/s, peak CUDA memory (GiB).
4. ``probe``: the probe on the tiny preset on CUDA: G*, its interval, seconds.
5. ``lora_groupscale`` / ``lora_trl``: a LoRA trial of each engine on CUDA (bf16): status, seconds, trainable and
   total parameters.
6. ``trl_vllm``: an engine-trl trial with ``use_vllm: true, vllm_mode: colocate`` (TRL generating with vLLM in the
   trial's process): status (or why not: vLLM not installed), seconds, gap.
7. ``two_processes`` (2 GPUs or more): a tiny-preset trial of each engine on 2 processes, one GPU each, in one NCCL
   group (workers.distributed, as a trial's ranks run on Ray): each rank's status, seconds, gap.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    from bench.scale_vs_trl import MICRO, TASK, B, G, L, build
    from sweeps.spec import ProbeSpec
    from workers.engines.groupscale import TrialConfig, train_trial
    from workers.models.loading import load_lm
    from workers.probe import run_probe

    assert torch.cuda.is_available(), "no CUDA device"
    out: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"
        base = {
            "task": TASK,
            "model": {"preset": "tiny-llama", "dtype": "bfloat16"},
            "seed": 0,
            "cache_dir": str(cache),
            "device": "cuda",
            "eval_prompts": 256,
        }
        stamps: list[float] = []
        t0 = time.perf_counter()
        res = train_trial(
            TrialConfig.flat(group_size=4, samples_per_step=64, steps=40, **base),
            lambda m, s: stamps.append(time.perf_counter()) if "reward_mean" in m else None,
        )
        out["trial"] = {
            "status": res.status,
            "reason": res.reason,
            "seconds": time.perf_counter() - t0,
            "s_per_step": (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1),
            **res.metrics,
        }

        policy = load_lm(next(cache.glob("tiny-llama-*")), torch.bfloat16)
        model, tok = policy.module.to("cuda").eval(), policy.tokenizer
        prompts = ["12+7=", "3+45=", "40+9="]
        worst, finite = 0.0, True
        with torch.no_grad():
            for text in prompts:
                ids = tok(text, add_special_tokens=False)["input_ids"]
                alone = model(input_ids=torch.tensor([ids], device="cuda")).logits[0, -1].float()
                for pad in range(9):
                    row = torch.tensor([[tok.pad_token_id] * pad + ids], device="cuda")
                    att = torch.tensor([[0] * pad + [1] * len(ids)], device="cuda")
                    pos = (att.cumsum(1) - 1).clamp_min(0)
                    logits = model(input_ids=row, attention_mask=att, position_ids=pos).logits[0, -1].float()
                    finite &= bool(torch.isfinite(logits).all())
                    worst = max(worst, float((logits - alone).abs().max()))
        out["left_padding"] = {"all_finite": finite, "max_abs_difference": worst, "ok": finite and worst < 0.05}

        medium = Path(tmp) / "medium"
        build(medium)
        torch.cuda.reset_peak_memory_stats()
        stamps, rows = [], []
        cfg = TrialConfig.flat(
            task=TASK,
            model={"path": str(medium), "dtype": "bfloat16"},
            group_size=G,
            samples_per_step=B,
            seed=0,
            steps=3,
            advantage="mean",
            max_new_tokens=L,
            micro_batch_size=MICRO,
            eval_prompts=8,
            cache_dir=str(cache),
            device="cuda",
        )
        train_trial(cfg, lambda m, s: (stamps.append(time.perf_counter()), rows.append(m)) if "reward_mean" in m else None)
        out["medium_step"] = {
            "s_per_step": (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1),
            "tokens_per_s": rows[-1]["tokens_per_s"],
            "time_generate_s": rows[-1]["time_generate_s"],
            "time_update_s": rows[-1]["time_update_s"],
            "peak_cuda_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        }

        probe = run_probe(
            TrialConfig.flat(group_size=2, samples_per_step=2, steps=1, **base), ProbeSpec(prompts=64, completions=16)
        )
        out["probe"] = {k: probe[k] for k in ("g_star", "g_star_ci95", "tau2", "sigma2", "kappa", "seconds")}

        lora = {
            **base,
            "model": {**base["model"], "lora": {"r": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"}},
        }
        recipe = {"bf16": True, "learning_rate": 2e-4, "max_completion_length": 4, "per_device_train_batch_size": 32}
        for name, engine, trl in (("lora_groupscale", "groupscale", {}), ("lora_trl", "trl", recipe)):
            out[name] = _trial(TrialConfig.flat(group_size=4, samples_per_step=64, steps=10, engine=engine, trl=trl, **lora))
        vllm = {**recipe, "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3}
        out["trl_vllm"] = _trial(TrialConfig.flat(group_size=4, samples_per_step=64, steps=10, engine="trl", trl=vllm, **base))
        if torch.cuda.device_count() >= 2:
            out["two_processes"] = {
                engine: _two_processes(
                    TrialConfig.flat(group_size=4, samples_per_step=64, steps=10, engine=engine, trl=trl, num_processes=2, **base)
                )  # fmt: skip
                for engine, trl in (("groupscale", {}), ("trl", recipe))
            }
    print(json.dumps(out, indent=2, default=float))


def _rank(rank: int, port: int, config: dict, results: dict) -> None:
    """Spawned: rank ``rank`` of 2 on GPU ``rank`` (the only one it sees, as under Ray), one trial."""
    import os

    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)  # before the first CUDA call in this process
    from sweeps.trial import TrialConfig, TrialResult
    from workers.distributed import join, leave
    from workers.engines.base import Placement
    from workers.measures import run_measure

    placement = Placement(rank, 2, "cuda")
    join(f"tcp://127.0.0.1:{port}", placement)
    t0 = time.perf_counter()
    res: TrialResult = run_measure(TrialConfig(**config), lambda m, s: None, placement)
    results[rank] = {
        "status": str(res.status),
        "reason": res.reason,
        "seconds": time.perf_counter() - t0,
        "gap": res.metrics.get("gap"),
    }
    leave()


def _two_processes(cfg) -> dict:
    """The trial on 2 spawned processes, one GPU each: each rank's outcome (rank 0's is the trial's)."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Manager().dict()
    procs = [ctx.Process(target=_rank, args=(r, port, cfg.to_dict(), results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    return {"exit_codes": [p.exitcode for p in procs], **{f"rank{r}": results.get(r) for r in range(2)}}


def _trial(cfg) -> dict:
    """One trial of either engine (workers.entry.run_measure): status, reason, seconds, gap and parameter counts."""
    from workers.entry import run_measure

    seen: dict = {}
    t0 = time.perf_counter()
    try:
        res = run_measure(cfg, lambda m, s: seen.update(m))
    except Exception as e:  # noqa: BLE001 - the check reports every item, whatever one of them does
        return {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:300]}"}
    keys = ("parameters_trainable", "parameters_total")
    return {"status": res.status, "reason": res.reason, "seconds": time.perf_counter() - t0, "gap": res.metrics.get("gap")} | {
        k: seen.get(k) for k in keys
    }


if __name__ == "__main__":
    main()
