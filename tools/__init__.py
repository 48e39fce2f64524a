"""Developer tools, run from a checkout and never imported by `mtl`: the benchmarks behind
`just bench-*` (timings printed as medians of repeated runs), the calibrations of the verdicts,
`just fuzz` and `just gpu-check`."""
