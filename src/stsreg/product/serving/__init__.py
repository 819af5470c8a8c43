"""Serving a registered model at the model's speed: one package, one request path.

- :mod:`.protocol`: what a request may be (MLflow's ``/invocations`` forms, OpenAI's ``/v1/embeddings``, pairs for
  ``/similarity``) and the one JSON error shape every 4xx takes, naming the field and row that is wrong;
- :mod:`.batcher`: concurrent requests gathered into one encoder call (a sentence budget, a few milliseconds of wait),
  each caller given its own rows back in order;
- :mod:`.served`: the loaded version (its model on its backend, scale, identity) and the registry poll that swaps in a
  new champion when its alias moves;
- :mod:`.prometheus`: Prometheus counters and histograms (requests, latency, batch size, queue wait, what is served);
- :mod:`.app`: the ASGI app that answers on all of them.
"""
