import json, base64, sys
nb = json.load(open('/work/main/chapters/12_efficient_attention.ipynb'))
out = open('/tmp/reviews/ch12_scratch/dump.txt','w')
for i, c in enumerate(nb['cells']):
    src = ''.join(c['source'])
    tags = c.get('metadata',{}).get('tags',[])
    out.write(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={tags} exec={c.get('execution_count')}\n{src}\n")
    for j, o in enumerate(c.get('outputs',[])):
        if o['output_type']=='stream':
            out.write(f"--- out ({o['name']}):\n{''.join(o['text'])}\n")
        elif o['output_type'] in ('execute_result','display_data'):
            d = o['data']
            if 'image/png' in d:
                fn = f"/tmp/reviews/ch12_scratch/figs/cell{i}_{j}.png"
                open(fn,'wb').write(base64.b64decode(d['image/png']))
                out.write(f"--- [image saved {fn}]\n")
            if 'text/plain' in d:
                out.write(f"--- result:\n{''.join(d['text/plain'])[:2000]}\n")
            if 'application/vnd.jupyter.widget-view+json' in d:
                out.write("--- [widget]\n")
        elif o['output_type']=='error':
            out.write(f"--- ERROR {o['ename']}: {o['evalue'][:1500]}\n")
print(len(nb['cells']))
