from mtl.cli import run_as_process

run_as_process()
