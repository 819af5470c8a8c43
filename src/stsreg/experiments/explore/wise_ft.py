"""STS-B dev along the weights from the production stage-1 model to the production stage-2 model (WiSE-FT's path).

``(1 - alpha) * W(models/stage1) + alpha * W(models/stage2)`` at alpha = 0, 0.1, ..., 1, scored on STS-B dev only (as
training scores it). Fine-tuned weights mixed with their start often generalise better off the training
distribution (WiSE-FT, Wortsman et al., CVPR 2022); a mix the dev-only rule could pick would need a dev figure above
alpha = 1. Writes ``reports/explore/soup/wise_ft.md``. No test row is read.

    python -m stsreg.experiments.explore.wise_ft
"""

from __future__ import annotations


from stsreg.experiments.explore.soup import ALPHAS, OUT, dev_along


def main() -> int:
    from stsreg.infra import runtime
    from stsreg.product.model import SiameseRegressor

    start, end = (SiameseRegressor.load(d).to(runtime.resolve_device()).eval()
                  for d in ("models/stage1", "models/stage2"))
    scores = dev_along(start, end)
    text = "\n".join([
        "STS-B dev Spearman x100 of cosine of `(1 - alpha) * W(models/stage1) + alpha * W(models/stage2)` "
        "(the production models, seed 42). Dev only: no test row was scored.", "",
        "| alpha | " + " | ".join(f"{a:g}" for a in ALPHAS) + " |", "|---|" + "---:|" * len(ALPHAS),
        "| STS-B dev | " + " | ".join(f"{scores[a]:.2f}" for a in ALPHAS) + " |", ""])
    (OUT / "wise_ft.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
