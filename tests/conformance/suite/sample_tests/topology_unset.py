from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest
from tests.conformance.suite.sample_tests import _checks
from tests.conformance.suite.suite_helpers import SAMPLE_SEED

TEST = ConformanceTest(
    short_name="SampleTopologyUnset",
    description="A sample test of KV_TRANSFER_TOPOLOGY_UNSET.",
    features=(features.KV_TRANSFER_TOPOLOGY_UNSET,),
    check=_checks.deploy_and_expect_good_frontend,
    seed=SAMPLE_SEED,
)
