"""Text: tokenizing (tokenizer.py, spaCy), word vectors (vectors.py), reading user text (unicode.py).

Import each from its module: reading a run folder's text files needs no spaCy.
"""
