"""What a run reads and scores: its data tokenized once (`training_data`), which task trains at
each step (`scheduler`), embeddings and task metrics (`embed`, `evaluate`, `probe`), a teacher's
embeddings (`teacher`) and the words an exported encoder carries (`shared_words`)."""
