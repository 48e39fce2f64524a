# mtl: multitask sentence encoders on SNLI + ClassifSQuAD. Options are key=value.
set positional-arguments := true
# mtl prints its own one-line error or summary: no echo of each command line, no second
# "recipe failed" line after it (needs just 1.39).
set quiet := true
set no-exit-message := true

python := env("PYTHON", "python3")

# the commands, a user's first (`just --list`); then each group's
[private]
default:
    @just --list --unsorted

# SQuAD v1.1 -> ClassifSQuAD triples on disk (e.g. scope=paragraph out=data/cs)
build-classifsquad *args:
    {{python}} -m mtl build-classifsquad "$@"

# SentEval's transfer and probing data from their sources, checked (e.g. out=data/senteval tasks=MR,STS14)
get-senteval *args:
    {{python}} -m mtl get-senteval "$@"

# multitask training (e.g. steps_nli=1000 steps_squad=500, tasks=nli,squad,experiments/tasks/sick.toml, preset=cpu-small, resume=runs/<run>)
train-multitask *args:
    {{python}} -m mtl train-multitask "$@"

# multitask training over N processes of this machine with torchrun (e.g. just train-distributed 4 steps_nli=1000)
train-distributed *args:
    {{python}} -m mtl train-distributed "$@"

# a grid of runs in one W&B group (e.g. just sweep fig2 preset=cpu-small, or steps_nli=250,500 parallel=2)
sweep *args:
    {{python}} -m mtl sweep "$@"

# where each run of a study stands: state, step, time left, SLURM job (e.g. just status runs/sweeps/fig2)
status *args:
    {{python}} -m mtl status "$@"

# stop a study's SLURM jobs; each run checkpoints and stays resumable (e.g. just cancel runs/sweeps/fig2)
cancel *args:
    {{python}} -m mtl cancel "$@"

# one HTML page of plots and results from run folders (e.g. just report runs/sweeps/fig2, or group=fig2)
report *args:
    {{python}} -m mtl report "$@"

# SentEval-style transfer evaluation (e.g. run=runs/<run> tasks=MR,CR mode=fast, baseline=glove-bow, or baseline=hf hf_model=...)
transfer *args:
    {{python}} -m mtl transfer "$@"

# transfer results of runs compared per task and across tasks, with intervals over seeds and items (e.g. just compare runs/a runs/b report=transfer-fast)
compare *args:
    {{python}} -m mtl compare "$@"

# a run's encoder for sharing, carrying only words of the public vectors file (e.g. run=runs/<run> out=shared/enc)
export-encoder *args:
    {{python}} -m mtl export-encoder "$@"

# seeds per arm to detect a difference with 80% power, from a pilot (e.g. just plan-seeds runs/sweeps/pilot difference=2 report=transfer-fast)
[group('evaluate')]
plan-seeds *args:
    {{python}} -m mtl plan-seeds "$@"

# a run's transfer accuracy by sentence length, OOV rate and label (e.g. run=runs/<run> report=transfer-fast)
[group('evaluate')]
decompose *args:
    {{python}} -m mtl decompose "$@"

# which words max pooling picks over a corpus, trained next to untrained (e.g. run=runs/<run> limit=5000)
[group('evaluate')]
maxpool *args:
    {{python}} -m mtl maxpool "$@"

# a transfer task's sentences laid out by t-SNE, coloured by label (e.g. run=runs/<run> task=TREC out=trec.html)
[group('evaluate')]
tsne *args:
    {{python}} -m mtl tsne "$@"

# nearest neighbours of a sentence among a pool's (e.g. run=runs/<run> query="a man plays a guitar ." pool=sentences.txt)
[group('evaluate')]
neighbours *args:
    {{python}} -m mtl neighbours "$@"

# probing tasks: SentEval's (data=PATH) or generated (e.g. run=runs/<run> generate=sentence_length,word_content,bigram_shift)
[group('evaluate')]
probing *args:
    {{python}} -m mtl probing "$@"

