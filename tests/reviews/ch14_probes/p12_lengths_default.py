# Probe 12 (review fix 4): tp.task_examples' new `lengths=` keeps the default draws identical to
# the committed randint(3, 8) code: same examples and the same generator state afterwards.
import importlib.util, sys, torch
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
spec = importlib.util.spec_from_file_location("tp_head", sys.argv[1] if len(sys.argv) > 1 else "/tmp/ch14ex/tp_head.py")
old = importlib.util.module_from_spec(spec); sys.modules["tp_head"] = old; spec.loader.exec_module(old)
for task in tp.TASKS:
    for split in ("train", "heldout"):
        g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        a = tp.task_examples(task, 500, split=split, generator=g1)
        b = old.task_examples(task, 500, split=split, generator=g2)
        assert a == b and torch.equal(g1.get_state(), g2.get_state()), (task, split)
for step in range(3):
    a, b = tp.task_stream(tp.TASKS, 96, 0)(step), old.task_stream(old.TASKS, 96, 0)(step)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
for task in tp.TASKS:
    assert torch.equal(tp.heldout_task_batch(task).input_ids, old.heldout_task_batch(task).input_ids)
print("default lengths: identical examples, generator states, stream batches and held-out batches")
