"""Files and where they live: atomic writes (`atomic`), JSON (`jsonfile`), one-writer locks
(`locks`), data and cache folders (`paths`), Hub ids or local model folders (`hub`).

The base layer: imports nothing of mtl but `mtl.errors` and `mtl.console`.
"""