# a paper-* or infersent-* run beside its paper's published row: reproduced, not reproduced or not comparable (e.g. run=runs/<run>)
[group('evaluate')]
reproduce *args:
    {{python}} -m mtl reproduce "$@"

# MTEB tasks on a run's encoder, beside SentEval's (e.g. run=runs/<run> tasks=STSBenchmark,Banking77Classification; needs pip install mteb)
[group('evaluate')]
mteb *args:
    {{python}} -m mtl mteb "$@"

# a saved W&B workspace with mtl's panels (online; e.g. group=fig2, or spec=workspace.json offline)
[group('evaluate')]
dashboard *args:
    {{python}} -m mtl dashboard "$@"

# a finished run's contamination ledger computed again (e.g. run=runs/<run>): then transfer scores without the seen items
[group('evaluate')]
ledger *args:
    {{python}} -m mtl ledger "$@"

# one encoder from several trained from one initialisation: just merge-encoders run=A run=B method=ties out=...
[group('encoder files')]
merge-encoders *args:
    {{python}} -m mtl merge-encoders "$@"

# a run's sentence-transformers folder and card to the Hugging Face Hub (e.g. run=runs/<run> repo=me/my-encoder; log in with `hf auth login`)
[group('encoder files')]
push-encoder *args:
    {{python}} -m mtl push-encoder "$@"

# hard negatives for mnrl mined by an encoder (e.g. encoder=runs/<run> out=mined_snli.toml range_min=10 range_max=50 margin=0.1)
[group('encoder files')]
mine-negatives *args:
    {{python}} -m mtl mine-negatives "$@"

# each training task alone vs their mixture at equal compute, with verdicts (e.g. just versus-single preset=cpu-small seeds=3 budget=steps:600)
[group('studies')]
versus-single *args:
    {{python}} -m mtl versus-single "$@"

# the task mixture proxy runs predict best (RegMix), against the usual mixtures (e.g. just mixture-search preset=cpu-small tasks=nli,squad,qt trials=16 seeds=3)
[group('studies')]
mixture-search *args:
    {{python}} -m mtl mixture-search "$@"

# a task grouping (TAG's from a run's affinity, or named) against all-in-one and each alone (e.g. just train-groups preset=cpu-small tasks=nli,squad,experiments/tasks/sick.toml groups=from:runs/<run> budget=steps:600 seeds=3)
[group('studies')]
train-groups *args:
    {{python}} -m mtl train-groups "$@"

# does the affinity toward a watching task predict leaving each training task out? (e.g. just affinity-check preset=cpu-small tasks=nli,squad,experiments/tasks/sick_r.toml,experiments/tasks/stsb.toml stsb.train=false affinity_every=20 budget=steps:300 seeds=5)
[group('studies')]
affinity-check *args:
    {{python}} -m mtl affinity-check "$@"

# transfer each run of a sweep over objectives, then a table and a page (e.g. after just sweep objectives max_minutes=20)
[group('studies')]
compare-objectives *args:
    {{python}} -m mtl compare-objectives "$@"

# every balancer against the weighted sum, each tuned with the same budget, with seeds and verdicts (e.g. just compare-balancers preset=cpu-small budget=steps:300 trials=4 seeds=3)
[group('studies')]
compare-balancers *args:
    {{python}} -m mtl compare-balancers "$@"

# online mixing schedules (aioli, doremi) against static mixtures at equal compute, with a planted noise task, seeds and verdicts (e.g. just compare-mixing preset=cpu-small budget=steps:300 seeds=3)
[group('studies')]
compare-mixing *args:
    {{python}} -m mtl compare-mixing "$@"

# any registered study by name: the built-in ones, compare-negatives, compare-batches, or a plugin's (e.g. just study compare-negatives preset=cpu-small tasks=mnrl seeds=3, or just study depth plugins=./depth.py)
[group('studies')]
study *args:
    {{python}} -m mtl study "$@"

