"""Settings of operations: the Prefect deployments' schedule, how ``stsreg serve`` computes, and how many processes a
stage runs as."""

from __future__ import annotations

from pydantic import model_validator

from stsreg.infra import backend_specs
from stsreg.infra.knobs import knob, section
from stsreg.infra.scales import check_scale

#: What may run a served model's encoder (``serve.backend``, ``stsreg serve|encode --backend``; ``auto`` chooses
#: among them): declared in :mod:`stsreg.infra.backend_specs`.
SERVING_BACKENDS = backend_specs.NAMES


@section
class ScheduleParams:
    """Prefect deployments (``stsreg deploy``): when the retrain and the champion check run, and where."""

    retrain_cron: str = knob("0 3 * * 1", "retrain-and-promote (dvc repro promote); empty = no schedule")
    champion_eval_cron: str = knob("0 6 * * *", "evaluation of the champion; empty = no schedule")
    timezone: str = knob("UTC")
    work_pool: str = knob("stsreg-process", "Prefect work pool the deployments run on", pattern=r".+")
    gpu_pool: str = knob("", "work pool of stage 2 in a scheduled retrain (a GPU machine's worker); empty: stage 2 "
                         "runs with the rest of the pipeline", pattern=r"[A-Za-z0-9_.-]*")
    repo_url: str = knob("", "git URL the gpu_pool worker clones the project from (empty: the remote `origin`)")


@section
class ServeParams:
    """``stsreg serve`` (and the model card's serving row): how the served model computes."""

    precision: str = knob("auto", "auto (fp32 on a CPU, where bf16 vectors move with their batch; bf16 on a GPU "
                          "with native bf16 where a probe shows the embeddings hold) | fp32 | bf16; `stsreg serve "
                          "--precision` overrides it",
                          choices=("auto", "fp32", "bf16"))
    scale: tuple[float, ...] = knob((0.0, 5.0), "[lo, hi]: the scale the served `score` is given on (the model's 0-5 "
                                    "score mapped linearly; e.g. [0, 1] for a table declared on 0-1); `stsreg serve "
                                    "--scale LO HI` overrides it")
    backend: str = knob("auto", "what runs the encoder: torch | onnx (fp32, graph-optimised) | onnx-int8 (dynamically "
                        "quantised) | auto (torch on a GPU; on a CPU the fastest, measured at start, of the backends "
                        "the version may serve); `stsreg serve --backend` overrides it",
                        choices=("auto", *SERVING_BACKENDS))
    max_avg7_drop: float = knob(0.3, "registration: an exported backend whose avg7 falls more than this below torch's "
                                "is kept out of serving (the reason is a tag on the version)", ge=0)
    workers: int = knob(1, "`stsreg serve` processes (each loads the model)", ge=1)
    threads: int = knob(0, "intra-op threads per process (0: torch's / onnxruntime's default, the cores)", ge=0)
    batch_tokens: int = knob(4096, "continuous batching: tokens of queued requests encoded in one encoder call "
                             "(TEI's max_batch_tokens); a larger request is split across calls", ge=1)
    max_queued_tokens: int = knob(262144, "tokens the request queue may hold: a request that would overflow it is "
                                  "answered 429 with Retry-After, a request larger than it 413", ge=1)
    truncate: bool = knob(True, "a text over the model's maximum length is cut there and said (usage.truncated, the "
                          "X-Truncated header); false: such a request is answered 413")
    request_timeout_s: float = knob(30.0, "a request's body must arrive within this (else 408), and a request is "
                                          "admitted only if the encoder will have answered it within this at its "
                                          "measured rate (else 429 at once)", gt=0)
    drain_s: float = knob(30.0, "on SIGTERM, requests in flight get this long to be answered", ge=0)
    follow_s: float = knob(10.0, "a server started on an alias (models:/name@champion) polls it this often and serves "
                                 "the version it moves to (loaded and answering before the switch); 0: never", ge=0)

    @model_validator(mode="after")
    def _valid_scale(self):
        check_scale(self.scale)
        if self.batch_tokens > self.max_queued_tokens:
            raise ValueError(f"serve.batch_tokens ({self.batch_tokens}) must be at most serve.max_queued_tokens "
                             f"({self.max_queued_tokens})")
        return self


@section
class LaunchParams:
    """How many processes a stage runs as on one machine (more machines: torchrun by hand, see the README)."""

    stage2_nproc: int = knob(1, "stage 2 processes: >1 runs `stsreg train --stage 2` under torchrun --standalone "
                             "(one process per GPU; gloo processes on CPU); rank 0 writes every output", ge=1)
