import sys, hashlib
from pydoc_data.topics import topics
text = "\n".join(topics[k] for k in sorted(topics))
chars = sorted(set(text))
print(sys.version.split()[0], "len", len(text), "vocab", len(chars), "md5", hashlib.md5(text.encode()).hexdigest()[:10])
print("chars", repr("".join(chars)))
cut = int(len(text)*0.9)
print("val starts", repr(text[cut:cut+60]))
