"""What mtl writes and reads back: the exported encoder (`encoder_file`), the training checkpoint
(`checkpoint`), the transfer report (`transfer_report`) and SentEval's results layout
(`senteval_format`). Below training, evaluation and the run folders, so each of them (and a
command that only reads) uses a format without importing the code that writes it.
"""
