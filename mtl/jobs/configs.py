"""The study commands' configs (sweep, versus-single, mixture-search), apart from their code:
`--help` reads them without importing torch, and the code is imported when the command runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from mtl.config import AtLeast0, AtLeast1, PositiveFloat, Range
from mtl.jobs.launchers import LauncherConfig


@dataclass
class SweepConfig(LauncherConfig):
    """The sweep's own keys (for --help), and where its runs train; every other key goes to
    train-multitask."""

    sweep: str = "sweep"  # the sweep's name and W&B group (a named sweep: its name)
    out: str | None = None  # folder of the members' runs; None: runs/sweeps/<sweep>
    seeds: int | None = (
        None  # each member trained with seeds seed..seed+K-1 (an axis seed=); `just compare` groups them
    )


@dataclass
class StudyKeys(LauncherConfig):
    """The keys every study takes; a study judged on its runs' own scores subclasses it."""

    budget: str = "steps:1000"  # what every run trains (steps:N, examples:N or minutes:N)
    seeds: int | None = 3  # seeds of every arm
    seed: str = "1"  # the first seed, or a list (1,2,3)
    out: str | None = None  # where the runs and the result go; None: runs/<study>-<time>


@dataclass
class StudyConfig(StudyKeys):
    """A study judged on transfer: its runs scored by `just transfer`, then compared; a study's own
    config subclasses it with its keys."""

    transfer_tasks: str = "MR,CR,SUBJ,MPQA,SST2,TREC,MRPC,SICK-E,SICK-R,STS14"  # scored on every run
    transfer_mode: str = "fast"  # the transfer protocol (just transfer mode=)
    transfer_data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    plan: str | None = None  # a `just plan-seeds` .json: warn when the seeds per arm are fewer than it needs


@dataclass
class MixtureSearchConfig(StudyConfig):
    """mixture-search's own keys (for --help); every other key goes to train-multitask."""

    trials: AtLeast1 = 16  # proxy mixtures drawn and trained
    proxy_budget: str = "steps:200"  # each proxy's budget (steps:N, examples:N or minutes:N)
    budget: str = "steps:1000"  # the target budget of the predicted mixture and the baselines
    score: str = (
        "select"  # a proxy's score: select (its select= value) or a summary.json key (best/nli/dev/acc)
    )
    # RegMix's proxies (Liu et al. 2024, its synthesize_mixture.py): Dirichlet(prior x strength),
    # the prior each task's size**(1/prior_temperature), the strength one of 15 log-spaced from
    # 0.1 to 5 per draw (sparse to near the prior), shares under min_share set to 0 (a task absent).
    proxies: Literal["regmix", "uniform"] = (
        "regmix"  # uniform: Dirichlet(alpha), every share >= 0.005 (searches before 2026-11-28)
    )
    prior_temperature: PositiveFloat = 2.0  # the prior's T: shares by size**(1/T) (RegMix: 2)
    min_share: Annotated[float, Range(0, 0.5)] = (
        0.01  # a drawn share below it becomes 0 (the task sits the proxy out)
    )
    alpha: PositiveFloat = 1.0  # proxies=uniform: the Dirichlet's concentration (1: uniform over mixtures)
    candidates: AtLeast1 = 100_000  # mixtures (drawn as the proxies are) the regression scores
    top_k: AtLeast1 = 128  # the optimum: the mean of the top_k best-predicted candidates (RegMix: 128)
    bootstrap: AtLeast0 = 200  # resamples of the proxies refitted for the optimum's uncertainty (0: none)
    min_spearman: Annotated[float, Range(-1, 1)] = 0.3  # skill gate: held-out rank correlation the fit needs
    skill_permutations: Annotated[int, Range(19)] = 199  # skill gate: shuffles of the scores its p is from
    train_without_skill: bool = False  # true: train the predicted arm even when the gate says no skill
    # Each task's training set cut to the share proxy_budget / budget of it (max_train), so a task
    # repeats as many epochs in a proxy as at the target budget (steps budgets only).
    repetition_matched: bool = (
        True  # each task cut to proxy_budget/budget of its examples: epochs as at the target
    )
    temperature: PositiveFloat = 2.0  # the temperature-sampling baseline's T
    search_seed: AtLeast0 = 0  # of the Dirichlet draws


