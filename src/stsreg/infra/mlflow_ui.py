"""What the MLflow UI opens on: experiments labelled as model training, and the link to an experiment's runs.

MLflow 3.17's UI keeps a "workflow type" (GenAI / Model training) per browser, starting on GenAI, and opens an
experiment on its GenAI overview ("No data available") there even when the experiment's tag ``mlflow.experimentKind``
says it holds model training (checked in headless Chromium). The link :func:`runs_page` builds asks for the
machine-learning view of the experiment's runs, which is what lands a user on them; the tag is kept for the UI's
own reading of an experiment's kind.
"""

from __future__ import annotations

from stsreg.infra import tracking


def runs_page(mlflow_url: str, experiment: str = "stsreg") -> str:
    """The MLflow UI page of ``experiment``'s runs (the model-training view, not the GenAI overview), or the UI's home
    while the experiment does not exist yet."""
    try:
        exp = tracking.client(mlflow_url).get_experiment_by_name(experiment)
    except Exception:  # noqa: BLE001 (a link is not worth a failed start)
        exp = None
    query = "?workflowType=machine_learning"
    return (
        f"{mlflow_url}/#/experiments/{exp.experiment_id}/runs{query}" if exp else f"{mlflow_url}/#/experiments{query}"
    )


def label_experiments(mlflow_url: str) -> None:
    """Mark the store's experiments as model training (:func:`stsreg.infra.tracking.label_experiment`); experiments
    logged before the label existed get it here."""
    c = tracking.client(mlflow_url)
    for exp in c.search_experiments():
        tracking.label_experiment(c, exp)
