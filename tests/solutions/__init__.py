"""Reference solutions of the book's self-checked exercises, kept out of the book.

One module per chapter (``ch01.py``, ...), one function per checker, named after the checker
without ``check_`` (``check_softmax`` -> ``softmax``), with the parameters of the chapter's stub.
The bodies use only ``torch`` and builtins (they are pasted into nbgrader notebooks by
``python -m mtlib.assign``, where only the chapter's setup cell has run). ``catalogue.py`` lists,
for every checker, typical bugs it must reject and correct variants it must accept.
"""
