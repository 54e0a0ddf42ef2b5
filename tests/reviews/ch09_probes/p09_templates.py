from common import *
mlm, vocab, report = bm.load_checkpoint()
tr, he = bm.task_data(vocab)
held = [p for p in bm.phrases() if p.heldout]
for seed in (1, 3):
    torch.manual_seed(seed); m = bm.classifier_from_pretrained(None, vocab)
    bm.finetune(m, tr, bm.FinetuneSettings(), seed=seed); m.eval()
    with torch.no_grad(): ok = (m(he[0], attention_mask=he[1]).argmax(-1) == he[2])
    row = {}
    for t in bm.TEMPLATES:
        sel = torch.tensor([p.template == t for p in held]); row[t] = round(ok[sel].float().mean().item(), 2)
    wrong = [p.text for p, o in zip(held, ok) if not o][:12]
    print("scratch seed", seed, row, "\n   some errors:", wrong)
