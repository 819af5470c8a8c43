"""Serving a registered model at the model's speed: one package, one request path.

- :mod:`.protocol`: what a request may be (MLflow's ``/invocations`` forms, OpenAI's ``/v1/embeddings``, pairs for
  ``/similarity``) and the one JSON error shape every 4xx takes, naming the field and row that is wrong;
- :mod:`.server_config`: what a serving process is built from (the version, how it computes, how requests are
  admitted, the body limits), one typed object that worker processes receive whole;
- :mod:`.batcher`: concurrent requests gathered into encoder calls on a token budget, admitted by what they cost and
  served fairly between clients (:mod:`.encoder_cost` measures the cost), each caller given its own rows back in order;
- :mod:`.served`: the loaded version (its model on its backend, scale, identity) and the registry poll that swaps in a
  new champion when its alias moves;
- :mod:`.prometheus`: Prometheus counters and histograms (requests, latency, batch size, queue wait, what is served);
- :mod:`.app`: the ASGI app that answers on all of them;
- :mod:`.serve`: ``stsreg serve``: which version an URI or alias means, its settings, the app built on it;
- :mod:`.export`: the backends (torch, ONNX fp32, ONNX int8): export, load, time, choose, judge;
- :mod:`.packaging`: the registered folder (exports judged against torch on the evaluation pairs);
- :mod:`.batch_encode`: ``stsreg encode``, a large table embedded in resumable shards.

The MLflow pyfunc class stays at :mod:`stsreg.product.pyfunc_model`: registered versions pickled it by that path.
"""
