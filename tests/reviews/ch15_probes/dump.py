import json, base64, sys
nb = json.load(open('/work/main/chapters/15_transformer_xl.ipynb'))
out = []
for i, c in enumerate(nb['cells']):
    src = ''.join(c['source'])
    tags = c.get('metadata', {}).get('tags', [])
    out.append(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={tags} exec={c.get('execution_count')}\n{src}")
    for j, o in enumerate(c.get('outputs', [])):
        if o['output_type'] == 'stream':
            out.append(f"--- out[{o['name']}]:\n" + ''.join(o['text']))
        elif o['output_type'] in ('execute_result', 'display_data'):
            d = o['data']
            if 'image/png' in d:
                fn = f"figs/fig_{i}_{j}.png"
                open(fn, 'wb').write(base64.b64decode(d['image/png']))
                out.append(f"--- out[image] -> {fn}")
            if 'text/plain' in d and 'image/png' not in d:
                out.append("--- out[text]:\n" + ''.join(d['text/plain']))
            if 'application/vnd.jupyter.widget-view+json' in d:
                out.append("--- out[widget]")
        elif o['output_type'] == 'error':
            out.append(f"--- out[error]: {o['ename']}: {o['evalue']}")
open('dump.txt', 'w').write('\n'.join(out))
print(len(nb['cells']))
