"""One optimizer step: the two strategies (`strategy`: one task a step; `mixed`: every task at
once), what a step hands the run (`outcome`), and what makes it fast or fit (`grad_buffer`,
`grad_cache`, `prefetch`; FSDP's wrapping is the run's setup: `mtl.train.run.sharding`)."""
