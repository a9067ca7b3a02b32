"""``python -m servecert.fakes.pod_runner``: run the pod runner until SIGTERM/SIGINT (the cluster starts it).

Logs go to stderr (the cluster redirects them to ``logs/pod-runner.log``); ``--ready-file`` is
written once the first list of pods has been handled, which is what bring-up waits for.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from kubernetes import client, config

from servecert.fakes.pod_runner.runner import PodRunner
from servecert.fakes.pod_runner.zygote import Zygote


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servecert.fakes.pod_runner", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--pods-dir", required=True, type=Path, help="per-pod dirs: volumes, process logs, pid files")
    parser.add_argument("--pod-cidr", required=True, help="loopback block for pod IPs, e.g. 127.64.0.0/16")
    parser.add_argument("--ready-file", type=Path, help="written after the first pod list was handled")
    parser.add_argument("--backoff", type=float, nargs=2, default=(0.5, 5.0), metavar=("BASE", "CAP"), help="restart back-off, seconds")
    parser.add_argument("--no-zygote", action="store_true", help="start each pod's program as a fresh interpreter, not a fork")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(args.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    api = client.ApiClient(configuration)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("pod_runner").info("signal %d: stopping every process", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    zygote = None
    if not args.no_zygote:
        zygote = Zygote()
        args.pods_dir.mkdir(parents=True, exist_ok=True)
        zygote.start(args.pods_dir / "zygote.log")
    try:
        runner = PodRunner(
            api, args.pods_dir, args.pod_cidr, backoff=(args.backoff[0], args.backoff[1]), kubeconfig=args.kubeconfig, zygote=zygote
        )
    except ValueError as exc:
        print(f"pod runner: error: {exc}", file=sys.stderr)
        if zygote is not None:
            zygote.stop()
        return 2
    runner.run(stop, args.ready_file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
