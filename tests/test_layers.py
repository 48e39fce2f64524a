"""The package's layers: each module imports only its own layer and those below, the commands
that read finished runs never import training, and there is no import circle."""

import ast
import dataclasses
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "mtl"

# Lowest first: the packages (and the top-level modules) of mtl, each whole in one layer; a module
# belongs to the layer of the longest prefix naming it (`=mtl`: the package's __init__ alone).
LAYERS = [
    (
        "base",
        [
            "mtl.errors",
            "mtl.console",
            "mtl.metrics",
            "mtl.correlation",
            "mtl.config",
            "mtl.files",
            "mtl.plugins",
        ],
    ),
    ("runtime and text", ["mtl.runtime", "mtl.tracking", "mtl.text"]),
    ("data and models", ["mtl.data", "mtl.models"]),
    ("tasks, transfer tasks and file formats", ["mtl.tasks", "mtl.transfer_tasks", "mtl.formats"]),
    ("run folders", ["mtl.runs", "mtl.published"]),
    ("evaluation", ["mtl.eval"]),
    ("training", ["mtl.train"]),
    ("where runs train", ["mtl.jobs"]),
    # the commands that read finished runs (and the statistics of every verdict)
    ("analysis", ["mtl.analysis"]),
    # the studies train, transfer and compare with mtl.analysis's statistics: above it
    ("studies", ["mtl.studies"]),
    (
        "entry points",
        ["mtl.registry", "mtl.cli", "mtl.__main__", "mtl.member_server", "=mtl", "mtl.transfer", "mtl.api"],
    ),
]
# Where an import inside a function is the design: the command table imports a command's module
# when it runs; `mtl.load_encoder` keeps `import mtl` light; a run loads the watching tasks
# (monitor=) only for a run that watches (mtl.train.callbacks.run_callbacks): their scikit-learn and SciPy cost every run 1 s;
# train-multitask and train-distributed import the trainer (torch) only in the process that trains
# or prints a resolved config, not in one that submits a SLURM job or starts torchrun.
LAZY = {
    "mtl.registry",  # a transfer protocol's parts (scikit-learn) only for the plugin that asks
    "mtl.cli",
    "mtl",
    "mtl.api",
    "mtl.train.callbacks.run_callbacks",
    "mtl.tasks.kinds",  # a task kind's input side (its data readers) only where a run's inputs are found
    "mtl.jobs.train",
    "mtl.train.loop.launch",
}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def layer_of(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix.lstrip("=") or (not prefix.startswith("=") and module.startswith(prefix + "."))
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def imports(path: Path, known: dict[str, Path], within: tuple[str, ...] = ("mtl",)) -> list[tuple[str, bool]]:
    """(imported module of the packages `within`, inside a function) for each import of `path`;
    TYPE_CHECKING ones left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checking = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    in_function = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        found += [(name, id(node) in in_function) for name in names if name.split(".")[0] in within]
    return found


def test_no_module_imports_a_layer_above_its_own():
    known = modules()
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, path in known.items()
        for target, _ in imports(path, known)
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "\n".join(upward)


# mtl.train's floors, lowest first: a module belongs to the floor of the longest prefix naming it.
# The catalogue is every component kind's registry (what the config parses keys against), each
# beside its code; the run is a folder of its own (mtl/train/run).
TRAIN_FLOORS = [
    (
        "catalogue",
        [
            "mtl.train.data.scheduler",
            "mtl.train.optim.balancers",
            "mtl.train.optim.lr_schedules",
            "mtl.train.optim.optimizer_registry",
            "mtl.train.callbacks.base",
            "mtl.train.loop.selection",
        ],
    ),
    ("config", ["mtl.train.config"]),
    ("data and optim", ["mtl.train.data", "mtl.train.optim"]),
    ("run", ["mtl.train.run"]),
    ("step and callbacks", ["mtl.train.step", "mtl.train.callbacks"]),
    ("loop", ["mtl.train.loop", "=mtl.train"]),
]


def floor_of(module: str) -> int | None:
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(TRAIN_FLOORS)
        for prefix in prefixes
        if module == prefix.lstrip("=") or (not prefix.startswith("=") and module.startswith(prefix + "."))
    ]
    return max(matches)[1] if matches else None


def test_no_module_of_train_imports_a_floor_above_its_own():
    """train/'s rooms were one import circle (the config imported the callbacks, data and optim,
    which imported it back; the step imported the loop's setup, the callbacks the run object):
    as floors, none imports one above it, not even inside a function."""
    known = modules()
    train = {module: path for module, path in known.items() if module.startswith("mtl.train")}
    assert all(floor_of(module) is not None for module in train), [m for m in train if floor_of(m) is None]
    upward = [
        f"{module} ({TRAIN_FLOORS[floor_of(module)][0]}) imports {target} ({TRAIN_FLOORS[floor_of(target)][0]})"
        for module, path in train.items()
        for target, _ in imports(path, known)
        if target.startswith("mtl.train") and floor_of(target) > floor_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_the_package_never_imports_the_developer_tools():
    """The benchmarks, the fuzzer and the GPU check (tools/, run from a checkout) use mtl; mtl
    never imports them, not even inside a function (the command table names their modules, as it
    names the dataset builders')."""
    known = modules()
    reaching = [
        f"{module} imports {target}"
        for module, path in known.items()
        for target, _ in imports(path, known, within=("tools",))
    ]
    assert not reaching, "\n".join(reaching)
    assert not (PACKAGE / "bench").exists() and not (PACKAGE / "fuzz.py").exists()


def test_the_commands_that_read_finished_runs_never_import_training():
    known = modules()
    reaching = [
        f"{module} imports {target}"
        for module, path in known.items()
        if module.startswith("mtl.analysis")
        for target, _ in imports(path, known)
        if target.startswith("mtl.train")
    ]
    assert not reaching, "\n".join(reaching)


def test_mtl_modules_are_imported_at_the_top_of_a_module_but_where_laziness_is_the_design():
    known = modules()
    inside = [
        f"{module} imports {target} inside a function"
        for module, path in known.items()
        if module not in LAZY
        for target, lazy in imports(path, known)
        if lazy
    ]
    assert not inside, "\n".join(inside)


def test_there_is_no_import_circle():
    known = modules()
    graph = {m: {t for t, _ in imports(p, known) if t in known and t != m} for m, p in known.items()}
    for module, targets in graph.items():  # importing a module runs its packages' __init__ first
        packages = {".".join(t.split(".")[:k]) for t in targets for k in range(2, t.count(".") + 1)}
        graph[module] = targets | {p for p in packages if p != module and not module.startswith(p + ".")}
    visiting, done, circles = set(), set(), []

    def visit(module: str, path: list[str]) -> None:
        if module in done:
            return
        if module in visiting:
            circles.append(" -> ".join([*path[path.index(module) :], module]))
            return
        visiting.add(module)
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, module])
        visiting.discard(module)
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "\n".join(circles)


