from common import *
mlm, vocab, report = bm.load_checkpoint()
tr, he = bm.task_data(vocab)
t=time.process_time(); torch.manual_seed(0)
m = bm.classifier_from_pretrained(mlm, vocab); bm.finetune(m, tr, bm.FinetuneSettings(), seed=0)
print("150 steps cpu s", round(time.process_time()-t,2), "acc", bm.accuracy(m, he), "report", report["finetune"]["0"]["heldout"]["pretrained"])
t=time.process_time(); s=bm.seconds_per_batch(m, he, repeats=3); print("fwd 180 phrases", s*1000, "ms; cpu", time.process_time()-t)
