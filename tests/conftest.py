import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def pytest_configure(config):
    # Tests never touch the user's cache, an exported vectors file, or W&B servers.
    os.environ["MTL_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtl-test-cache-")
    os.environ.pop("MTL_VECTORS", None)
    os.environ.pop("WANDB_API_KEY", None)
    os.environ["WANDB_MODE"] = "disabled"


def pytest_unconfigure(config):
    shutil.rmtree(os.environ["MTL_CACHE_DIR"], ignore_errors=True)


@pytest.fixture
def shared_data() -> Path:
    value = os.environ.get("MTL_DATA_DIR")
    if not value:
        pytest.skip("MTL_DATA_DIR is not set: point it at ../shared/data to run tests on the real datasets")
    return Path(value)


@pytest.fixture
def seed() -> int:
    return 1234


def write_glove(path: Path, words, dim: int = 4, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    lines = [f"{word} {' '.join(f'{x:.5f}' for x in rng.normal(size=dim))}" for word in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
