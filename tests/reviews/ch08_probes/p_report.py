import torch; torch.set_num_threads(1)
from mtlib.experiments import translation as tr
m, rep = tr.load_checkpoint()
print(rep['settings'], rep['heldout_sample'])
for k,v in rep['runs'].items():
    print(k, {kk: vv for kk,vv in v.items() if kk not in ('loss','evals','errors')})
    if 'evals' in v: print('  evals', v['evals'])
    if 'loss' in v: 
        L=v['loss']; print('  loss@400', L[399], 'mean 390-410', sum(L[390:410])/20, 'last50', sum(L[-50:])/50)
h = tr.heldout_sample()
n = h.numbers
print('distinct in heldout sample', len(set(n.tolist())))
for d in range(3,7):
    sel = [x for x in n.tolist() if len(str(x))==d]
    print(d, 'draws', len(sel), 'distinct', len(set(sel)))
from mtlib.data import is_heldout
allh = tr.heldout_numbers()
for d in range(3,7):
    lo,hi=10**(d-1),10**d
    tot=hi-lo; k=int(((allh>=lo)&(allh<hi)).sum()); print('digits',d,'heldout',k,'of',tot, f'{k/tot:.3f}')
