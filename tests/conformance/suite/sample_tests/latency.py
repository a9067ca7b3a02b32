from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest
from tests.conformance.suite.sample_tests import _checks
from tests.conformance.suite.suite_helpers import SAMPLE_SEED

TEST = ConformanceTest(
    short_name="SampleLatency",
    description="A sample test that needs the cluster environment.",
    features=(features.KV_TRANSFER_TOPOLOGY_LATENCY,),
    environments=frozenset({"cluster"}),
    slow=True,
    parallel=False,
    check=_checks.deploy_and_expect_good_frontend,
    seed=SAMPLE_SEED,
)
