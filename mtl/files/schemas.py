"""What every file mtl writes and reads back is checked with: `Record` (the pydantic base of each
format's schema, strict and open to keys it does not read), `read_json` and `read_json_lines`
(parse, check, and say what is wrong in one `DamagedFile` line naming the file, the line and the
field), and the field types they share.

A run folder travels (a colleague's `runs/`, a copied sweep), is cut by a kill, or edited by
hand: what mtl wrote is input like any other. Each format's schema lives with its writer and
reader (`mtl.formats.run_files`, `mtl.formats.transfer_report`, `mtl.formats.merge_record`,
`mtl.jobs.slurm`, `mtl.analysis.power`, `dataset_builders.senteval`); `tools.fuzz.READ_BACK` lists
them all, and `just fuzz` has a target for each:

    runs/a/affinity.jsonl line 3, matrix: 3 tasks but 2 rows: restore the file, or remove it
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
)

from mtl.errors import UserError

# JSON numbers as mtl writes them: finite, or null where a value was not finite (jsonfile.dumps).
Number = float | None
Count = Annotated[int, Field(ge=0)]
# A measured value that must be one: finite (NaN, the infinities and null refused: a null read
# back as NaN would turn a mean, and every choice made from it, silently), and within LARGEST
# of 0, so that sums and means of a file's values cannot overflow either.
LARGEST = 1e15
Finite = Annotated[float, Field(allow_inf_nan=False, ge=-LARGEST, le=LARGEST)]


class DamagedFile(UserError):
    """A file mtl wrote earlier that no longer fits its format."""


class Record(BaseModel):
    """A JSON object of a file mtl writes: types strict (a number written as text is damage), keys
    beyond those read kept (older and newer mtl versions write more)."""

    model_config = ConfigDict(strict=True, extra="allow")


def is_number(value: Any) -> bool:
    """A JSON number as mtl writes it: finite (int or float, not a bool), or null."""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def checked(model: type[Record], value: Any, where: str, fix: str) -> dict[str, Any]:
    """`value` (a part of a file read already) checked against `model`; DamagedFile names `where`."""
    return _checked(model, value, where, fix)


SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _below(path: str) -> str:
    if not path or path.startswith("/") or "\\" in path or "\x00" in path or ".." in path.split("/"):
        raise ValueError(f"{path!r:.60} is not a path below its folder")
    return path


# a path below the folder it is read in: never absolute, never through `..`
RELATIVE_PATH = Annotated[str, AfterValidator(_below)]


# ---- reading ---------------------------------------------------------------------------------


def described(error: ValidationError) -> str:
    """pydantic's first complaint as `field: what is wrong`."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _checked(model: type[Record], value: Any, where: str, fix: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DamagedFile(f"{where} holds {type(value).__name__}, not a JSON object: {fix}")
    try:
        return model.model_validate(value).model_dump(exclude_unset=True)
    except ValidationError as error:
        raise DamagedFile(f"{where}, {described(error)}: {fix}") from None


def _json(text: str, where: str, fix: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise DamagedFile(f"{where} is nested too deeply: {fix}") from None
    except ValueError as error:
        raise DamagedFile(f"{where} is not JSON ({error}): {fix}") from None
    return value


def regular_file(path: Path, fix: str) -> None:
    """A path to read must be a regular file (or nothing): a FIFO would block the reader forever,
    a device would feed it without end."""
    if path.exists() and not path.is_file():
        raise DamagedFile(f"{path} is not a regular file: {fix}")


def read_json(path: Path, model: type[Record], fix: str) -> dict[str, Any] | None:
    """The file at `path` checked against `model`; None when there is none. `fix` ends the error."""
    path = Path(path)
    regular_file(path, fix)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise DamagedFile(f"{path} cannot be read ({error.strerror or error}): {fix}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DamagedFile(f"{path} is not UTF-8 text: {fix}") from None
    return _checked(model, _json(text, str(path), fix), str(path), fix)


def read_json_lines(path: Path, model: type[Record], fix: str) -> list[dict[str, Any]]:
    """Every line of the JSON Lines file at `path`, each checked against `model`; none when there is
    no file. Only the last line may be cut short (a kill mid-write): it is left out."""
    path = Path(path)
    regular_file(path, fix)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise DamagedFile(f"{path} cannot be read ({error.strerror or error}): {fix}") from None
    # Split at line feeds only: U+2028 and the like are text inside a JSON string.
    lines = [line.removesuffix("\r") for line in data.decode("utf-8", errors="surrogateescape").split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        # Every write ends its line: a last line without its line feed is one a kill cut short.
        cut_short = number == len(lines) and not data.endswith(b"\n")
        if any("\udc80" <= character <= "\udcff" for character in line):
            if cut_short:
                continue
            raise DamagedFile(f"{where} is not UTF-8 text: {fix}")
        try:
            value = json.loads(line)
        except ValueError as error:
            if cut_short:
                continue
            raise DamagedFile(f"{where} is not JSON ({error}): {fix}") from None
        except RecursionError:
            raise DamagedFile(f"{where} is nested too deeply: {fix}") from None
        rows.append(_checked(model, value, where, fix))
    return rows


RESTORE = "restore it from a copy, or remove it"
