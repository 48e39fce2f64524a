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

Load the plugin with `plugins=my_module` (or `plugins=./my_plugin.py`) on the command line, or
install it with an entry point in the group `mtl.plugins`; `experiments/plugins/example.py`
registers one of each kind.
"""

from mtl.eval.transfer.features import register_feature_recipe
from mtl.jobs.launchers import Launcher, LauncherConfig, register_launcher
from mtl.jobs.member import Member
from mtl.metrics import register_direction
from mtl.models.encoders.base import Encoder
from mtl.models.encoders.config import EncoderConfig, EncoderTraits
from mtl.models.encoders.config import register as register_encoder
from mtl.tasks.base import Task
from mtl.tasks.configs import TaskConfig
from mtl.tasks.kinds import register as register_task
from mtl.train.callbacks.base import Callback, register_callback
from mtl.train.data.scheduler import Scheduler, register_schedule
from mtl.train.loop.training_run import Control, TrainingRun
from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined
from mtl.train.optim.lr_schedules import LrSchedule, register_lr_schedule
from mtl.train.optim.optimizer_registry import OptimizerDefaults, register_optimizer
from mtl.transfer_tasks.registry import SentEvalQuirks, register_transfer_protocol, register_transfer_task
from mtl.transfer_tasks.tasks import Split, TransferTask, read_task

__all__ = [
    "Balancer",
    "Callback",
    "Combined",
    "Control",
    "Encoder",
    "EncoderConfig",
    "EncoderTraits",
    "Launcher",
    "LauncherConfig",
    "LrSchedule",
    "Member",
    "OptimizerDefaults",
    "Scheduler",
    "SentEvalQuirks",
    "Split",
    "Task",
    "TaskConfig",
    "TrainingRun",
    "TransferTask",
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
    "register_task",
    "register_transfer_protocol",
    "register_transfer_task",
]
