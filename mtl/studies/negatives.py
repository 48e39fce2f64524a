"""`just study compare-negatives`: in-batch ranking (mnrl) with the batch's other sentences as
negatives, as sentence-transformers' MultipleNegativesRankingLoss ranks, against the provided
negatives alone (`<task>.in_batch_negatives=false`), at equal compute with seeds, judged on
transfer. FlagEmbedding's users ask which (its issue 1400: classification-derived pairs make
false in-batch negatives); the run's start logs `false_negatives/<task>`, the share of in-batch
negatives that share the anchor's label, which says how many the first arm trains against.

    just study compare-negatives preset=cpu-small tasks=mnrl mnrl.batch=64 budget=steps:300 seeds=3 \
        transfer_tasks=MR,CR,TREC,STS14
"""

from __future__ import annotations

from mtl.errors import UserError
from mtl.studies.study import Study, StudyConfig, register_study
from mtl.train.config.command_line import config_from_args


@register_study
class CompareNegatives(Study):
    name = "compare-negatives"
    summary = "in-batch ranking's negatives: the batch's other sentences against the provided ones alone"
    baseline = "in_batch"
    config = StudyConfig

    def arms(self, config: StudyConfig, train: list[str]) -> dict[str, list[str]]:
        run = config_from_args(train)
        ranked = [name for name in run.training_tasks if run.tasks[name].kind == "mnrl"]
        if not ranked:
            raise UserError(
                "compare-negatives compares in-batch ranking's negatives: give an mnrl task among tasks= (tasks=mnrl)"
            )
        return {"in_batch": [], "provided": [f"{name}.in_batch_negatives=false" for name in ranked]}
