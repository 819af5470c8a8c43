"""``python -m tests.golden`` (``make golden``): run every golden case (:mod:`tests.golden.cases`) and compare its
output digests with the committed ``tests/golden/hashes.json``; exit 1 naming each output that moved.

A change that keeps every digest computes what the code computed before: record it with ``dvc commit`` (no stage
reruns). A change that moves one is a behaviour change: rerun the stages it touches, and write the new digests with
``--update`` in the same commit, which says what moved and why (docs/architecture.md, "How to change shared code").

Runs in fp32 on one thread with the CPU kernels pinned where the libraries allow it (``ATEN_CPU_CAPABILITY=default``,
``MKL_CBWR=COMPATIBLE``, ``ONEDNN_MAX_CPU_ISA=SSE41``). Data outputs compare exactly; trained ones by their numbers
within a relative tolerance that no instruction set reaches and a real change exceeds (:mod:`tests.golden.digest`),
so that the verdict depends on the code and the pinned libraries, not on the CPU."""

from __future__ import annotations

import os

# before torch is imported: one thread, portable kernels, no bf16 autocast, nothing from a model hub
for _key, _value in {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "default",
                     "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41", "HF_HUB_OFFLINE": "1",
                     "TRANSFORMERS_OFFLINE": "1",
                     "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "",
                     "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
                     "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1"}.items():
    os.environ[_key] = _value

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HASHES = Path(__file__).with_name("hashes.json")


def run(names: list[str] | None, root: Path,
        calls: dict[str, set[tuple[str, str]]] | None = None) -> dict[str, dict]:
    """Each case in ``names`` (all of :data:`~tests.golden.cases.CASES` in order up to the last named, since a case
    reads what earlier ones wrote) -> ``{case: {output: digest}}``. With ``calls``, also what each case ran:
    ``{case: {(file, code object's qualified name)}}`` for every function called (``<module>``: a module's own code,
    counted for the case that imported it and every case after). What runs when the project's modules are imported
    (their own statements, the settings built from the declarations) counts for every case: it is traced too when
    this process imports them here first (a fresh process: ``python -m tests.golden --calls FILE``)."""
    import threading

    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    seen: set[tuple[str, str]] = set()
    modules: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            seen.add((frame.f_code.co_filename, frame.f_code.co_qualname))

    def import_cases():
        from tests.golden import cases
        return cases

    def traced(step, *args):
        if calls is None:
            return step(*args)
        seen.clear()
        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            return step(*args)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
            modules.update(f for f, q in seen if q == "<module>")

    # what importing the project runs (in a fresh process: ``--calls``) shapes every case, as the shared setup does
    cases = traced(import_cases)
    shared = set(seen)
    names = names or list(cases.CASES)
    unknown = [n for n in names if n not in cases.CASES]
    if unknown:
        raise SystemExit(f"golden: unknown case(s) {unknown}; the cases are {list(cases.CASES)}")

    os.environ["STSREG_CACHE"] = str(root / "cache")
    g = traced(cases.setup, root)
    shared |= seen
    last = max(list(cases.CASES).index(n) for n in names)
    got = {}
    for name in list(cases.CASES)[: last + 1]:
        started = time.monotonic()
        got[name] = traced(cases.CASES[name], g)
        if calls is not None:
            calls[name] = ({c for c in seen if c[1] != "<module>"} | {(f, "<module>") for f in modules}
                           | shared)
        print(f"golden: {name}: {len(got[name])} outputs in {time.monotonic() - started:.0f} s", flush=True)
    return {n: got[n] for n in names}


def differences(expected: dict, got: dict) -> list[str]:
    """One line per output that moved, appeared or went missing (a numeric one names the values that moved)."""
    from tests.golden.digest import Print, drift, load

    lines = []
    for case, outputs in got.items():
        want = {k: load(v) for k, v in expected.get(case, {}).items()}
        for name in sorted(set(want) | set(outputs)):
            if want.get(name) != outputs.get(name):
                state = "new" if name not in want else "gone" if name not in outputs else "moved"
                a, b = want.get(name), outputs.get(name)
                if isinstance(a, Print) and isinstance(b, Print):
                    what = drift(a.values, b.values)
                    named = f"{len(what)} values: {', '.join(what[:3])}"
                    state += f" ({'structure' if a.sha != b.sha else named})"
                lines.append(f"{case}: {name}: {state}")
    return lines


def write(digests: dict) -> None:
    """``hashes.json``: one line per output, so that a diff shows which outputs changed."""
    from tests.golden.digest import dump

    cases = [f" {json.dumps(case)}: {{\n" + ",\n".join(f"  {json.dumps(name)}: {json.dumps(dump(d), sort_keys=True)}"
                                                     for name, d in sorted(outputs.items())) + "\n }"
             for case, outputs in sorted(digests.items())]
    HASHES.write_text("{\n" + ",\n".join(cases) + "\n}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", help="cases to run (default: all of tests/golden/cases.py)", default=[])
    ap.add_argument("--calls", type=Path, help="also write what each case ran, import time included, to this JSON "
                                               "file (what `make recommit` reads)")
    ap.add_argument("--update", action="store_true",
                    help="write the digests as the new golden ones (a behaviour change)")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    calls: dict | None = {} if args.calls else None
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        got = run(args.cases or None, root.resolve(), calls)
    expected = json.loads(HASHES.read_text()) if HASHES.exists() else {}
    if args.update:
        from tests.golden.digest import load

        write({**{c: {k: load(v) for k, v in o.items()} for c, o in expected.items()}, **got})
        print(f"golden: wrote {sum(map(len, got.values()))} digests of {len(got)} cases to {HASHES}")
        return 0
    moved = differences(expected, got)
    if args.calls:
        args.calls.write_text(json.dumps({"moved": moved, "calls": {c: sorted(v) for c, v in calls.items()}}))
    for line in moved:
        print(f"golden: MOVED {line}")
    print(f"golden: {'FAILED' if moved else 'ok'}: {sum(map(len, got.values()))} outputs of {len(got)} cases, "
          f"{len(moved)} moved")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
