"""Infrastructure shared by both wings: parameters, errors, hashing, atomic writes, the pipeline lock, the code
closure of each stage, where code runs (device, seeds, torchrun), MLflow tracking, local servers and the docs'
generated blocks. It imports nothing else of the project."""
