from mtl.text.tokenizer import Tokenizer
from mtl.text.vectors import WordVectors, load_vectors, resolve_vectors_path

__all__ = ["Tokenizer", "WordVectors", "load_vectors", "resolve_vectors_path"]
