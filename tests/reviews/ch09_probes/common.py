import sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, "/work/main")
from mtlib.experiments import bert_mlm as bm
