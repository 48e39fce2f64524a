# mtl: multitask sentence encoders on SNLI + ClassifSQuAD. Options are key=value.
set positional-arguments := true
# mtl prints its own one-line error or summary: no echo of each command line, no second
# "recipe failed" line after it (needs just 1.39).
set quiet := true
set no-exit-message := true

python := env("PYTHON", "python3")

# list the recipes
default:
    @just --list

# SQuAD v1.1 -> ClassifSQuAD triples on disk (e.g. scope=paragraph out=data/cs)
build-classifsquad *args:
    {{python}} -m mtl build-classifsquad "$@"

# SentEval's transfer and probing data from their sources, checked (e.g. out=data/senteval tasks=MR,STS14)
get-senteval *args:
    {{python}} -m mtl get-senteval "$@"

# every CUDA path and GPU benchmark in one go, one results file (run it at once on a lent GPU)
gpu-check *args:
    {{python}} -m mtl gpu-check "$@"

# wall time of a full build, vector cache cold and warm (e.g. runs=5)
bench-build *args:
    {{python}} -m mtl bench-build "$@"

# the test suite (pytest arguments pass through): two to four worker processes, a file's tests
# on one worker, each torch at one thread (the tests wait on processes they start; two workers
# at one thread each keep two cores busy where one at two threads left them idle), the longest
# files first (tests/conftest.py's LONGEST_FIRST; xdist's own order put the longest last).
# mtl's modules are compiled first: where PYTHONDONTWRITEBYTECODE is set (this machine; many
# containers) no import writes their bytecode, and each of the ~200 Python processes the suite
# starts would compile mtl from source again (0.36 of the 3.0 CPU-s a training process spends
# importing, here).
test *args:
    {{python}} -m compileall -q mtl
    OMP_NUM_THREADS=1 {{python}} -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile --no-loadscope-reorder "$@"

# ruff lint and format check
lint:
    ruff check . && ruff format --check .

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

# a saved W&B workspace with mtl's panels (online; e.g. group=fig2, or spec=workspace.json offline)
dashboard *args:
    {{python}} -m mtl dashboard "$@"

# a training step of mtl vs the 2018 code's and a bare-LSTM floor, 300-d (e.g. only="bilstm 512" tasks=nli, device=cuda)
bench-train *args:
    {{python}} -m mtl bench-train "$@"

# sentences/s of encode() next to InferSent's encode() on SNLI dev+test (e.g. hidden=2048 device=cuda, limit=5000)
bench-encode *args:
    {{python}} -m mtl bench-encode "$@"

# a whole run's examples/s next to its steps timed alone: what the loop costs (e.g. hidden=2048 device=cuda)
bench-loop *args:
    {{python}} -m mtl bench-loop "$@"

# training examples/s with 1 and 2 torchrun processes, 1 thread each (e.g. processes=1,2,4 threads=1)
bench-ranks *args:
    {{python}} -m mtl bench-ranks "$@"

# start-up through SLURM against here, and a requeued run's lost work (on the SLURM that SLURM_CONF names)
bench-slurm *args:
    {{python}} -m mtl bench-slurm "$@"

# the false-positive rate of just compare's verdicts (seeds of one config) and its power (a planted effect)
bench-verdicts *args:
    {{python}} -m mtl bench-verdicts "$@"

# affinity's noise floor: a shuffled-label copy inside it over 5 seeds, and its coverage of fresh held batches
bench-affinity *args:
    {{python}} -m mtl bench-affinity "$@"

# training steps/s of a pretrained transformer, fp32 and bf16 (e.g. hf_model=../shared/data/models/all-MiniLM-L6-v2)
bench-hf *args:
    {{python}} -m mtl bench-hf "$@"

# SentEval-style transfer evaluation (e.g. run=runs/<run> tasks=MR,CR mode=fast, baseline=glove-bow, or baseline=hf hf_model=...)
transfer *args:
    {{python}} -m mtl transfer "$@"

# transfer results of runs compared per task and across tasks, with intervals over seeds and items (e.g. just compare runs/a runs/b report=transfer-fast)
compare *args:
    {{python}} -m mtl compare "$@"

# seeds per arm to detect a difference with 80% power, from a pilot (e.g. just plan-seeds runs/sweeps/pilot difference=2 report=transfer-fast)
plan-seeds *args:
    {{python}} -m mtl plan-seeds "$@"

# a run's transfer accuracy by sentence length, OOV rate and label (e.g. run=runs/<run> report=transfer-fast)
decompose *args:
    {{python}} -m mtl decompose "$@"

