"""Every extension point of mtl, one registry each, for a plugin to add to:

    from mtl.registry import register_task, register_encoder, register_transfer_task

    register_task          a task kind (a `Task` subclass with its config): tasks=KIND
    register_encoder       a sentence encoder's builder and traits: encoder=NAME
    register_transfer_task a transfer task's reader, protocol and metrics: just transfer tasks=NAME
    register_transfer_protocol how a kind of transfer task is scored (a protocols.TransferProtocol)
    register_feature_recipe how a transfer task's embeddings become features (its entry names it)
    register_callback      work around the training loop that sees the run (a `Callback`): callbacks=NAME
    register_schedule      which task trains at each step: schedule=NAME
    register_balancer      how schedule=mixed combines its tasks' gradients: balancer=NAME
    register_lr_schedule   an lr schedule over each task's optimizer: lr_schedule=NAME
    register_optimizer     an optimizer with its defaults (lr, clipping, schedule, stop): optim=NAME
    register_direction     which way a new metric is better (a loss, an error rate: lower)
    register_launcher      where a study's runs train (a `Launcher` of `Member`s): launcher=NAME
    register_study         a study: its arms, judged against its baseline (a `Study`): just study NAME

Load the plugin with `plugins=my_module` (or `plugins=./my_plugin.py`) on the command line, or
install it with an entry point in the group `mtl.plugins`; `experiments/plugins/example.py`
registers one of each kind and imports nothing of mtl but this module.

What a plugin builds on is here too: the base classes above, the key types of its options
(`AtLeast0`, `AtLeast1`, `PositiveFloat`, `Range`, `OneOf`), a task's texts and head recipe
(`LabelledTexts`, `single_recipe`), SNLI's task to extend (`NLI`, `NLIConfig`), an encoder's
padding mask (`length_mask`) and a transfer protocol's parts (`TransferProtocol`, `TaskFeatures`).
"""

from mtl.config import AtLeast0, AtLeast1, OneOf, PositiveFloat, Range
from mtl.data.texts import LabelledTexts
from mtl.eval.transfer.features import register_feature_recipe
from mtl.jobs.launchers import Launcher, LauncherConfig, register_launcher
from mtl.jobs.member import Member
from mtl.metrics import register_direction
from mtl.models.encoders.base import Encoder, length_mask
from mtl.models.encoders.config import EncoderConfig, EncoderTraits
from mtl.models.encoders.config import register as register_encoder
from mtl.studies.study import Study, StudyConfig, StudyKeys, register_study
from mtl.tasks.base import Task
from mtl.tasks.configs import TaskConfig
from mtl.tasks.kinds import register as register_task
from mtl.tasks.nli import NLI, NLIConfig
from mtl.tasks.pairs import single_recipe
from mtl.train.callbacks.base import Callback, register_callback
from mtl.train.data.scheduler import Scheduler, register_schedule
from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined
from mtl.train.optim.lr_schedules import LrSchedule, register_lr_schedule
from mtl.train.optim.optimizer_registry import OptimizerDefaults, register_optimizer
from mtl.train.run.training_run import Control, TrainingRun
from mtl.transfer_tasks.registry import SentEvalQuirks, register_transfer_protocol, register_transfer_task
from mtl.transfer_tasks.tasks import Split, TransferTask, read_task

__all__ = [
    "NLI",
    "AtLeast0",
    "AtLeast1",
    "Balancer",
    "Callback",
    "Combined",
    "Control",
    "Encoder",
    "EncoderConfig",
    "EncoderTraits",
    "Launcher",
    "LabelledTexts",
    "LauncherConfig",
    "LrSchedule",
    "Member",
    "NLIConfig",
    "OneOf",
    "OptimizerDefaults",
    "PositiveFloat",
    "Range",
    "Scheduler",
    "SentEvalQuirks",
    "Split",
    "Study",
    "StudyConfig",
    "StudyKeys",
    "Task",
    "TaskConfig",
    "TaskFeatures",  # noqa: F822  (module __getattr__, below)
    "TrainingRun",
    "TransferProtocol",  # noqa: F822  (module __getattr__, below)
    "TransferTask",
    "length_mask",
    "read_task",
    "register_balancer",
    "register_callback",
    "register_direction",
    "register_encoder",
    "register_feature_recipe",
    "register_launcher",
    "register_lr_schedule",
    "register_optimizer",
    "register_schedule",
    "register_study",
    "register_task",
    "register_transfer_protocol",
    "register_transfer_task",
    "single_recipe",
]


def __getattr__(name: str) -> type:
    """TransferProtocol and TaskFeatures, imported when a plugin asks for them: they bring
    scikit-learn and SciPy (2 s), which every other plugin's process would pay for nothing."""
    if name in ("TransferProtocol", "TaskFeatures"):
        from mtl.eval.transfer import protocols

        return getattr(protocols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
