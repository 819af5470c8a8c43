"""The sentence-transformers script this pipeline replaces, as a user would write it: CoSENTLoss, 3 epochs, batch 16,
lr 2e-5 on STS-B train + SICK-R train, sentence-transformers' own defaults for everything else (fp32 on a CPU).

    python benchmarks/st_cosent.py --sts data/prepared/sts.parquet --out st-model

It reads the project's prepared table only to get the same training rows; the bench (benchmarks/champion.py) times
it and scores the saved model with the project's evaluation.
"""

import argparse

import pandas as pd
from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.losses import CoSENTLoss

from stsreg.product.model import resolve_backbone

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--sts", default="data/prepared/sts.parquet")
ap.add_argument("--out", required=True)
ap.add_argument("--backbone", default="default", help="as params.yaml's model.backbone")
a = ap.parse_args()

sts = pd.read_parquet(a.sts)
train = sts[(sts.split == "train") & sts.dataset.isin(["stsb", "sickr"])]
data = Dataset.from_dict({"sentence1": list(train.sentence1), "sentence2": list(train.sentence2),
                          "score": list(train.score / 5.0)})  # CoSENT ranks pairs: any monotone scale does
model = SentenceTransformer(resolve_backbone(a.backbone))
args = SentenceTransformerTrainingArguments(output_dir=a.out + "-checkpoints", num_train_epochs=3,
                                            per_device_train_batch_size=16, learning_rate=2e-5, save_strategy="no",
                                            report_to="none", seed=42)
SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=CoSENTLoss(model)).train()
model.save(a.out)