@dataclass
class VersusConfig(StudyConfig):
    """versus-single's own keys (for --help); every other key goes to train-multitask."""

    budget: str = ""  # steps:N, examples:N or minutes:N: what every run gets
    seeds: int | None = (
        None  # each arm trained with seeds seed..seed+K-1 (3 for a verdict on the configurations)
    )
    merge: str = ""  # merge arms (average,task_arithmetic,ties: each task alone at budget/n per seed, merged; with_base: the mixture with its start; bagging: bags= mixtures on subsets, averaged; soup: the mixture's checkpoints; incremental: the last task added from the others' mixture, merged back)
    bags: AtLeast1 = (
        3  # merge=bagging: mixture runs per seed, each budget/bags on its own 63.2% of every training set
    )
    soup_checkpoints: Annotated[int, Range(2)] = (
        5  # merge=soup: the mixture's last N evaluated models, averaged (merge-soup) and greedily (merge-greedy_soup)
    )
    regimes: str = (
        ""  # regime arms (sequential,two_stage): the mixture's tasks under that schedule, the same budget
    )


@dataclass
class TrainGroupsConfig(StudyKeys):
    """train-groups' own keys (for --help); every other key goes to train-multitask."""

    budget: str = ""  # steps:N, examples:N or minutes:N: what every network gets
    groups: str = ""  # from:<run> (TAG's selection from its affinity), or named: nli+sick,sickshuf
    networks: AtLeast1 = 2  # groups=from:<run>: how many networks TAG's selection may use
    selection: Literal["released", "self"] = (
        "released"  # groups=from:<run>: TAG's as released (a task never alone), or self (alone: its own lookahead)
    )


@dataclass
class AffinityCheckConfig(StudyKeys):
    """affinity-check's own keys (for --help); every other key goes to train-multitask (with
    affinity_every= and at least one watching task, `<task>.train=false`)."""

    budget: str = ""  # steps:N, examples:N or minutes:N: what every run gets
    seeds: int | None = 5  # each arm trained with seeds seed..seed+K-1
    resamples: AtLeast1 = 4000  # seed resamples of the bootstrap interval of Spearman's rho


@dataclass
class BenchMixingConfig(StudyConfig):
    """compare-mixing's own keys (for --help); every other key goes to train-multitask (each arm's run)."""

    arms: str = "stratified,proportional,temperature,aioli,aioli-abs,doremi"  # the mixtures judged; stratified is the baseline
    noise: bool = True  # plant a noise task (SICK-E with shuffled training labels) among every arm's tasks
    mix_every: AtLeast1 = 10  # the online arms' steps between updates of the shares
    mix_eta: PositiveFloat | None = (
        None  # the online arms' step size; None: each its authors' (aioli 0.2, doremi 1)
    )
    temperature: PositiveFloat = 2.0  # the temperature arm's T: shares by size**(1/T)
    mixture: str | None = None  # a just mixture-search folder: its best mixture becomes the searched arm


@dataclass
class BenchBalancersConfig(StudyConfig):
    """compare-balancers' own keys (for --help); every other key goes to train-multitask (each trial
    and run under schedule=mixed); budget= is what every trial and run trains."""

    methods: str = "sum,uncertainty,gradnorm,pcgrad,famo,upgrad,aligned,nash"  # the balancers judged; sum is the baseline
    trials: AtLeast1 = 4  # configurations tried per method on the first seed (its defaults first)
    lr_factors: str = "0.25,0.5,1,2,4"  # the lr each method may take: multiples of the configuration's lr
    weights: str = "0.25,0.5,1,2,4"  # the sum's loss weight of each training task after the first
    score: str = "select"  # a trial's score: select (its select= value) or a summary.json key
    search_seed: AtLeast0 = 0  # of the trials' draws
