"""The commands that read finished runs: report, compare (significance), compare-objectives,
decompose, maxpool, neighbours and dashboard, with the page pieces they share.

May import: `mtl.runs` (the only reader of run folders), `mtl.eval` (encoders, the transfer
report file and registry), `mtl.tasks` (titles), the base layer (`mtl.config`, `mtl.metrics`,
`mtl.files`, `mtl.tracking`, `mtl.console`, `mtl.errors`). Never `mtl.train`: a test says so.
"""