# the test suite (pytest arguments pass through): two to four worker processes, a file's tests
# on one worker, each torch at one thread (the tests wait on processes they start; two workers
# at one thread each keep two cores busy where one at two threads left them idle), the longest
# files first (tests/conftest.py's LONGEST_FIRST; xdist's own order put the longest last).
# mtl's modules are compiled first: where PYTHONDONTWRITEBYTECODE is set (this machine; many
# containers) no import writes their bytecode, and each of the ~200 Python processes the suite
# starts would compile mtl from source again (0.36 of the 3.0 CPU-s a training process spends
# importing, here). The 20 slowest tests are listed at the end: where the suite's time goes.
[doc('the test suite, on two to four worker processes (pytest arguments pass through)')]
[group('tools for developers')]
test *args:
    {{python}} -m compileall -q mtl
    OMP_NUM_THREADS=1 {{python}} -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile --no-loadscope-reorder --durations=20 "$@"

# ruff lint and format check
[group('tools for developers')]
lint:
    ruff check . && ruff format --check .

# damaged copies of every file mtl reads, each read or refused in one line (e.g. cases=5000 readers=encoder,vectors)
[group('tools for developers')]
fuzz *args:
    {{python}} -m mtl fuzz "$@"

# every CUDA path and GPU benchmark in one go, one results file (run it at once on a lent GPU)
[group('tools for developers')]
gpu-check *args:
    {{python}} -m mtl gpu-check "$@"

# wall time of a full build, vector cache cold and warm (e.g. runs=5)
[group('tools for developers')]
bench-build *args:
    {{python}} -m mtl bench-build "$@"

# a training step of mtl vs the 2018 code's and a bare-LSTM floor, 300-d (e.g. only="bilstm 512" tasks=nli, device=cuda)
[group('tools for developers')]
bench-train *args:
    {{python}} -m mtl bench-train "$@"

# sentences/s of encode() next to InferSent's encode() on SNLI dev+test (e.g. hidden=2048 device=cuda, limit=5000)
[group('tools for developers')]
bench-encode *args:
    {{python}} -m mtl bench-encode "$@"

# a whole run's examples/s next to its steps timed alone: what the loop costs (e.g. hidden=2048 device=cuda)
[group('tools for developers')]
bench-loop *args:
    {{python}} -m mtl bench-loop "$@"

# training examples/s with 1 and 2 torchrun processes, 1 thread each (e.g. processes=1,2,4 threads=1)
[group('tools for developers')]
bench-ranks *args:
    {{python}} -m mtl bench-ranks "$@"

# start-up through SLURM against here, and a requeued run's lost work (on the SLURM that SLURM_CONF names)
[group('tools for developers')]
bench-slurm *args:
    {{python}} -m mtl bench-slurm "$@"

# the false-positive rate of just compare's verdicts (seeds of one config) and its power (a planted effect)
[group('tools for developers')]
bench-verdicts *args:
    {{python}} -m mtl bench-verdicts "$@"

# affinity's noise floor: a shuffled-label copy inside it over 5 seeds, and its coverage of fresh held batches
[group('tools for developers')]
bench-affinity *args:
    {{python}} -m mtl bench-affinity "$@"

# training steps/s of a pretrained transformer, fp32 and bf16 (e.g. hf_model=../shared/data/models/all-MiniLM-L6-v2)
[group('tools for developers')]
bench-hf *args:
    {{python}} -m mtl bench-hf "$@"

# a small study's wall time against its members' training steps, members forked or each a fresh python (e.g. just bench-study members=4 max_steps=20 preset=cpu-small)
[group('tools for developers')]
bench-study *args:
    {{python}} -m mtl bench-study "$@"

# wall time of the transfer suite, fast and standard, GloVe baseline and a 1024-d encoder
[group('tools for developers')]
bench-transfer *args:
    {{python}} -m mtl bench-transfer "$@"

# README's first screen from a real run: the commands' last lines and a thumbnail of its report (e.g. run=runs/<a cpu-small run>)
[group('tools for developers')]
readme-picture *args:
    {{python}} -m mtl readme-picture "$@"

# the two studies' earlier names
alias bench-balancers := compare-balancers
alias bench-mixing := compare-mixing
