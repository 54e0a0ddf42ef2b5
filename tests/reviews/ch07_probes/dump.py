import json, base64, sys
nb = json.load(open('/work/main/chapters/07_transformer_block.ipynb'))
out = open('dump.txt','w')
for i, c in enumerate(nb['cells']):
    out.write(f"\n===== CELL {i} [{c['cell_type']}] id={c.get('id')} tags={c.get('metadata',{}).get('tags')} exec={c.get('execution_count')}\n")
    out.write(''.join(c['source'])+"\n")
    for j,o in enumerate(c.get('outputs',[])):
        if o['output_type']=='stream':
            out.write(f"--- {o['name']}:\n"+''.join(o['text'])+"\n")
        elif o['output_type'] in ('execute_result','display_data'):
            d=o['data']
            if 'image/png' in d:
                fn=f'fig_{i}_{j}.png'; open(fn,'wb').write(base64.b64decode(d['image/png'])); out.write(f"--- [image {fn}]\n")
            if 'text/plain' in d: out.write("--- text/plain:\n"+''.join(d['text/plain'])+"\n")
            if 'application/vnd.jupyter.widget-view+json' in d: out.write("--- [widget]\n")
        elif o['output_type']=='error':
            out.write(f"--- ERROR {o['ename']}: {o['evalue']}\n")
print(len(nb['cells']))
