import json, base64, sys
nb = json.load(open('/work/main/chapters/01_attention_intuition.ipynb'))
out = open('dump.txt','w')
for i, c in enumerate(nb['cells']):
    out.write(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={c.get('metadata',{}).get('tags')} exec={c.get('execution_count')}\n")
    out.write(''.join(c['source'])+"\n")
    for j,o in enumerate(c.get('outputs',[])):
        t=o.get('output_type')
        if t=='stream':
            out.write(f"--- out[{j}] stream {o['name']}:\n"+''.join(o['text'])+"\n")
        elif t in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f'figs/cell{i}_{j}.png'; open(fn,'wb').write(base64.b64decode(d['image/png']))
                out.write(f"--- out[{j}] image -> {fn}\n")
            if 'text/plain' in d:
                out.write(f"--- out[{j}] text/plain:\n"+''.join(d['text/plain'])[:3000]+"\n")
            if 'application/vnd.jupyter.widget-view+json' in d:
                out.write(f"--- out[{j}] widget\n")
        elif t=='error':
            out.write(f"--- out[{j}] ERROR {o['ename']}: {o['evalue'][:2000]}\n")
print(len(nb['cells']))
