"""mtlib.distributed and the chapter 13 worker script (mtlib.experiments.ddp).

Pure unit tests (no process group) for the sampler, seeding and the single-process fallbacks;
then real launches of ``torchrun`` with 2 processes, gloo on the CPU, on 127.0.0.1 only:

- one ``--standalone`` launch: DDP gradients equal one process's full-batch gradients (atol
  1e-6), also with no_sync accumulation; rank-0 checkpointing; per-step losses of DDP, ZeRO and
  FSDP2 equal the single-process run's; the sharded state per rank is about half;
- two launches as two "nodes" (``--nnodes 2 --node_rank 0/1``, static rendezvous on a free
  localhost port): the same losses as the standalone launch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mtlib import distributed as du
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT

STEPS = 8  # steps of each training run in the launches (a few seconds)
TIMEOUT = 240  # seconds; a launch takes about 10-20 s on a busy 2-core machine


# --------------------------------------------------------------------------------------------
# Unit tests: no process group
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 10, 13])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shard_indices_equal_distributed_sampler(n, world_size, shuffle, drop_last):
    for epoch in (0, 3):
        for rank in range(world_size):
            sampler = torch.utils.data.DistributedSampler(
                range(n), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=5,
                drop_last=drop_last,
            )  # fmt: skip
            sampler.set_epoch(epoch)
            mine = du.shard_indices(
                n, rank, world_size, shuffle=shuffle, seed=5, epoch=epoch, drop_last=drop_last
            )
            assert mine == list(sampler)


def test_shards_partition_or_pad_the_dataset():
    shards = [du.shard_indices(10, r, 4) for r in range(4)]
    assert shards == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]  # padded with 0, 1
    dropped = [du.shard_indices(10, r, 4, drop_last=True) for r in range(4)]
    assert dropped == [[0, 4], [1, 5], [2, 6], [3, 7]]  # 8 and 9 are not read this epoch
    shuffled = [du.shard_indices(12, r, 3, shuffle=True, seed=1) for r in range(3)]
    assert sorted(sum(shuffled, [])) == list(range(12))  # a partition when world divides n
    assert du.shard_indices(3, 1, 5) == [1]  # n < world: the order repeats to give each rank one
    assert du.shard_indices(3, 4, 5) == [1]
    assert du.shard_indices(12, 0, 3, shuffle=True, epoch=1) != du.shard_indices(
        12, 0, 3, shuffle=True, epoch=0
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 1), "n must be an int >= 1"),
        ((5, 0, 0), "world_size must be an int >= 1"),
        ((5, 2, 2), r"rank must be an int in \[0, world_size=2\)"),
        ((5, -1, 2), "rank must be"),
        ((5.0, 0, 1), "n must be"),
    ],
)
def test_shard_indices_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        du.shard_indices(*args)


def test_env_from_torchrun_variables(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert du.get_env() == du.DistEnv()  # a plain `python script.py`: one process
    assert du.setup() == du.DistEnv()  # no WORLD_SIZE: no process group, nothing to join
    assert du.is_main()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    env = du.get_env()
    assert (env.rank, env.local_rank, env.world_size) == (3, 1, 4)
    assert not du.is_main()
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK must be an integer"):
        du.get_env()
    with pytest.raises(ValueError, match="backend must be"):
        du.setup("mpi")


def test_seed_all_same_or_per_rank(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert du.seed_all(7) == 7
    a = torch.rand(3)
    assert du.seed_all(7, per_rank=True) == 9
    b = torch.rand(3)
    du.seed_all(9)
    assert torch.equal(b, torch.rand(3)) and not torch.equal(a, b)
    du.print0("not printed on rank 2")
    du.rank_print("hello")
    assert capsys.readouterr().out == "[rank 2/4] hello\n"
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        du.seed_all(-1)


def test_single_process_fallbacks(tmp_path):
    assert du.all_reduce_mean(torch.tensor(2.5)) == 2.5
    du.save_on_rank0({"w": torch.arange(3)}, tmp_path / "c.pt")
    assert torch.equal(du.load_from_rank0(tmp_path / "c.pt")["w"], torch.arange(3))
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(TypeError, match="must hold a dict"):
        du.load_from_rank0(tmp_path / "list.pt")


def test_accumulated_gradients_equal_full_batch_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    x, y = torch.randn(12, 5), torch.randn(12, 3)

    def loss_fn(m, batch):
        return nn.functional.mse_loss(m(batch[0]), batch[1])

    loss_fn(model, (x, y)).backward()
    full = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    micro = [(x[i : i + 4], y[i : i + 4]) for i in range(0, 12, 4)]
    mean_loss = du.accumulate_gradients(model, micro, loss_fn)  # no DDP: no no_sync either
    assert mean_loss == pytest.approx(loss_fn(model, (x, y)).item(), abs=1e-6)
    for p, g in zip(model.parameters(), full, strict=True):
        torch.testing.assert_close(p.grad, g, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="at least one micro-batch"):
        du.accumulate_gradients(model, [], loss_fn)


@pytest.mark.parametrize("seed", [0, 3])
def test_global_batch_is_the_union_of_the_rank_shards(seed):
    data = exp.dataset()
    assert data.shape == (exp.NUM_SEQUENCES, exp.SEQ_LEN + 1) and int(data.max()) < 96
    for step in (0, 5):
        union = torch.cat([data[du.shard_indices(len(data), r, 2, shuffle=True, seed=seed)][
            step * 8 : (step + 1) * 8] for r in range(2)])  # fmt: skip
        whole = exp.global_batch(data, step, seed=seed)
        assert sorted(map(tuple, union.tolist())) == sorted(map(tuple, whole.tolist()))


def test_reference_run_uses_its_seed_for_the_model_and_the_data():
    torch.set_num_threads(1)
    du.seed_all(3)
    model = GPT(exp.model_config())
    first = exp.loss_fn(model, exp.global_batch(exp.dataset(), 0, seed=3)).item()
    assert exp.reference_losses(1, seed=3)[0] == pytest.approx(first, abs=1e-6)


# --------------------------------------------------------------------------------------------
# Launches: torchrun, 2 processes, gloo, localhost only
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def standalone() -> dict:
    return exp.launch("grads,ddp,zero,fsdp,wire", steps=STEPS, short_steps=STEPS, timeout_s=TIMEOUT)


@pytest.fixture(scope="module")
def reference() -> list[float]:
    torch.set_num_threads(1)
    return exp.reference_losses(STEPS)


def test_ddp_gradients_equal_full_batch_gradients(standalone):
    grads = standalone["runs"]["grads"]
    assert standalone["world_size"] == 2 and standalone["backend"] == "gloo"
    assert grads["ddp_grad_gap"] < 1e-6
    assert grads["accumulated_grad_gap"] < 1e-6  # two micro-batches under no_sync
    assert grads["allreduces_one_batch"] == 1  # one bucket: 62,784 parameters < 25 MB
    assert grads["allreduces_accumulated"] == 1  # no_sync: no all-reduce for micro-batch 1
    assert grads["checkpoint_equal_on_every_rank"] is True


def test_ddp_zero_fsdp_losses_equal_one_process(standalone, reference):
    for run in ("ddp", "zero", "fsdp"):
        losses = standalone["runs"][run]["loss"]
        assert len(losses) == STEPS
        assert max(abs(a - b) for a, b in zip(losses, reference, strict=True)) < 1e-4, run


def test_communication_volume_and_sharded_state(standalone):
    ddp, zero, fsdp = (standalone["runs"][r] for r in ("ddp", "zero", "fsdp"))
    params = ddp["params_total"]
    assert params == GPT(exp.model_config()).num_parameters() == 62784
    assert ddp["allreduce_bytes_per_step"] == 4 * params  # every float32 gradient, once
    assert ddp["state_per_rank"] == [2 * params, 2 * params]  # AdamW: exp_avg, exp_avg_sq
    for per_rank in (zero["state_per_rank"], fsdp["state_per_rank"]):
        assert sum(per_rank) == 2 * params  # each state number lives on exactly one rank
        assert all(0.4 < s / (2 * params) < 0.6 for s in per_rank)
    assert abs(fsdp["params_local"] / params - 0.5) < 0.01


def test_two_nodes_on_localhost_give_the_same_losses(standalone):
    report = exp.launch("ddp", nodes=2, nproc_per_node=1, steps=STEPS, timeout_s=TIMEOUT)
    assert report["world_size"] == 2
    assert "--node_rank=1" in report["commands"][1] and "127.0.0.1" in report["commands"][1]
    two_nodes, one_node = report["runs"]["ddp"]["loss"], standalone["runs"]["ddp"]["loss"]
    assert max(abs(a - b) for a, b in zip(two_nodes, one_node, strict=True)) < 1e-6


def test_bytes_on_the_wire_match_the_ring_formula(standalone):
    wire = standalone["runs"]["wire"]
    assert wire["numbers"] == 62784 and list(wire["sent_per_allreduce"]) == ["2"]
    ring = 2 * (2 - 1) / 2 * 8 * wire["numbers"]  # bytes per worker, float64
    assert 0.98 <= wire["sent_per_allreduce"]["2"] / 2 / ring <= 1.1  # + TCP/IP headers


def test_fsdp_does_not_broadcast_differently_seeded_models(standalone):
    fsdp = standalone["runs"]["fsdp"]
    assert fsdp["seed_rank_tensors"] == 36  # GPT's parameters, the tied embedding once
    assert 0 < fsdp["seed_rank_differ"] < 36 and fsdp["seed_rank_max_gap"] > 0.01


def test_loopback_counter_and_uneven_shares():
    assert exp.loopback_tx_bytes() >= 0  # Linux's /proc/net/dev has an "lo" line
    assert exp._uneven_sizes(2) == [12, 4] and exp._uneven_sizes(4) == [5, 5, 4, 2]
    assert sum(exp._uneven_sizes(3)) == exp.GLOBAL_BATCH


def test_worker_options_uneven_weighted_small_buckets():
    options = ("--uneven-sampler", "--weight-loss", "--bucket-cap-mb", "0.05", "--n-layer", "3")
    report = exp.launch("ddp", steps=5, dtype="float64", options=options, timeout_s=TIMEOUT)
    ddp = report["runs"]["ddp"]
    assert ddp["buckets_per_step"] > 2 and sum(ddp["bucket_bytes"]) == 8 * ddp["params_total"]
    assert ddp["params_total"] == GPT(exp.model_config(3)).num_parameters()
    data = exp.dataset()
    exp.du.seed_all(0)
    model = GPT(exp.model_config(3)).double()
    torch.set_num_threads(1)
    history = exp.train.fit(
        model, exp.loss_fn, lambda s: exp.global_batch(data, s), steps=5, lr=exp.LR, seed=0
    )
    # shares 12 and 4, each loss weighted by N n_r / B: the global batch's gradient again
    assert max(abs(a - b) for a, b in zip(ddp["loss"], history.loss, strict=True)) < 1e-10


def test_minimal_ddp_script_trains(tmp_path):
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "mtlib.experiments.ddp_minimal"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    losses = [
        float(line.split()[-1]) for line in done.stdout.splitlines() if line.startswith("epoch")
    ]
    assert len(losses) == 2 and losses[1] < 3.6  # from about 4.5 at step 0


def test_the_seed_shift_reaches_the_torchrun_workers(monkeypatch, reference):
    # Under the seed sweep (MTLIB_SEED_SHIFT) the chapter's one-process reference is shifted; the
    # workers must shift their seeds too, or every comparison with them fails for that reason.
    import json
    import os
    import subprocess
    import sys

    monkeypatch.setenv("MTLIB_SEED_SHIFT", "1000")
    code = ("import json, torch; from mtlib import utils; utils.apply_seed_shift(); "
            "torch.set_num_threads(1); from mtlib.experiments import ddp; "
            f"print(json.dumps(ddp.reference_losses({STEPS})))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True,
                         text=True, timeout=TIMEOUT, check=True)
    shifted_reference = json.loads(out.stdout.strip().splitlines()[-1])
    losses = exp.launch("ddp", steps=STEPS, short_steps=STEPS, timeout_s=TIMEOUT)["runs"]["ddp"]["loss"]
    assert max(abs(a - b) for a, b in zip(losses, shifted_reference, strict=True)) < 1e-4
    assert max(abs(a - b) for a, b in zip(shifted_reference, reference, strict=True)) > 1e-3
