import json,base64,sys
nb=json.load(open('/work/main/chapters/09_bert.ipynb'))
out=open('dump.txt','w')
for i,c in enumerate(nb['cells']):
    out.write(f"\n===== CELL {i} id={c.get('id')} type={c['cell_type']} tags={c.get('metadata',{}).get('tags')} exec={c.get('execution_count')}\n")
    out.write(''.join(c['source'])+'\n')
    for j,o in enumerate(c.get('outputs',[])):
        if o['output_type']=='stream':
            out.write(f"--- stream {o['name']}:\n"+''.join(o['text'])+'\n')
        elif o['output_type'] in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f'figs/cell{i:02d}_{j}.png'; open(fn,'wb').write(base64.b64decode(d['image/png'])); out.write(f"--- image {fn}\n")
            if 'text/plain' in d: out.write('--- text/plain:\n'+''.join(d['text/plain'])[:3000]+'\n')
            if 'application/vnd.jupyter.widget-view+json' in d: out.write('--- widget\n')
        elif o['output_type']=='error':
            out.write(f"--- error {o['ename']}: {o['evalue'][:2000]}\n")