# which words max pooling picks over a corpus, trained next to untrained (e.g. run=runs/<run> limit=5000)
maxpool *args:
    {{python}} -m mtl maxpool "$@"

# a transfer task's sentences laid out by t-SNE, coloured by label (e.g. run=runs/<run> task=TREC out=trec.html)
tsne *args:
    {{python}} -m mtl tsne "$@"

# nearest neighbours of a sentence among a pool's (e.g. run=runs/<run> query="a man plays a guitar ." pool=sentences.txt)
neighbours *args:
    {{python}} -m mtl neighbours "$@"

# probing tasks: SentEval's (data=PATH) or generated (e.g. run=runs/<run> generate=sentence_length,word_content,bigram_shift)
probing *args:
    {{python}} -m mtl probing "$@"

# hard negatives for mnrl mined by an encoder (e.g. encoder=runs/<run> out=mined_snli.toml range_min=10 range_max=50 margin=0.1)
mine-negatives *args:
    {{python}} -m mtl mine-negatives "$@"

# a run's encoder for sharing, carrying only words of the public vectors file (e.g. run=runs/<run> out=shared/enc)
export-encoder *args:
    {{python}} -m mtl export-encoder "$@"

# a finished run's contamination ledger computed again (e.g. run=runs/<run>): then transfer scores without the seen items
ledger *args:
    {{python}} -m mtl ledger "$@"

# one encoder from several trained from one initialisation: just merge-encoders run=A run=B method=ties out=...
merge-encoders *args:
    {{python}} -m mtl merge-encoders "$@"

# a paper-* or infersent-* run beside its paper's published row: reproduced, not reproduced or not comparable (e.g. run=runs/<run>)
reproduce *args:
    {{python}} -m mtl reproduce "$@"

# MTEB tasks on a run's encoder, beside SentEval's (e.g. run=runs/<run> tasks=STSBenchmark,Banking77Classification; needs pip install mteb)
mteb *args:
    {{python}} -m mtl mteb "$@"

# a run's sentence-transformers folder and card to the Hugging Face Hub (e.g. run=runs/<run> repo=me/my-encoder; log in with `hf auth login`)
push-encoder *args:
    {{python}} -m mtl push-encoder "$@"

# damaged copies of every file mtl reads, each read or refused in one line (e.g. cases=5000 readers=encoder,vectors)
fuzz *args:
    {{python}} -m mtl fuzz "$@"

# transfer each run of a sweep over objectives, then a table and a page (e.g. after just sweep objectives max_minutes=20)
compare-objectives *args:
    {{python}} -m mtl compare-objectives "$@"

# a task grouping (TAG's from a run's affinity, or named) against all-in-one and each alone (e.g. just train-groups preset=cpu-small tasks=nli,squad,experiments/tasks/sick.toml groups=from:runs/<run> budget=steps:600 seeds=3)
train-groups *args:
    {{python}} -m mtl train-groups "$@"

# does the affinity toward a watching task predict leaving each training task out? (e.g. just affinity-check preset=cpu-small tasks=nli,squad,experiments/tasks/sick_r.toml,experiments/tasks/stsb.toml stsb.train=false affinity_every=20 budget=steps:300 seeds=5)
affinity-check *args:
    {{python}} -m mtl affinity-check "$@"

# the task mixture proxy runs predict best (RegMix), against the usual mixtures (e.g. just mixture-search preset=cpu-small tasks=nli,squad,qt trials=16 seeds=3)
mixture-search *args:
    {{python}} -m mtl mixture-search "$@"

# every balancer against the weighted sum, each tuned with the same budget, with seeds and verdicts (e.g. just bench-balancers preset=cpu-small budget=steps:300 trials=4 seeds=3)
bench-balancers *args:
    {{python}} -m mtl bench-balancers "$@"

# online mixing schedules (aioli, doremi) against static mixtures at equal compute, with a planted noise task, seeds and verdicts (e.g. just bench-mixing preset=cpu-small budget=steps:300 seeds=3)
bench-mixing *args:
    {{python}} -m mtl bench-mixing "$@"

# each training task alone vs their mixture at equal compute, with verdicts (e.g. just versus-single preset=cpu-small seeds=3 budget=steps:600)
versus-single *args:
    {{python}} -m mtl versus-single "$@"

# a small study's wall time against its members' training steps, members forked or each a fresh python (e.g. just bench-study members=4 max_steps=20 preset=cpu-small)
bench-study *args:
    {{python}} -m mtl bench-study "$@"

# wall time of the transfer suite, fast and standard, GloVe baseline and a 1024-d encoder
bench-transfer *args:
    {{python}} -m mtl bench-transfer "$@"
