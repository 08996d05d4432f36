"""models/optim.py: AdamW fused where the parameters allow it; the trainers that build it (GRPO/PPO's Net, DPO, SFT,
the tiny PRM)."""
import pytest
import torch

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models import optim
from reasoning_rl.models.load import build_tiny


def _mesh_param():
    p = torch.nn.Parameter(torch.zeros(3))
    p.device_mesh = object()  # what an FSDP2 DTensor carries
    return p


@pytest.mark.parametrize("params, expected", [
    # (parameters,                                                     fusable)
    (lambda: [torch.nn.Parameter(torch.zeros(3, 2)), torch.nn.Parameter(torch.zeros(2))], True),  # float32 on a CPU
    (lambda: [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3).double())], False),  # one float64
    (lambda: [torch.nn.Parameter(torch.zeros(3, dtype=torch.bfloat16))], False),  # another dtype: the loop
    (lambda: [torch.nn.Parameter(torch.zeros(3)), _mesh_param()], False),  # a sharded parameter
    (lambda: [], False),  # nothing to step
], ids=["float32", "one-float64", "bfloat16", "sharded", "empty"])
def test_fusable(params, expected):
    assert optim.fusable(params()) is expected


def test_adamw_is_fused_where_it_can_be_and_asked_to_be():
    ps = [torch.nn.Parameter(torch.zeros(3))]
    assert optim.adamw(ps, lr=1e-3).param_groups[0]["fused"] is True
    assert not optim.adamw(ps, lr=1e-3, fused=False).param_groups[0]["fused"]
    assert not optim.adamw([torch.nn.Parameter(torch.zeros(3).double())], lr=1e-3).param_groups[0]["fused"]


def test_parameter_groups_keep_their_settings_and_are_fused_only_when_every_tensor_can_be():
    body, head = [torch.nn.Parameter(torch.zeros(3, 2))], [torch.nn.Parameter(torch.zeros(2))]
    opt = optim.adamw([{"params": body, "lr": 1e-4}, {"params": head, "lr": 1e-2}], lr=1e-3)
    assert [g["lr"] for g in opt.param_groups] == [1e-4, 1e-2] and all(g["fused"] for g in opt.param_groups)
    opt = optim.adamw([{"params": body}, {"params": [torch.nn.Parameter(torch.zeros(2).double())]}], lr=1e-3)
    assert [g["lr"] for g in opt.param_groups] == [1e-3, 1e-3] and not any(g["fused"] for g in opt.param_groups)


def _optimisers_built(monkeypatch, module) -> list:
    """The optimisers `module` builds through its `adamw` from now on (each also returned to it, as built)."""
    built = []
    real = module.adamw
    monkeypatch.setattr(module, "adamw", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    return built


@pytest.mark.parametrize("name, fused", [("tiny", False), ("a-real-model", True)])
def test_sft_steps_the_tiny_warm_start_with_the_loop_and_any_other_model_fused(monkeypatch, name, fused):
    """The embedded tiny model's cached warm start came from the default loop, so its SFT keeps it; any other model's
    SFT (a cold start, SFT on verified samples) takes the fused kernel. One real SFT step of the tiny network each."""
    from reasoning_rl.models import sft
    from reasoning_rl.task.embedded.arithmetic import make_rows

    built = _optimisers_built(monkeypatch, sft)
    cfg = config.load(Config, overrides=["model.tiny.num_layers=1", "sft.steps=1", "sft.warmup_steps=1",
                                         f"model.name_or_path={name}"])
    model, tok = build_tiny(cfg)
    before = [p.detach().clone() for p in model.parameters()]
    sft.train_sft(cfg, model, tok, make_rows(cfg.tasks)[0][:16], log=lambda *_: None)
    assert len(built) == 1 and bool(built[0].param_groups[0]["fused"]) is fused
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it stepped


def test_dpo_steps_a_float32_model_fused(monkeypatch, tmp_path):
    """`train dpo` (our backend) on the tiny network: its optimiser is the fused one, and it trains."""
    from reasoning_rl.trainers import dpo

    built = _optimisers_built(monkeypatch, dpo)
    cfg = config.load(Config, overrides=["model.sft_warm_start=false", "model.tiny.num_layers=1", "eval.size=2",
                                         "dpo.lr=1e-2", "dpo.batch_size=8", "dpo.epochs=2", f"output_dir={tmp_path}"])
    rows = [{"prompt": f"{a}+{a}=", "chosen": str(2 * a), "rejected": str(2 * a + 1)} for a in range(8)]
    r = dpo.train_dpo(cfg, rows, log=lambda *_: None)
    assert len(built) == 1 and built[0].param_groups[0]["fused"] is True
    assert r.metrics["rewards/margins"] > 0


def test_the_tiny_prm_steps_fused_with_its_head_at_its_own_rate(monkeypatch, tmp_path):
    """`train prm` on the tiny network (two steps): one optimiser, fused, its body and its new head at their two
    learning rates."""
    from reasoning_rl.trainers import tiny_prm

    built = _optimisers_built(monkeypatch, tiny_prm)
    cfg = config.load(Config, overrides=[f"prm.output_dir={tmp_path}", "prm.steps=2", "prm.init_from_sft=false",
                                         "prm.num_train=40", "prm.num_test=8", "model.tiny.num_layers=1",
                                         "prm.lr=1e-4", "prm.head_lr=1e-2"])
    tiny_prm.train_prm(cfg, log=lambda *_: None)
    assert len(built) == 1 and all(g["fused"] for g in built[0].param_groups)
    assert all(g["params"] for g in built[0].param_groups)
    assert [g["initial_lr"] for g in built[0].param_groups] == [1e-4, 1e-2]  # (the schedule scales from these)
