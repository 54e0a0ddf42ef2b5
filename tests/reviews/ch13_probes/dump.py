import json, base64, sys
nb = json.load(open('/work/main/chapters/13_distributed.ipynb'))
out = open('/tmp/reviews/ch13_scratch/dump.txt','w')
for i, c in enumerate(nb['cells']):
    out.write(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={c.get('metadata',{}).get('tags')} ec={c.get('execution_count')}\n")
    out.write(''.join(c['source'])+'\n')
    for o in c.get('outputs', []):
        if o['output_type']=='stream':
            out.write(f"--- {o['name']}:\n"+''.join(o['text']))
        elif o['output_type'] in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f'/tmp/reviews/ch13_scratch/fig_cell{i}_{len(d)}_{o.get("output_type")}.png'
                import os
                k=0
                while os.path.exists(fn): k+=1; fn=f'/tmp/reviews/ch13_scratch/fig_cell{i}_{k}.png'
                open(fn,'wb').write(base64.b64decode(d['image/png']))
                out.write(f"--- [image saved {fn}]\n")
            if 'text/plain' in d:
                out.write("--- result:\n"+''.join(d['text/plain'])+'\n')
            if 'application/vnd.jupyter.widget-view+json' in d:
                out.write("--- [widget]\n")
        elif o['output_type']=='error':
            out.write(f"--- ERROR {o['ename']}: {o['evalue']}\n")
print(len(nb['cells']))
