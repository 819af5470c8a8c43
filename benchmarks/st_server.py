"""The server a user would write first: sentence-transformers behind FastAPI, one request at a time, no batching.
A row of ``make bench-serve`` (``python -m benchmarks.st_server FOLDER PORT``), not part of the product.

    POST /similarity {"sentence1": "...", "sentence2": "..."} -> {"cosine": ...}
"""

from __future__ import annotations

import sys


def app_for(folder: str):
    from fastapi import Body, FastAPI
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(folder, device="cpu")
    app = FastAPI()

    @app.get("/ping")
    def ping():
        return {"status": "ok"}

    @app.post("/similarity")
    def similarity(pair: dict = Body(...)):
        u, v = model.encode([pair["sentence1"], pair["sentence2"]], convert_to_tensor=True)
        return {"cosine": float(model.similarity(u, v)[0][0])}

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app_for(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
