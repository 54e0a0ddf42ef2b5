import json,base64,sys
nb=json.load(open('/work/main/chapters/06_positional_encoding.ipynb'))
print(nb['metadata'].keys())
for i,c in enumerate(nb['cells']):
    print(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={c.get('metadata',{}).get('tags')} exec={c.get('execution_count')}")
    print(''.join(c['source']))
    for j,o in enumerate(c.get('outputs',[])):
        if o['output_type']=='stream':
            print(f"--- out[{o['name']}]:\n"+''.join(o['text']))
        elif o['output_type'] in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f"figs/cell{i:02d}_{j}.png"; open(fn,'wb').write(base64.b64decode(d['image/png'])); print('--- [image]',fn)
            if 'text/plain' in d: print('--- out[text]:\n'+''.join(d['text/plain'])[:3000])
            if 'application/vnd.jupyter.widget-view+json' in d: print('--- [widget]')
        elif o['output_type']=='error':
            print('--- ERROR', o['ename'], o['evalue'][:2000])
