"""A worker process for test_resilience.py to kill -9: its handler says so and never returns."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from switchyard_worker import Worker  # noqa: E402

worker = Worker(os.environ["SWITCHYARD_GATEWAY"], os.environ["SWITCHYARD_WORKER_TOKEN"])


@worker.handler("inference:image:generate")
def forever(job):
    job.progress(0.25, "in the doomed worker")
    print(f"running {job.run_id}", flush=True)
    while True:
        time.sleep(1)


worker.on("registered", lambda info: print("registered", flush=True))
worker.run()