# The fields that choose a component from a registry (encoder=, schedule=, ...): a check that
# compares one with a name ("decomposable", "slurm") breaks when a plugin's component of the same
# kind comes; what a check needs of a component is declared where it is registered (its traits).
CHOOSERS = {"encoder", "schedule", "balancer", "optim", "lr_schedule", "launcher", "kind"}
CONFIG_CHECKS = (
    "mtl/train/config/train_config.py",
    "mtl/train/config/resolve.py",
    "mtl/models/encoders/config.py",
    "mtl/data/config.py",
    "mtl/jobs/configs.py",
    "mtl/jobs/launchers.py",
)


def _names_a_chooser(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in CHOOSERS) or (
        isinstance(node, ast.Name) and node.id in CHOOSERS
    )


def _component_names(node: ast.AST) -> list[str]:
    values = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [
        v.value
        for v in values
        if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value != "auto"
    ]


def test_no_config_check_names_a_component_in_a_string():
    found = []
    for path in CONFIG_CHECKS:
        for node in ast.walk(ast.parse((PACKAGE.parent / path).read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(map(_names_a_chooser, sides)) and (
                    named := [n for s in sides for n in _component_names(s)]
                ):
                    found.append(f"{path}:{node.lineno} compares with {named}")
    assert not found, "\n".join(found)


def test_the_schedule_section_holds_no_schedules_own_keys():
    """A schedule's keys (temperature=, cap=, mix_every=) are its options, as a balancer's are."""
    from mtl.train.config.train_config import ScheduleConfig
    from mtl.train.data.scheduler import schedule_key_owners

    fields = {field.name for field in dataclasses.fields(ScheduleConfig)}
    assert not fields & set(schedule_key_owners())
    assert {"temperature", "cap", "mix_every", "mix_reference"} <= set(schedule_key_owners())
