from common import *
from collections import Counter, defaultdict
mlm, vocab, report = bm.load_checkpoint()
ph = bm.phrases()
def toks(p, space=False): return tuple(sorted(vocab.encode((" " if space else "") + p.text)))
for space in (False, True):
    groups = defaultdict(list)
    for p in ph: groups[toks(p, space)].append(p)
    # best order-blind classifier, trained on everything (oracle): majority label per multiset
    def best(subset):
        ok = 0
        for p in subset:
            labs = Counter(q.label for q in groups[toks(p, space)])
            ok += labs[p.label] >= max(labs.values()) and (labs[p.label] > len(groups[toks(p, space)]) / 2 or True)
        return ok / len(subset)
    # strict: phrase is ambiguous if its multiset is shared with an opposite-label phrase
    amb = [p for p in ph if len({q.label for q in groups[toks(p, space)]}) > 1]
    held = [p for p in ph if p.heldout]
    print(f"leading_space={space}: {len(amb)} of {len(ph)} phrases share their token multiset with an opposite-label phrase; "
          f"held-out: {sum(p in amb for p in held)} of {len(held)}")
    # upper bound on held-out accuracy for an order-blind model: ambiguous pairs -> at most 1/2 of each pair
    ub = sum(1 if p not in amb else 0.5 for p in held) / len(held)
    print(f"   upper bound for any order-blind model on held-out: {ub:.3f}")
    by_t = Counter(p.template for p in held if p in amb)
    print("   ambiguous held-out per template:", dict(by_t))
# coverage: for each held-out phrase, is (template, a) and (template, b) seen in training?
train = [p for p in ph if not p.heldout]
seen_ta = {(p.template, p.a) for p in train}; seen_tb = {(p.template, p.b) for p in train}
held = [p for p in ph if p.heldout]
print("held-out two-word phrases whose (template, first word) AND (template, second word) are both seen in training:",
      sum((p.template, p.a) in seen_ta and (p.template, p.b) in seen_tb for p in held if "{b}" in p.template), "of", sum("{b}" in p.template for p in held))
mirror = {(p.template, p.b, p.a) for p in train}
print("held-out two-word phrases whose mirror (same template, words swapped) is in training:",
      sum((p.template, p.a, p.b) in mirror for p in held if "{b}" in p.template))
one = [p for p in held if p.template in ("{a}",)]
print("held-out one-word phrases:", [p.text for p in one], "; their 'not {a}' in training:", [("not " + p.a) in {q.text for q in train} for p in one])
print("every word in every slot of training? missing (template, slot, word):",
      [(t, s, w) for t in bm.TEMPLATES for s in ("a","b") if (s=="a" or "{b}" in t) for w in bm.POSITIVE+bm.NEGATIVE
       if not any(p.template==t and getattr(p,s)==w for p in train)])
lens = [len(vocab.encode(p.text)) + 2 for p in ph]
print("phrase lengths (tokens incl. CLS/SEP): min", min(lens), "max", max(lens))
