import json,base64,sys
nb=json.load(open('/work/main/chapters/08_encoder_decoder.ipynb'))
print(nb['metadata'])
for i,c in enumerate(nb['cells']):
    print(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={c.get('metadata',{}).get('tags')} exec={c.get('execution_count')}")
    print(''.join(c['source']))
    for j,o in enumerate(c.get('outputs',[])):
        if o['output_type']=='stream':
            print(f"--- out[{o['name']}]:"); print(''.join(o['text']))
        elif o['output_type'] in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f"figs/cell{i}_{j}.png"; open(fn,'wb').write(base64.b64decode(d['image/png'])); print('--- IMAGE',fn)
            if 'text/plain' in d: print('--- out[text]:',''.join(d['text/plain'])[:3000])
            if 'application/vnd.jupyter.widget-view+json' in d: print('--- WIDGET')
            if 'text/html' in d: print('--- HTML', ''.join(d['text/html'])[:500])
        elif o['output_type']=='error':
            print('--- ERROR', o['ename'], o['evalue'][:2000])
