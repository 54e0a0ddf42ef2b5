from common import *
import warnings; warnings.filterwarnings("ignore")
import transformers
from transformers import BertConfig as HC, BertModel, BertForSequenceClassification as HSC
from mtlib.models import BERT
from mtlib.models.bert import BERTForSequenceClassification
print("transformers", transformers.__version__, "torch", torch.__version__)
torch.manual_seed(0)
hc = HC(vocab_size=53, hidden_size=30, num_hidden_layers=2, num_attention_heads=5, intermediate_size=37, max_position_embeddings=20,
        type_vocab_size=2, hidden_act="gelu", attn_implementation="eager")
hf = BertModel(hc).eval()
ours = BERT.from_hf(hf)
ids = torch.randint(1, 53, (3, 9)); am = torch.ones(3, 9, dtype=torch.long); am[1, 6:] = 0; am[2, :] = 0  # row 2 fully padded
tt = torch.zeros_like(ids); tt[:, 5:] = 1
with torch.no_grad():
    a = hf(input_ids=ids, attention_mask=am, token_type_ids=tt).last_hidden_state; b = ours(ids, tt, am)
print("fp32 max|diff| real rows:", (a[:2] - b[:2]).abs()[am[:2].bool()].max().item(), "; fully padded row:", (a[2] - b[2]).abs().max().item())
print("pooled of fully padded row differs:", (hf(input_ids=ids, attention_mask=am, token_type_ids=tt).pooler_output[2] - ours.pool(b)[2]).abs().max().item())
for dt in (torch.bfloat16, torch.float16):
    try:
        h2 = BertModel(hc).eval(); h2.load_state_dict(hf.state_dict()); h2 = h2.to(dt)
        o2 = BERT.from_hf(h2)
        print(dt, "from_hf param dtype:", next(o2.parameters()).dtype)
        with torch.no_grad():
            x = h2(input_ids=ids[:2], attention_mask=am[:2], token_type_ids=tt[:2]).last_hidden_state.float(); y = o2(ids[:2], tt[:2], am[:2]).float()
        ref = b[:2]; m = am[:2].bool()
        print(f"  {dt}: |HF-fp32| {(x-ref).abs()[m].max().item():.3g}  |mtlib-fp32| {(y-ref).abs()[m].max().item():.3g}")
    except Exception as e:
        print(dt, "ERROR", type(e).__name__, str(e)[:200])
# 3-D attention mask (HF accepts (B, T, T))
try:
    ours(ids, tt, am[:, None, :].expand(3, 9, 9)); print("3-D mask accepted")
except Exception as e: print("3-D mask:", type(e).__name__, str(e)[:120])
# classifier_dropout
hc2 = HC(**{**hc.to_dict(), "classifier_dropout": 0.5, "num_labels": 3})
hsc = HSC(hc2); osc = BERTForSequenceClassification.from_hf(hsc)
print("HF classifier dropout p =", hsc.dropout.p, "; mtlib's after from_hf p =", osc.dropout.p)
# train/eval: from_hf of a model in train mode
hf.train(); o3 = BERT.from_hf(hf); print("from_hf(train-mode HF) -> mtlib training:", o3.training, "; HF still training:", hf.training)
# pad row gradient: mtlib tok_embed padding_idx
print("padding_idx mtlib:", ours.tok_embed.padding_idx, "HF:", hf.embeddings.word_embeddings.padding_idx)
# position_ids / left padding
