import torch
torch.set_num_threads(1)
from mtlib.experiments import digits as dg
from mtlib.models import attention_rollout
_, report = dg.load_checkpoint()
runs = report["runs"]
for k in ("rollout_inked","ink_inked","last_layer_inked","grad_input_inked","top1_grad_input"):
    print(k, [round(runs[f"vit/{s}"]["agreement"][k],3) for s in dg.SEEDS])
print("nopos test acc", [runs[f"vit_nopos/{s}"]["test_accuracy"] for s in dg.SEEDS])
print("worst ViT seed correct:", round(min(runs[f"vit/{s}"]["test_accuracy"] for s in dg.SEEDS)*359), "; needed for >= 97%:", next(k for k in range(360) if k/359 >= 0.97))
# class token's own rollout share: lower bound by construction (alpha=0.5, 3 layers)
g = torch.Generator().manual_seed(0)
unif = [torch.full((1,1,17,17), 1/17)]*3
print("rollout own share with UNIFORM attention:", round(attention_rollout(unif)[0,0,0].item(),3), "patch share", round(attention_rollout(unif)[0,0,1].item(),3), "; lower bound 0.5^3 =", 0.125)
print("vit seconds per run:", [round(runs[f"vit/{s}"]["seconds"]) for s in dg.SEEDS], "cnn", [round(runs[f"cnn/{s}"]["seconds"]) for s in dg.SEEDS], "mlp", [round(runs[f"mlp/{s}"]["seconds"]) for s in dg.SEEDS])
print(report["settings"])
