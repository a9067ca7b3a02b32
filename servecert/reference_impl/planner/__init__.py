"""The reference planner (seed 003): scales prefill and decode workers to hold TTFT and ITL SLAs.

Pipeline per tick (``planner.Planner.step``), after Dynamo's planner design:

  OBSERVE   worker counts (``WorkerSource``), forward-pass metrics of every engine over
            ``/events/fpm`` (``fpm.FpmFeed``), traffic from the decode engines' Prometheus
            counters (``traffic.TrafficMeter``)
  PREDICT   next interval's request rate (``predictors``: constant, ARIMA, Kalman)
  PROPOSE   throughput-based replicas from the prediction and per-engine capacity of a perf
            model (``throughput_scaling``, ``perf_model``); load-based +/-1 from estimated
            TTFT/ITL against the SLA (``estimate``, ``load_scaling``)
  RECONCILE the throughput result is a floor under the load result; then min_endpoint, the
            one-step-per-decision limit and the GPU budget (``reconcile``)
  EXECUTE   through a connector (``connectors.virtual``: Dynamo's VirtualConnector protocol)

Nothing here imports the frontend or the fakes: the planner sees workers through a
``WorkerSource`` its deployer provides, and engines only over HTTP. Every interval is simulated
time divided by the time scale, as the fake engines' delays are.
"""
