"""Stage-2 exploration on a GPU: many (loss, settings, seed) runs in parallel processes on one card.

usage: python -m stsreg.experiments.explore.gpu_3epochs JOBS.json OUT_DIR --workers 6 --budget 420, from a project root
holding ``.dev/stage1`` (models/stage1 with its weights stored in fp16), ``.dev/sts.parquet`` and
``.dev/nli_train.parquet`` (copies of data/prepared/), on a machine without the ``datasets`` package (sentences are
tokenized in memory). Each job: {"name", "seed", "stage2": {overrides}, "eval": bool, "nli": {"objective", "max_pairs",
"epochs"} | null}. Writes OUT_DIR/results.jsonl (one line per finished job) and OUT_DIR/preds.tar (predictions of
evaluated jobs).
"""
import argparse
import concurrent.futures as cf
import dataclasses
import json
import multiprocessing as mp
import shutil
import tarfile
import time
import traceback
from pathlib import Path

ROOT = Path.cwd()


def run_job(job: dict, work_root: str) -> dict:
    import torch
    torch.set_num_threads(2)
    import pandas as pd
    from stsreg.infra import runtime
    runtime.cache_dir = lambda name: None  # no datasets package on the device: tokenize in memory
    from stsreg.infra.config import load_params
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start
    from stsreg.product.runners.eval_runner import run_evaluate

    t0 = time.time()
    work = Path(work_root) / job["name"]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params = load_params(ROOT / "params.yaml")
    params = dataclasses.replace(params, seed=job["seed"],
                                 model=dataclasses.replace(params.model, precision=job.get("precision", "fp32")),
                                 stage2=dataclasses.replace(params.stage2, **job.get("stage2", {})))
    runtime.set_seed(job["seed"])
    model = SiameseRegressor.load(ROOT / ".dev/stage1", precision=params.model.precision).float()
    out = {"job": job}
    if job.get("nli"):
        from stsreg.experiments import nli_table
        n = job["nli"]
        p = dataclasses.replace(params.nli_table, max_pairs=n.get("max_pairs", 0), epochs=n.get("epochs", 1),
                                **{k: v for k, v in n.items() if k in ("lr", "temperature", "batch_size")})
        model = model.to(runtime.resolve_device())
        examples = nli_table.training_examples(pd.read_parquet(ROOT / ".dev/nli_train.parquet"),
                                               nli_table.KINDS[n["objective"]], p.max_pairs, job["seed"])
        out["nli_summary"] = nli_table.train_row(model, n["objective"], examples, p, job["seed"], work / "nli.pt")
        model.train()
    sts = ROOT / ".dev/sts.parquet"
    summary = run_stage2(Start(model, params), sts, work / "model", work / "ckpt", keep=job.get("keep", "trained"))
    out["summary"] = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
    out["train_s"] = time.time() - t0
    if job.get("eval"):
        metrics = run_evaluate(params, work / "model", sts, work / "eval")
        out["metrics"] = metrics
        out["preds"] = str(work / "eval" / "predictions.parquet")
    shutil.rmtree(work / "model", ignore_errors=True)
    shutil.rmtree(work / "ckpt", ignore_errors=True)
    out["wall_s"] = time.time() - t0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jobs")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--budget", type=float, default=420, help="start no job after this many seconds")
    a = ap.parse_args()
    jobs = json.loads(Path(a.jobs).read_text())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work_root = "/tmp/explore"
    t0 = time.time()
    pending = list(jobs)
    running = {}
    preds = []
    with cf.ProcessPoolExecutor(a.workers, mp_context=mp.get_context("spawn")) as ex:
        while pending or running:
            while pending and len(running) < a.workers and time.time() - t0 < a.budget:
                job = pending.pop(0)
                running[ex.submit(run_job, job, work_root)] = job
            if not running:
                break
            done, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
            for f in done:
                job = running.pop(f)
                try:
                    r = f.result()
                except Exception:
                    r = {"job": job, "error": traceback.format_exc()[-3000:]}
                r["finished_at_s"] = time.time() - t0
                with open(out / "results.jsonl", "a") as fh:
                    fh.write(json.dumps(r, default=str) + "\n")
                if r.get("preds"):
                    preds.append((job["name"], r["preds"]))
                    with tarfile.open(out / "preds.tar", "w") as tar:
                        for name, p in preds:
                            tar.add(p, arcname=f"{name}.parquet")
                print(f"[{time.time() - t0:6.0f}s] {job['name']}: "
                      + (r.get("error", "").splitlines()[-1] if "error" in r else
                         f"dev {r['summary'].get('trained_best_dev_spearman')} @ "
                         f"{r['summary'].get('trained_best_step')}"
                         + (f", avg7 {r['metrics']['avg7_spearman']:.2f} unseen "
                            f"{r['metrics']['avg7_unseen_spearman']:.2f}"
                            if 'metrics' in r else "") + f", {r['wall_s']:.0f}s"), flush=True)
    print("not started:", [j["name"] for j in pending], flush=True)


if __name__ == "__main__":
    main()
